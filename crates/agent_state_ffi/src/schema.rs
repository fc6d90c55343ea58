//! Schema evolution: steps of code that upgrade a stored state to the handle's schema version
//! (the declarative ones are open options), and the history's states as stored or upgraded.

use std::ffi::c_void;
use std::sync::Arc;

use super::args::{input, with_agent, BufferOut, NumberOut};
use super::boundary;
use super::buffer::AgentBuffer;
use super::callback::{AgentFreeFn, Callback, UserData};
use super::handle::AgentHandle;
use super::status::AgentStatus;
use agent_state::{Error, SchemaStep, Snapshot};

/// A schema step of code: upgrades `state` (`state_len` bytes of compact JSON, NUL-terminated
/// after its length, valid only during the call), stored under schema version `from`, to
/// version `from + 1`. Fill `*out` with the JSON text of the upgraded state (a plain object),
/// normally with `agent_buffer_copy` (the library frees it), and return 0. Any other return
/// fails the upgrade (`AGENT_ERR_MIGRATION`, nothing written); to say why, fill `*message`
/// with `agent_buffer_copy` (UTF-8 text, freed by the library), which the caller's
/// `agent_last_error` then includes.
pub type AgentSchemaStepFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        from: u32,
        state: *const u8,
        state_len: usize,
        out: *mut AgentBuffer,
        message: *mut AgentBuffer,
    ) -> i32,
>;

type SchemaStepFn = unsafe extern "C" fn(
    *mut c_void,
    u32,
    *const u8,
    usize,
    *mut AgentBuffer,
    *mut AgentBuffer,
) -> i32;

/// The bytes a callback left in `buffer`, and the buffer released.
///
/// # Safety
/// `buffer` is what the callback filled, per its contract: `data` NULL, or pointing at `len`
/// readable bytes owned by `owner` (from agent_buffer_copy) or by the callback.
unsafe fn take_bytes(mut buffer: AgentBuffer) -> Option<Vec<u8>> {
    let bytes = if buffer.data.is_null() {
        None
    } else {
        // SAFETY: per this function's contract.
        Some(unsafe { std::slice::from_raw_parts(buffer.data, buffer.len) }.to_vec())
    };
    // SAFETY: `owner` is NULL or came from agent_buffer_copy, per the contract.
    drop(unsafe { buffer.take_owner() });
    bytes
}

impl SchemaStep for Callback<SchemaStepFn> {
    fn upgrade(&self, from: u32, state: &Snapshot) -> Result<Vec<u8>, String> {
        let (mut out, mut message) = (AgentBuffer::EMPTY, AgentBuffer::EMPTY);
        // SAFETY: `f` is the caller's step; the state's bytes (NUL-terminated) and the two
        // empty buffers outlive the call.
        let rc = unsafe {
            (self.f)(
                self.user_data(),
                from,
                state.json_with_nul().as_ptr(),
                state.json().len(),
                &mut out,
                &mut message,
            )
        };
        // SAFETY: both buffers were filled (or not) by the step, per its contract.
        let (out, message) = unsafe { (take_bytes(out), take_bytes(message)) };
        if rc != 0 {
            return Err(message
                .map(|m| String::from_utf8_lossy(&m).into_owned())
                .unwrap_or_else(|| format!("returned {rc}")));
        }
        out.ok_or_else(|| "returned 0 but left *out empty".to_string())
    }
}

/// Sets the step of code of handle `h` that upgrades a state from schema version `from` to
/// `from + 1` (`fn` NULL removes it). A handle opened with `"schema_version": N` upgrades a
/// state stored under an older version on first touch, running the steps from its version up
/// to N (declarative ones from the `schema_steps` option, these for the others), then the
/// validator, and commits the result as a migration (`AGENT_CHANGE_MIGRATION` to hooks), once,
/// whichever handle or process gets there first. Set the steps right after `agent_open`,
/// before the first read or write.
///
/// The step runs with the handle's lock held inside the write transaction: it must be quick,
/// and a call into the same handle from inside it fails with `AGENT_ERR_BUSY`.
///
/// Ownership: `free_user_data` (may be NULL) is called exactly once with `user_data`: when the
/// step is replaced or removed, when the handle is closed, or right away if this call fails (or
/// `fn` is NULL).
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (`from` not below the handle's schema version, or a
/// declarative step from `from` already given in the options), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_BUSY` (from inside a hook of `h` that holds its lock).
/// Thread-safety: any thread; `user_data` must be usable from every thread that reads or writes.
#[no_mangle]
pub unsafe extern "C" fn agent_set_schema_step(
    h: AgentHandle,
    from: u32,
    r#fn: AgentSchemaStepFn,
    user_data: *mut c_void,
    free_user_data: AgentFreeFn,
) -> AgentStatus {
    let data = UserData::new(user_data, free_user_data);
    boundary::run("agent_set_schema_step", move || {
        with_agent(h, |agent| {
            let step = data
                .attach(r#fn)
                .map(|c| Arc::new(c) as Arc<dyn SchemaStep>);
            agent.set_schema_step(from, step)
        })
    })
}

/// The state at `version`, as `agent_get_state_at` finds it, as stored: `*out` receives it and
/// `*out_schema` (may be NULL) the schema version it was written under (the handle's own for
/// version 0, the initial state). Errors: those of `agent_get_state_at`.
/// Ownership: release `*out` with `agent_buffer_free`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_get_state_at_stored(
    h: AgentHandle,
    version: u64,
    out: *mut AgentBuffer,
    out_schema: *mut u32,
) -> AgentStatus {
    boundary::run("agent_get_state_at_stored", || {
        // SAFETY: NULL or writable, per the caller.
        let (out, out_schema) = unsafe { (BufferOut::new(out), NumberOut::new(out_schema)) };
        out.required()?;
        let (state, schema) = with_agent(h, |agent| agent.state_at_stored(version))?;
        out_schema.set(schema);
        out.snapshot(state);
        Ok(())
    })
}

/// `state` (`len` bytes of JSON text of an object), stored under schema version `from`,
/// upgraded to handle `h`'s schema version by its steps, into `*out`; nothing is written. For a
/// state read from the history (`agent_get_state_at_stored`, the `"schema"` of an
/// `agent_changes_since` entry) wanted in the current shape; a state of the handle's version
/// comes back as it is.
/// Errors: `AGENT_ERR_NEWER_SCHEMA` (`from` above the handle's version), `AGENT_ERR_MIGRATION`,
/// `AGENT_ERR_JSON` / `AGENT_ERR_CODEC` / `AGENT_ERR_INVALID_ARGUMENT` (the input),
/// `AGENT_ERR_BAD_HANDLE`.
/// Ownership: `state` is borrowed for the call; release `*out` with `agent_buffer_free`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_upgrade_state(
    h: AgentHandle,
    state: *const u8,
    len: usize,
    from: u32,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_upgrade_state", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        // SAFETY: `state` points at `len` readable bytes (or is NULL), per the caller.
        let state = unsafe { input(state, len, "state") }?;
        out.snapshot(with_agent(h, |agent| agent.upgrade_state(state, from))?);
        Ok(())
    })
}

/// The schema version handle `h` declares (its `schema_version` open option; 0 when none), in
/// `*out`. Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `out`), `AGENT_ERR_BAD_HANDLE`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_schema_version(h: AgentHandle, out: *mut u32) -> AgentStatus {
    boundary::run("agent_schema_version", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { NumberOut::new(out) };
        out.required("out")?;
        out.set(with_agent(h, |agent| {
            agent
                .is_open()
                .then(|| agent.schema_version())
                .ok_or(Error::Closed)
        })?);
        Ok(())
    })
}
