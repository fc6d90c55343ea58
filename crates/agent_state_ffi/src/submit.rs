//! Awaited calls: `agent_submit` hands a call to the library and returns; the call completes
//! later on one of the library's worker threads (a small pool, `agent_state::work`), or at once
//! on the calling thread when it need not wait (a read the handle's validated copy answers), and
//! its outcome, an `AgentCompletion`, goes to a callback (here) or to a completion queue
//! (`queue.rs`, whose file descriptor an event loop watches). A hundred awaiting callers need
//! neither a hundred threads nor a hundred connections.

use std::ffi::c_void;
use std::sync::Arc;

use agent_state::{work, Agent, Cancel, Error, Held, Result};

use super::args::input;
use super::boundary;
use super::buffer::{AgentBuffer, Owner};
use super::cancel::AgentCancel;
use super::handle::{self, AgentHandle, AGENTS, CANCELS};
use super::status::{AgentStatus, AGENT_OK};

/// `AgentCall.op`: read the state and its version (`data` unused, may be NULL).
pub const AGENT_OP_GET_STATE: i32 = 1;
/// `AgentCall.op`: merge `data`, an RFC 7396 merge patch (JSON object text), as
/// `agent_set_state` does.
pub const AGENT_OP_SET_STATE: i32 = 2;
/// `AgentCall.op`: replace the state with `data` (JSON object text), as `agent_replace_state`
/// does.
pub const AGENT_OP_REPLACE_STATE: i32 = 3;
/// `AgentCall.op`: apply `data`, an RFC 6902 JSON Patch (JSON array text), as
/// `agent_patch_state` does.
pub const AGENT_OP_PATCH_STATE: i32 = 4;

/// `AgentCall.flags`: compare-and-set; the write commits only if the state's version is still
/// `expected_version` (as the `_if` calls; else `AGENT_ERR_CONFLICT`, nothing written). Writes
/// only.
pub const AGENT_CALL_IF: u32 = 1;
/// `AgentCall.flags`: the completion carries no state (its `state` stays empty): the caller
/// does not need it, and a write then never assembles the encoding of the whole state for it.
pub const AGENT_CALL_NO_STATE: u32 = 2;

/// One call to submit (`agent_submit`, `agent_queue_submit`). Read, and `data` copied, before
/// the submitting function returns: the struct and the bytes may be reused at once.
#[repr(C)]
pub struct AgentCall {
    /// What the call does: `AGENT_OP_*`.
    pub op: i32,
    /// `AGENT_CALL_*` bits, or 0.
    pub flags: u32,
    /// The write's JSON text (`len` bytes); NULL refused for writes, unused by
    /// `AGENT_OP_GET_STATE`.
    pub data: *const u8,
    /// The number of bytes at `data`.
    pub len: usize,
    /// With `AGENT_CALL_IF`: the version the state must still have (0: nothing stored yet).
    pub expected_version: u64,
    /// A cancel token (`agent_cancel_new`) the call honours while it waits, as a call made
    /// under `agent_cancel_bind` does; 0 for none. The submitting thread's bound token is not
    /// used.
    pub cancel: AgentCancel,
    /// The caller's, handed back in the completion (to tell calls apart).
    pub tag: u64,
}

/// The outcome of a submitted call, as the synchronous call would have given it.
///
/// Ownership: `state` and `message` are the receiver's (the `done` callback's, or the caller of
/// `agent_queue_submit` / `agent_queue_take`): release each with `agent_buffer_free` (once; an
/// empty one may be freed too), or keep them as long as needed, on any thread.
#[repr(C)]
pub struct AgentCompletion {
    /// `AgentCall.tag`.
    pub tag: u64,
    /// `AGENT_OK`, or the status the synchronous call would have returned (`AGENT_ERR_HOOK`, as
    /// there: a hook after the commit failed and the change is committed, or the initial-state
    /// hook failed and nothing was written; read the version to tell).
    pub status: AgentStatus,
    /// 1 when the call committed a new version (a write that changed the state); 0 for reads,
    /// writes whose result was the stored state byte for byte, and errors.
    pub committed: u32,
    /// The state's version after the call (the new one when `committed`); 0 on error.
    pub version: u64,
    /// The state after the call (as the synchronous call's `*out`); empty on error and with
    /// `AGENT_CALL_NO_STATE`.
    pub state: AgentBuffer,
    /// On error, the message `agent_last_error` would have given after the synchronous call
    /// (it starts with that function's name); empty on success.
    pub message: AgentBuffer,
}

/// Called once per accepted call with its completion: on the thread that called
/// `agent_submit`, before it returns, when the call completed without waiting, else on a
/// library worker thread. The completion's buffers are the callback's to free (or to move
/// elsewhere); the struct itself is valid only during the call. It must return normally (no
/// longjmp, no exception) and should be quick: a worker thread runs no other call meanwhile. It
/// may submit further calls, but must not wait for their completion (were every worker waiting
/// so, none would be left to complete them); the same holds for a hook of a submitted write.
pub type AgentDoneFn =
    Option<unsafe extern "C" fn(context: *mut c_void, completion: *mut AgentCompletion)>;

/// A call's outcome, held by the library until it is delivered (see [`AgentCompletion`]).
pub(crate) struct Done {
    tag: u64,
    status: AgentStatus,
    committed: bool,
    version: u64,
    state: Option<Owner>,
    message: Option<String>,
}

impl Done {
    /// The completion C receives; its buffers become the receiver's.
    pub(crate) fn into_c(self) -> AgentCompletion {
        let message = self.message.map(|m| {
            let mut bytes = m.replace('\0', "\\0").into_bytes();
            bytes.push(0);
            AgentBuffer::from_owner(Owner::Bytes(bytes.into_boxed_slice()))
        });
        AgentCompletion {
            tag: self.tag,
            status: self.status,
            committed: u32::from(self.committed),
            version: self.version,
            state: self
                .state
                .map_or(AgentBuffer::EMPTY, AgentBuffer::from_owner),
            message: message.unwrap_or(AgentBuffer::EMPTY),
        }
    }
}

impl AgentCompletion {
    /// A completion with nothing in it (what an output completion holds until filled).
    pub(crate) const EMPTY: AgentCompletion = AgentCompletion {
        tag: 0,
        status: AGENT_OK,
        committed: 0,
        version: 0,
        state: AgentBuffer::EMPTY,
        message: AgentBuffer::EMPTY,
    };
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Merge,
    Replace,
    JsonPatch,
}

/// A submitted call, checked and with its own copy of the data: what a worker needs.
pub(crate) struct Request {
    op: Op,
    expected: Option<u64>,
    no_state: bool,
    data: Vec<u8>,
    tag: u64,
    cancel: Option<Cancel>,
}

impl Request {
    /// Checks and copies `*call`. Errors: `InvalidArgument` (NULL call, an unknown op or flag,
    /// `AGENT_CALL_IF` on a read, NULL data for a write), `Closed` (a cancel token never made or
    /// freed).
    ///
    /// # Safety
    /// `call` must be NULL or point to a readable `AgentCall` whose `data` is NULL or readable
    /// for `len` bytes.
    pub(crate) unsafe fn new(call: *const AgentCall) -> Result<Request> {
        // SAFETY: NULL or readable, per the caller.
        let call = unsafe { call.as_ref() }
            .ok_or_else(|| Error::InvalidArgument("call is NULL".into()))?;
        let op = match call.op {
            AGENT_OP_GET_STATE => Op::Get,
            AGENT_OP_SET_STATE => Op::Merge,
            AGENT_OP_REPLACE_STATE => Op::Replace,
            AGENT_OP_PATCH_STATE => Op::JsonPatch,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "call->op is {other}, not an AGENT_OP_* (1 to 4)"
                )))
            }
        };
        let unknown = call.flags & !(AGENT_CALL_IF | AGENT_CALL_NO_STATE);
        if unknown != 0 {
            return Err(Error::InvalidArgument(format!(
                "call->flags has bits {unknown:#x} that are no AGENT_CALL_* flag"
            )));
        }
        let conditional = call.flags & AGENT_CALL_IF != 0;
        if conditional && op == Op::Get {
            return Err(Error::InvalidArgument(
                "AGENT_CALL_IF applies to writes; AGENT_OP_GET_STATE takes no expected version"
                    .into(),
            ));
        }
        let data = match op {
            Op::Get => Vec::new(),
            // SAFETY: NULL or readable for `len` bytes, per the caller.
            _ => unsafe { input(call.data, call.len, "call->data") }?.to_vec(),
        };
        let cancel = match call.cancel {
            0 => None,
            token => Some(
                (*CANCELS.get(token).map_err(|_| {
                    Error::InvalidArgument(format!(
                        "call->cancel is {token}, not a live cancel token (agent_cancel_new)"
                    ))
                })?)
                .clone(),
            ),
        };
        Ok(Request {
            op,
            expected: conditional.then_some(call.expected_version),
            no_state: call.flags & AGENT_CALL_NO_STATE != 0,
            data,
            tag: call.tag,
            cancel,
        })
    }

    /// The synchronous function this call is, whose name its error messages start with.
    fn name(&self) -> &'static str {
        match (self.op, self.expected.is_some()) {
            (Op::Get, _) => "agent_get_state_versioned",
            (Op::Merge, false) => "agent_set_state",
            (Op::Merge, true) => "agent_set_state_if",
            (Op::Replace, false) => "agent_replace_state",
            (Op::Replace, true) => "agent_replace_state_if",
            (Op::JsonPatch, false) => "agent_patch_state",
            (Op::JsonPatch, true) => "agent_patch_state_if",
        }
    }

    /// The completion of a read that found `held`.
    fn read(&self, held: Arc<Held>) -> Done {
        Done {
            tag: self.tag,
            status: AGENT_OK,
            committed: false,
            version: held.version(),
            state: (!self.no_state).then_some(Owner::Held(held)),
            message: None,
        }
    }

    /// Makes the call on `agent` (on a worker thread, its token bound), inside the panic
    /// boundary.
    fn run(&self, agent: &Agent) -> Done {
        let outcome = boundary::outcome(self.name(), || match self.op {
            Op::Get => agent.read().map(|held| self.read(held)),
            Op::Merge => agent
                .set_state_written(&self.data, self.expected)
                .map(|w| self.written(w)),
            Op::Replace => agent
                .replace_state_written(&self.data, self.expected)
                .map(|w| self.written(w)),
            Op::JsonPatch => agent
                .patch_state_written(&self.data, self.expected)
                .map(|w| self.written(w)),
        });
        outcome.unwrap_or_else(|(status, message)| Done {
            tag: self.tag,
            status,
            committed: false,
            version: 0,
            state: None,
            message: Some(message),
        })
    }

    fn written(&self, w: agent_state::Written) -> Done {
        Done {
            tag: self.tag,
            status: AGENT_OK,
            committed: w.committed,
            version: w.version,
            state: (!self.no_state).then_some(Owner::Snapshot(w.state)),
            message: None,
        }
    }
}

/// Submits `request` on handle `h`: `Some` completion when it completed at once (a read the
/// handle's validated copy answers, on this thread; `deliver` is then dropped unused), `None`
/// when it went to the worker pool, which hands its completion to `deliver` later. Errors (not
/// accepted, `deliver` never called): `Closed` (a bad handle), those of `work::spawn`.
pub(crate) fn submit(
    h: AgentHandle,
    request: Request,
    deliver: impl FnOnce(Done) + Send + 'static,
) -> Result<Option<Done>> {
    let fired = request.cancel.as_ref().is_some_and(Cancel::is_cancelled);
    if request.op == Op::Get && !fired {
        // A fired token sends the read to the worker, which reports it cancelled as the
        // synchronous read would.
        if let Some(held) = handle::with(h, |agent| Ok(agent.read_now()))? {
            return Ok(Some(request.read(held)));
        }
    }
    let agent = AGENTS.get(h)?;
    let cancel = request.cancel.clone();
    work::spawn(cancel, move || deliver(request.run(&agent)))?;
    Ok(None)
}

/// A `done` callback with its context, to run on whichever thread completes the call.
#[derive(Clone, Copy)]
struct Caller {
    done: unsafe extern "C" fn(*mut c_void, *mut AgentCompletion),
    context: *mut c_void,
}

// SAFETY: `agent_submit` documents that `done` is called with `context` on a library worker
// thread: the caller vouches that both may be used from any thread. The library never touches
// `context` itself, it only passes it back.
unsafe impl Send for Caller {}

impl Caller {
    fn deliver(self, done: Done) {
        let mut completion = done.into_c();
        // SAFETY: `done` is the caller's callback, called once per accepted call with its
        // `context` and a completion valid for the call, as `agent_submit` documents.
        unsafe { (self.done)(self.context, &mut completion) };
        // The buffers are now the callback's: nothing here frees them.
    }
}

/// Submits `call` on handle `h`, to complete later, and returns. `AGENT_OK`: accepted;
/// `done(context, &completion)` is then called exactly once: before `agent_submit` returns, on
/// the calling thread, when the call completes without waiting (a read the handle's validated
/// copy answers: `AGENT_OP_GET_STATE` when nothing was committed since the handle's last read, on
/// any thread, submitted reads included, and the backend can tell without I/O, as on a SQLite
/// file), otherwise later, on one of the library's worker threads. Any other status: not
/// accepted, `done` never called.
///
/// What the call does is exactly the synchronous call (`agent_get_state_versioned`,
/// `agent_set_state`, `agent_replace_state`, `agent_patch_state` and their `_if` forms): the same
/// transaction, the same errors in the completion. Submitted calls on one handle may run at
/// once, as synchronous calls from several threads do. A write's `on_state_changed` hooks run
/// after its commit on the worker thread that made it, before `done`.
///
/// Worker threads: at most 8 at once (the environment variable `AGENT_STATE_WORKERS`, a whole
/// number from 1 to 1024, read once by the first submitted call, sets another cap); they start
/// on demand and exit after 3 seconds without work, and calls wait their turn, first in first
/// out, while all are busy. A call waiting for a lock holds its worker meanwhile.
///
/// Cancelling: `call->cancel` (a token of `agent_cancel_new`), fired while the call waits,
/// completes it with `AGENT_ERR_CANCELLED`, nothing written (a commit under way is not
/// cancelled). Closing the handle with calls in flight: each completes, those that had not
/// started with `AGENT_ERR_BAD_HANDLE`.
///
/// fork(): the child starts with no worker thread; calls in flight in the parent at the fork
/// never complete in the child (their `done` is not called there).
///
/// Ownership: `*call` and its `data` are read and copied before this returns. The completion's
/// buffers are the callback's (see `AgentCompletion`). `context` is only passed back.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `call` or `done`; an unknown `op` or flag;
/// `AGENT_CALL_IF` on a read; NULL `data` for a write; `cancel` not a live token;
/// `AGENT_STATE_WORKERS` not a whole number from 1 to 1024), `AGENT_ERR_BAD_HANDLE`,
/// `AGENT_ERR_BUSY` (no worker runs and the system refused to start one),
/// `AGENT_ERR_UNAVAILABLE` (a process 64 or more fork() generations from the one that loaded the
/// library: make the call synchronously).
/// Thread-safety: any thread; `done` and `context` must be usable from any thread.
///
/// # Safety
/// `call` must be NULL or point to a readable `AgentCall` whose `data` is NULL or readable for
/// `len` bytes during the call; `done`, when not NULL, must be a function of this signature.
#[no_mangle]
pub unsafe extern "C" fn agent_submit(
    h: AgentHandle,
    call: *const AgentCall,
    done: AgentDoneFn,
    context: *mut c_void,
) -> AgentStatus {
    boundary::run("agent_submit", || {
        let done = done.ok_or_else(|| Error::InvalidArgument("done is NULL".into()))?;
        let caller = Caller { done, context };
        // SAFETY: NULL or readable, per the caller.
        let request = unsafe { Request::new(call) }?;
        if let Some(now) = submit(h, request, move |d| caller.deliver(d))? {
            caller.deliver(now);
        }
        Ok(())
    })
}
