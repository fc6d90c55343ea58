//! `AgentBuffer`: read-only byte views handed out by the library.

use std::ffi::c_void;
use std::sync::Arc;

use super::args::BufferOut;
use super::boundary;
use super::status::AgentStatus;
use agent_state::Error;
use agent_state::{Held, Snapshot};

/// A read-only view of bytes owned by the library: JSON text, `len` bytes at `data`, followed by
/// a NUL byte (not counted in `len`) so it may also be used as a C string.
///
/// Ownership: a buffer filled by an `agent_*` call belongs to the caller, who must release it
/// exactly once with `agent_buffer_free` (which zeroes it, so a second call is harmless). The
/// bytes never change while the buffer is held, even if the state changes or the handle is
/// closed. `owner` is private to the library: never change it. An empty buffer is
/// `{NULL, 0, NULL}`; every `agent_*` call that fails leaves its output buffer empty.
///
/// Thread-safety: a buffer may be read and freed from any thread.
#[repr(C)]
pub struct AgentBuffer {
    /// First byte of the view, or NULL for an empty buffer.
    pub data: *const u8,
    /// Number of bytes at `data`, not counting the NUL terminator.
    pub len: usize,
    /// Private to the library.
    pub owner: *mut c_void,
}

/// What keeps a buffer's bytes alive.
pub(crate) enum Owner {
    /// A state snapshot shared with the agent's cache: handing one out costs no copy.
    Snapshot(Arc<Snapshot>),
    /// A state as the reading thread holds it: handing one out costs no copy, no allocation,
    /// and writes only that thread's count (see `Agent::read`).
    Held(Arc<Held>),
    /// A copy made by `agent_buffer_copy`, with its NUL terminator.
    Bytes(Box<[u8]>),
}

/// Bit 0 of `owner` set: it is an `Arc<Held>` (aligned far beyond 2), not a `Box<Owner>`.
const HELD: usize = 1;

impl AgentBuffer {
    pub(crate) const EMPTY: AgentBuffer = AgentBuffer {
        data: std::ptr::null(),
        len: 0,
        owner: std::ptr::null_mut(),
    };

    pub(crate) fn from_owner(owner: Owner) -> AgentBuffer {
        let (data, len) = match owner {
            Owner::Held(held) => return Self::from_held(held),
            Owner::Snapshot(ref s) => (s.json_with_nul().as_ptr(), s.json().len()),
            Owner::Bytes(ref b) => (b.as_ptr(), b.len() - 1),
        };
        let owner = Box::into_raw(Box::new(owner)).cast();
        AgentBuffer { data, len, owner }
    }

    /// The hot read's buffer: the reference itself, tagged, instead of a box around it. Inlined
    /// into its callers, so that the buffer is written where it goes (built apart and copied,
    /// its 16-byte copy waited for the separate stores of its parts on every hot read).
    #[inline]
    pub(crate) fn from_held(held: Arc<Held>) -> AgentBuffer {
        let data = held.json_with_nul().as_ptr();
        let len = held.json().len();
        let owner = Arc::into_raw(held)
            .cast_mut()
            .cast::<c_void>()
            .wrapping_byte_add(HELD);
        AgentBuffer { data, len, owner }
    }

    pub(crate) fn from_snapshot(snapshot: Arc<Snapshot>) -> AgentBuffer {
        Self::from_owner(Owner::Snapshot(snapshot))
    }

    /// Takes the owner back, leaving the buffer empty.
    ///
    /// # Safety
    /// `self.owner` must be NULL or a pointer this module produced and has not taken back.
    pub(crate) unsafe fn take_owner(&mut self) -> Option<Owner> {
        let owner = self.owner;
        *self = AgentBuffer::EMPTY;
        if owner.is_null() {
            None
        } else if owner.addr() & HELD != 0 {
            let held = owner.wrapping_byte_sub(HELD).cast::<Held>().cast_const();
            // SAFETY: by this function's contract, `owner` is the tagged pointer `from_owner`
            // made with Arc::into_raw, not reclaimed since (we just cleared the only copy we
            // hand out, in this struct); untagged, it is that pointer again.
            Some(Owner::Held(unsafe { Arc::from_raw(held) }))
        } else {
            // SAFETY: by this function's contract `owner` came from Box::into_raw in
            // from_owner and has not been reclaimed since (as above).
            Some(*unsafe { Box::from_raw(owner.cast::<Owner>()) })
        }
    }
}

/// Writes `value` to `out` when `out` is not NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing one `AgentBuffer`.
#[inline]
pub(crate) unsafe fn store(out: *mut AgentBuffer, value: AgentBuffer) {
    if out.is_null() {
        // Nobody to hand it to: release it now.
        let mut value = value;
        // SAFETY: `value` was just built by this module.
        drop(unsafe { value.take_owner() });
    } else {
        // SAFETY: the caller guarantees `out` is valid for writes; `write` does not read or
        // drop the previous (possibly uninitialized) contents.
        unsafe { out.write(value) };
    }
}

/// Copies `len` bytes at `data` into a new library-owned buffer (NUL-terminated), e.g. for an
/// initial-state hook to hand its answer back.
///
/// Arguments: `data` may be NULL only when `len` is 0; `out` must not be NULL.
/// Ownership: `data` is only read during the call; `*out` belongs to the caller, to be released
/// with `agent_buffer_free` (or handed back to the library from an initial-state hook).
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` for a NULL `out`, or NULL `data` with `len` > 0.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_buffer_copy(
    data: *const u8,
    len: usize,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_buffer_copy", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        if data.is_null() && len > 0 {
            return Err(Error::InvalidArgument("data is NULL but len > 0".into()));
        }
        let mut bytes = Vec::with_capacity(len + 1);
        if len > 0 {
            // SAFETY: the caller guarantees `data` is valid for `len` bytes of reads.
            bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(data, len) });
        }
        bytes.push(0);
        out.bytes_with_nul(bytes);
        Ok(())
    })
}

/// Releases a buffer filled by the library and sets it to `{NULL, 0, NULL}`.
///
/// NULL-safe, and harmless on an empty or already-freed buffer. Passing a buffer the library
/// did not fill (or a copy of one that was already freed) is undefined behaviour.
/// Thread-safety: any thread, but not concurrently on the same `AgentBuffer`.
#[no_mangle]
pub unsafe extern "C" fn agent_buffer_free(buf: *mut AgentBuffer) {
    boundary::guard("agent_buffer_free", || {
        if buf.is_null() {
            return;
        }
        // SAFETY: `buf` is not NULL and the caller guarantees it is a buffer the library
        // filled (so `owner` is NULL or ours), exclusively accessible during this call.
        drop(unsafe { (*buf).take_owner() });
    })
}
