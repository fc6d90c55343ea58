//! Argument helpers, so that an export reads like its contract: input slices, output
//! parameters (emptied on entry, filled on success), and the agent behind a handle.

use std::ffi::{c_char, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::buffer::{self, AgentBuffer, Owner};
use super::handle::{self, AgentHandle};
use agent_state::{Agent, OpenOptions};
use agent_state::{Error, Result};
use agent_state::{Held, Snapshot};

/// Borrows `len` bytes at `ptr`, refusing NULL (`what` names the argument in the message).
///
/// # Safety
/// `ptr` must be NULL or valid for `len` bytes of reads for the returned lifetime.
pub(crate) unsafe fn input<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    if ptr.is_null() {
        return Err(Error::InvalidArgument(format!("{what} is NULL")));
    }
    // SAFETY: not NULL, and the caller guarantees `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Runs `f` on the agent behind handle `h` ([`Error::Closed`] for a closed or unknown one).
pub(crate) fn with_agent<T>(h: AgentHandle, f: impl FnOnce(&Agent) -> Result<T>) -> Result<T> {
    handle::with(h, f)
}

/// An output buffer parameter: NULL (not wanted) or writable. Emptied on entry, so that it is
/// empty whatever happens next; filled once, on success.
pub(crate) struct BufferOut(*mut AgentBuffer);

impl BufferOut {
    /// Empties `*out` when `out` is not NULL.
    ///
    /// # Safety
    /// `out` must be NULL or valid for writing one `AgentBuffer` until the export returns.
    pub(crate) unsafe fn new(out: *mut AgentBuffer) -> BufferOut {
        if !out.is_null() {
            // SAFETY: by this function's contract.
            unsafe { out.write(AgentBuffer::EMPTY) };
        }
        BufferOut(out)
    }

    /// Refuses a NULL buffer where the export needs one.
    pub(crate) fn required(&self) -> Result<()> {
        if self.0.is_null() {
            return Err(Error::InvalidArgument("out is NULL".into()));
        }
        Ok(())
    }

    /// Hands out a view of `state` (nothing, when not wanted: a view needs the state's whole
    /// encoding, which a write after a JSON Patch or a merge has not assembled, and a writer
    /// that passes NULL would pay for it on every write).
    pub(crate) fn snapshot(self, state: Arc<Snapshot>) {
        if self.0.is_null() {
            return;
        }
        // SAFETY: NULL or writable, by the contract of `new`.
        unsafe { buffer::store(self.0, AgentBuffer::from_snapshot(state)) };
    }

    /// Hands out a view of the state a thread holds (released at once when not wanted).
    #[inline]
    pub(crate) fn held(self, held: Arc<Held>) {
        // SAFETY: NULL or writable, by the contract of `new`.
        unsafe { buffer::store(self.0, AgentBuffer::from_held(held)) };
    }

    /// Hands out `bytes`, which end with a NUL byte (released at once when not wanted).
    pub(crate) fn bytes_with_nul(self, bytes: Vec<u8>) {
        let owner = Owner::Bytes(bytes.into_boxed_slice());
        // SAFETY: NULL or writable, by the contract of `new`.
        unsafe { buffer::store(self.0, AgentBuffer::from_owner(owner)) };
    }
}

/// An output number (or handle) parameter: NULL (not wanted) or writable. Set to 0 on
/// entry, so that it is 0 whatever happens next.
pub(crate) struct NumberOut<T>(*mut T);

impl<T: Copy + Default> NumberOut<T> {
    /// Sets `*out` to 0 when `out` is not NULL.
    ///
    /// # Safety
    /// `out` must be NULL or valid for writing one `T` until the export returns.
    pub(crate) unsafe fn new(out: *mut T) -> NumberOut<T> {
        let out = NumberOut(out);
        out.set(T::default());
        out
    }

    /// Refuses NULL where the export needs the number (`what` names the argument).
    pub(crate) fn required(&self, what: &str) -> Result<()> {
        if self.0.is_null() {
            return Err(Error::InvalidArgument(format!("{what} is NULL")));
        }
        Ok(())
    }

    pub(crate) fn set(&self, value: T) {
        if !self.0.is_null() {
            // SAFETY: not NULL, so writable by the contract of `new`.
            unsafe { self.0.write(value) };
        }
    }
}

/// The store path and open options of `agent_open` and the store functions: `path` a
/// non-empty NUL-terminated string, `options_json` NULL (the defaults) or a NUL-terminated
/// JSON object.
///
/// # Safety
/// Each pointer must be NULL or point to a NUL-terminated string readable during the call.
pub(crate) unsafe fn open_args(
    path: *const c_char,
    options_json: *const c_char,
) -> Result<(PathBuf, OpenOptions)> {
    if path.is_null() {
        return Err(Error::InvalidArgument("path is NULL".into()));
    }
    // SAFETY: not NULL; the caller guarantees a NUL-terminated string.
    let path = unsafe { CStr::from_ptr(path) }.to_bytes();
    if path.is_empty() {
        return Err(Error::InvalidArgument("path is empty".into()));
    }
    let options = if options_json.is_null() {
        OpenOptions::default()
    } else {
        // SAFETY: not NULL; the caller guarantees a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(options_json) }.to_bytes();
        OpenOptions::from_json(text).map_err(|e| match e {
            Error::Json(m) => Error::Json(format!("options: {m}")),
            other => other,
        })?
    };
    Ok((PathBuf::from(OsStr::from_bytes(path)), options))
}

/// A NUL-terminated UTF-8 string argument, or `None` for NULL (`what` names it in errors).
///
/// # Safety
/// `text` must be NULL or point to a NUL-terminated string readable during the call.
pub(crate) unsafe fn optional_text(text: *const c_char, what: &str) -> Result<Option<String>> {
    if text.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL; the caller guarantees a NUL-terminated string.
    let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
    std::str::from_utf8(bytes)
        .map(|s| Some(s.to_string()))
        .map_err(|_| Error::InvalidArgument(format!("{what} is not UTF-8")))
}
