"""Library calls in flight: what each thread's calls carry back from their callbacks, and the
exit step that keeps threads from being ended inside the library.

**Frames.** Every library call that may run a Python callback pushes a *frame* (a list) on
its thread's stack for its duration. A callback that raises appends the exception to the
innermost frame; the call then raises it (see ``_native``). Frames nest: a call made from
inside a callback gets its own. A thread whose stack is not empty is inside the library.

**Exit.** When the interpreter finalizes, CPython ends each daemon thread that tries to take the
GIL back with ``pthread_exit``. A thread inside a library call that is about to run (or is
running) a Python callback would be unwound through the library's Rust frames, and a forced
unwind through them aborts the process ("FATAL: exception not rethrown"). No code of ours can
run when finalization starts, so the binding acts just before, in an ``atexit`` function:
from then on a *daemon* thread that starts a library call gets ``SystemExit`` instead (ending
it quietly, as the interpreter would end it a moment later); then the function waits for the
calls already in flight (their callbacks finish normally). Calls nested in a call in flight go
ahead (the call waited for needs them); so do calls of the exiting thread (``atexit``
functions that run later may still use agents) and of non-daemon threads (only threads started
by such functions: the others were joined before ``atexit`` functions run). The wait is bounded
(``EXIT_WAIT_SECONDS``): a callback that never returns must not hang the exit.

The ``atexit`` function is registered when the first agent opens, right after its
``weakref.finalize`` (whose own ``atexit`` function is registered by the process's first
``finalize``): ``atexit`` runs functions last-registered first, so the exit step runs before
the finalizers that close the agents still open, and they find no other thread inside.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional

#: How long, at exit, the binding waits for library calls in flight on other threads.
EXIT_WAIT_SECONDS = 10.0


class Frames(list[Any]):  # not typing.List, which would add Generic to the bases
    """One thread's stack of frames, innermost last (a list, so the callbacks' ``frames[-1] +=
    (exc,)`` runs no Python code; weakly referenceable, so the exit step can find every
    thread's stack without keeping finished threads' alive)."""

    __slots__ = ("__weakref__",)
    # Each thread's stack is one object: compared and hashed by identity (for the WeakSet).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__  # type: ignore[assignment]  # list's is None: unhashable


#: ``tls.frames``: the calling thread's :class:`Frames` (absent until its first call).
tls = threading.local()
#: A frame's entries are exceptions raised by callbacks (or by a signal handler once a callback
#: had answered), and ``(REJECTED, exc)``: the exception with which the validator rejected the
#: change (a tuple, so that a callback records it without calling anything).
REJECTED = "rejected by the validator"
#: ``(STEP_FAILED, exc)``: the exception a schema step of code raised (the
#: :class:`~agent_state.MigrationError`'s cause).
STEP_FAILED = "raised by a schema step"
_every: "weakref.WeakSet[Frames]" = weakref.WeakSet()
_every_lock = threading.Lock()  # a WeakSet may not grow while the exit step iterates it


def frames() -> Frames:
    """The calling thread's stack of frames."""
    try:
        stack: Frames = tls.frames
        return stack
    except AttributeError:
        stack = Frames()
        with _every_lock:
            _every.add(stack)
        tls.frames = stack
        return stack


#: True once the exit step began. Read by every call (a global, so the test is cheap).
exiting = False
_exit_thread: Optional[int] = None
_deferred: List[Callable[[], Any]] = []


def _stays_out(nested: bool) -> bool:
    # Nested calls go ahead: the call in flight they are part of is waited for.
    return not nested and threading.get_ident() != _exit_thread and threading.current_thread().daemon


def refuses() -> bool:
    """Whether a library call started now, on this thread, would be refused (see
    :func:`gate`): for work that would rather be deferred than refused."""
    return exiting and _stays_out(bool(getattr(tls, "frames", None)))


def gate(stack: Frames) -> None:
    """Called by every library call once :data:`exiting`, after it pushed its frame on
    ``stack`` (this thread's): raises ``SystemExit`` if the call must stay out of the library
    (a daemon thread outside any call; see the module's docstring).

    The push comes before the test of :data:`exiting`, and the exit step sets it before it
    looks at the stacks: whichever runs first (under the GIL), either the call sees the flag,
    or the exit step sees the call's frame and waits for it."""
    if _stays_out(len(stack) > 1):
        raise SystemExit


def defer_to_exit(action: Callable[[], Any]) -> None:
    """Runs ``action`` on the exiting thread at the end of the exit step (for the closing of
    an agent garbage-collected on a daemon thread after exit began)."""
    _deferred.append(action)


def _exit_step() -> None:
    global exiting, _exit_thread
    _exit_thread = threading.get_ident()
    exiting = True
    mine = getattr(tls, "frames", None)
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    while True:
        with _every_lock:
            busy = sum(1 for stack in _every if stack and stack is not mine)
        if not busy:
            break
        if time.monotonic() >= deadline:
            sys.stderr.write(
                f"agent_state: at exit, {busy} thread{'' if busy == 1 else 's'} still inside "
                f"agent_state calls after {EXIT_WAIT_SECONDS:g} s; exiting without waiting "
                "longer (a thread that returns to Python from inside the library while the "
                "interpreter shuts down aborts the process)\n"
            )
            break
        time.sleep(0.002)
    while _deferred:
        try:
            _deferred.pop(0)()
        except Exception:  # pragma: no cover - closing a handle reports nothing
            pass


#: The submitted calls (``agent_submit``, see ``async_agent``) that may run Python callbacks
#: on a library worker thread, by tag, until their completion callback has run: one stack
#: among the threads', so that the exit step waits for them as for calls in flight.
submitted = Frames()
_every.add(submitted)
#: What the callbacks of a submitted call raised on the library worker thread running it
#: (which has no frame: each callback runs in a thread state of its own), by thread, in
#: frame form (exceptions, ``(REJECTED, exc)``, ``(STEP_FAILED, exc)``); the call's completion
#: callback, run next on the same thread, takes them (:func:`take_carried`).
_carried: Dict[int, List[Any]] = {}


def carry(entry: Any) -> None:
    """Records ``entry`` for the call running on this thread when the thread has no frame
    (a library worker thread running a submitted call's callbacks)."""
    _carried.setdefault(threading.get_ident(), []).append(entry)


def take_carried() -> List[Any]:
    """What :func:`carry` recorded on this thread since the last take (for the submitted call
    whose completion callback runs now)."""
    return _carried.pop(threading.get_ident(), [])


def _forget_other_threads() -> None:
    # In a child made by fork() only the forking thread exists: the stacks of the others
    # (maybe inside calls at the time) are stale, and a lock they held would stay held. The
    # parent's submitted calls never complete here.
    global _every, _every_lock
    mine = getattr(tls, "frames", None)
    _every_lock = threading.Lock()
    _every = weakref.WeakSet()
    if mine is not None:
        _every.add(mine)
    submitted.clear()
    _every.add(submitted)
    _carried.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_other_threads)

_registered = False
_registered_lock = threading.Lock()


def register_exit_step() -> None:
    """Registers the exit step with ``atexit`` (once); see the module's docstring for when."""
    global _registered
    if _registered:
        return
    with _registered_lock:
        if not _registered:
            atexit.register(_exit_step)
            _registered = True
