//! Completion queues, for event loops: `agent_queue_new`, `agent_queue_submit`,
//! `agent_queue_take`, `agent_queue_free`. Submitted calls complete into the queue, and its file
//! descriptor (an eventfd the queue owns) is readable while any completion waits in it: the
//! loop watches the descriptor and takes the completions when it is readable, on its own
//! thread, with no callback from a library thread.
//!
//! The descriptor's readiness is kept under the queue's lock: it is signalled when a completion
//! arrives in an empty queue and cleared when a take leaves the queue empty, so that it is
//! readable exactly while completions wait.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_state::{work, Error, Result};

use super::args::NumberOut;
use super::boundary;
use super::handle::{AgentHandle, Registry};
use super::status::AgentStatus;
use super::submit::{self, AgentCall, AgentCompletion, Done, Request};

/// A completion queue, as C sees it: an opaque id, like `AgentHandle` (0 is never a queue).
pub type AgentQueue = u64;

/// The live queues.
static QUEUES: Registry<Queue> = Registry::new();

/// One queue.
struct Queue {
    /// The fork generation of the process that made it: a child's copy is not used.
    generation: u64,
    /// The eventfd; -1 once closed.
    fd: AtomicI32,
    waiting: Mutex<Waiting>,
}

struct Waiting {
    done: VecDeque<Done>,
    /// Freed: completions that arrive now are dropped.
    freed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A completion arrives (on the thread that completed the call).
    fn push(&self, done: Done) {
        let mut waiting = self.lock();
        if waiting.freed {
            drop(waiting);
            drop(done); // completes into nothing: its buffers are released here
            return;
        }
        waiting.done.push_back(done);
        if waiting.done.len() == 1 {
            self.signal(1);
        }
    }

    /// Adds to the eventfd's counter (makes it readable), under the queue's lock.
    fn signal(&self, n: u64) {
        let fd = self.fd.load(Ordering::Relaxed);
        // SAFETY: writes 8 bytes from a live u64 to the queue's eventfd, open while the queue is
        // not freed (the caller holds the lock that freeing takes before closing it). It cannot
        // block (EFD_NONBLOCK) and cannot overflow: the counter is 0 or 1 here.
        let written = unsafe { libc::write(fd, std::ptr::from_ref(&n).cast(), 8) };
        debug_assert_eq!(written, 8, "eventfd write");
    }

    /// Resets the eventfd's counter to 0 (not readable), under the queue's lock.
    fn clear(&self) {
        let fd = self.fd.load(Ordering::Relaxed);
        let mut n = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from the queue's eventfd (open, as in
        // `signal`); EAGAIN when it is already 0 leaves it so.
        unsafe { libc::read(fd, std::ptr::from_mut(&mut n).cast(), 8) };
    }

    /// Closes the eventfd (once).
    fn close(&self) {
        let fd = self.fd.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: the queue's own descriptor, closed once (the swap took it).
            unsafe { libc::close(fd) };
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.close();
    }
}

/// The queue behind `q`, made by this process. Errors: `Closed` (never made, freed, or made by
/// the parent before `fork()`).
fn live(q: AgentQueue) -> Result<Arc<Queue>> {
    let queue = QUEUES.get(q)?;
    if queue.generation != work::fork_generation() {
        return Err(Error::InvalidArgument(
            "the queue was made before fork() by the parent process; a child makes its own \
             (agent_queue_new) and frees the inherited one with agent_queue_free"
                .into(),
        ));
    }
    Ok(queue)
}

/// Makes a completion queue into `*out`, and its file descriptor into `*out_fd` (when not
/// NULL): an eventfd, readable while completions wait in the queue. Watch it for reading
/// (epoll, poll, an event loop's reader); never read, write or close it yourself: the queue owns
/// it, `agent_queue_take` clears it, and `agent_queue_free` closes it.
///
/// fork(): a queue belongs to the process that made it. In a child, the inherited queue is
/// refused (`AGENT_ERR_INVALID_ARGUMENT`) except by `agent_queue_free`, which closes the child's
/// copy of the descriptor; the completions of calls in flight in the parent never arrive in the
/// child.
///
/// Ownership: the queue is the caller's until `agent_queue_free`. Errors:
/// `AGENT_ERR_INVALID_ARGUMENT` (`out` is NULL), `AGENT_ERR_STORAGE` (the system refused an
/// eventfd: too many open files). Thread-safety: any thread.
///
/// # Safety
/// `out` must be NULL or writable for one `AgentQueue`; `out_fd` NULL or writable for one
/// `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn agent_queue_new(out: *mut AgentQueue, out_fd: *mut i32) -> AgentStatus {
    boundary::run("agent_queue_new", || {
        // SAFETY: NULL or writable, per the caller.
        let (out, out_fd) = unsafe { (NumberOut::new(out), NumberOut::new(out_fd)) };
        out.required("out")?;
        // SAFETY: eventfd takes no pointer; it returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::Storage(
                format!("the completion queue's eventfd could not be made: {e}").into(),
            ));
        }
        let queue = Queue {
            generation: work::fork_generation(),
            fd: AtomicI32::new(fd),
            waiting: Mutex::new(Waiting {
                done: VecDeque::new(),
                freed: false,
            }),
        };
        out.set(QUEUES.insert(queue));
        out_fd.set(fd);
        Ok(())
    })
}

/// `agent_submit` whose completion goes to queue `q`: `AGENT_OK`, accepted. When the call
/// completes without waiting (a read the handle's validated copy answers), its completion is
/// written to `*now` and `*out_done` set to 1: nothing is queued and the descriptor is not
/// touched. Otherwise `*out_done` is 0 (and `*now` empty), and the completion arrives in the
/// queue later, from a worker thread. Any other status: not accepted, nothing will arrive.
///
/// What the call does, the worker pool, cancelling, closing the handle meanwhile and fork: as
/// `agent_submit`. A call whose queue is freed before it completes completes into nothing (its
/// buffers are released by the library).
///
/// Ownership: `*call` and its `data` are copied before this returns; `*now`'s buffers, when
/// `*out_done` is 1, are the caller's (free them with `agent_buffer_free`).
/// Errors: those of `agent_submit` (`AGENT_ERR_INVALID_ARGUMENT` also for NULL `now` or
/// `out_done`, or a queue inherited across fork()), and `AGENT_ERR_BAD_HANDLE` for a queue
/// never made or freed.
/// Thread-safety: any thread, on the same queue at once.
///
/// # Safety
/// `call` as `agent_submit`'s; `now` NULL or writable for one `AgentCompletion`; `out_done`
/// NULL or writable for one `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn agent_queue_submit(
    q: AgentQueue,
    h: AgentHandle,
    call: *const AgentCall,
    now: *mut AgentCompletion,
    out_done: *mut i32,
) -> AgentStatus {
    boundary::run("agent_queue_submit", || {
        if !now.is_null() {
            // SAFETY: writable, per the caller; empty until filled.
            unsafe { now.write(AgentCompletion::EMPTY) };
        }
        // SAFETY: NULL or writable, per the caller.
        let out_done = unsafe { NumberOut::new(out_done) };
        out_done.required("out_done")?;
        if now.is_null() {
            return Err(Error::InvalidArgument("now is NULL".into()));
        }
        let queue = live(q)?;
        // SAFETY: NULL or readable, per the caller.
        let request = unsafe { Request::new(call) }?;
        if let Some(done) = submit::submit(h, request, move |d| queue.push(d))? {
            // SAFETY: not NULL, and writable per the caller.
            unsafe { now.write(done.into_c()) };
            out_done.set(1);
        }
        Ok(())
    })
}

/// Moves up to `cap` waiting completions, oldest first, into `out[0]` to `out[*out_n - 1]`,
/// without waiting (`*out_n` is 0 when none waits). When the queue is left empty, its
/// descriptor stops being readable.
///
/// Ownership: the completions' buffers become the caller's (free each with
/// `agent_buffer_free`). Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL `out_n`; NULL `out` with
/// `cap` > 0; a queue inherited across fork()), `AGENT_ERR_BAD_HANDLE` (never made, or freed).
/// Thread-safety: any thread; two threads taking from one queue each get different
/// completions.
///
/// # Safety
/// `out` must be NULL or writable for `cap` `AgentCompletion`s; `out_n` NULL or writable for
/// one `size_t`.
#[no_mangle]
pub unsafe extern "C" fn agent_queue_take(
    q: AgentQueue,
    out: *mut AgentCompletion,
    cap: usize,
    out_n: *mut usize,
) -> AgentStatus {
    boundary::run("agent_queue_take", || {
        // SAFETY: NULL or writable, per the caller.
        let out_n = unsafe { NumberOut::new(out_n) };
        out_n.required("out_n")?;
        if out.is_null() && cap > 0 {
            return Err(Error::InvalidArgument("out is NULL but cap > 0".into()));
        }
        let queue = live(q)?;
        let mut waiting = queue.lock();
        let n = cap.min(waiting.done.len());
        for (i, done) in waiting.done.drain(..n).enumerate() {
            // SAFETY: i < n <= cap, and `out` is writable for `cap` completions per the
            // caller (not NULL: cap > 0 here).
            unsafe { out.add(i).write(done.into_c()) };
        }
        if waiting.done.is_empty() {
            queue.clear();
        }
        drop(waiting);
        out_n.set(n);
        Ok(())
    })
}

/// Frees queue `q`: the completions still waiting in it are released, its descriptor is closed
/// (stop watching it first), and calls still in flight complete into nothing. The id is never
/// valid again. In a child after fork(), freeing the inherited queue closes the child's copy of
/// the descriptor only.
///
/// Errors: `AGENT_ERR_BAD_HANDLE` (never made, or already freed). Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn agent_queue_free(q: AgentQueue) -> AgentStatus {
    boundary::run("agent_queue_free", || {
        if q == 0 {
            return Err(Error::Closed);
        }
        let queue = QUEUES.remove(q)?;
        if queue.generation != work::fork_generation() {
            // The parent's: its lock may have been held at the fork, and its completions are
            // the parent's. Only this process's copy of the descriptor goes.
            queue.close();
            return Ok(());
        }
        let released = {
            let mut waiting = queue.lock();
            waiting.freed = true;
            queue.close();
            std::mem::take(&mut waiting.done)
        };
        drop(released);
        Ok(())
    })
}
