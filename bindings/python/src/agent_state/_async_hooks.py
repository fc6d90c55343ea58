"""Coroutine hooks of an :class:`~agent_state.AsyncAgent`: delivered on an event loop, in
commit order, before the writer's ``await`` returns.

**How.** The library runs hooks on the thread that made the change, in commit order (its
turnstile, ``hooks.rs``). An AsyncAgent with coroutine hooks registers one plain hook of its
own, the *bridge*, on its sync agent. The bridge runs on that thread, in that order, and only
queues an :class:`_Entry` (the change plus the coroutine hooks registered then) on the
delivery queue of an event loop. One task per loop, the *dispatcher*, takes the entries in
queue order and awaits each hook, so the hooks see the changes in commit order and always on
the loop, never on a worker thread.

**Who waits.** The bridge also records the entry in the running :class:`Call` (a thread-local
set by the pool's thread running the call; on a library worker thread running a submitted
call, the call's completion callback, run next on that thread, collects it), and the coroutine
that awaited that call awaits the entry before its ``await`` returns: the hooks' exceptions reach it as :class:`HookError`. A write
made from inside a coroutine hook must not wait for its own entry (the dispatcher is busy
awaiting the hook that made it): :data:`_delivering` tells it so, and the entry being
delivered *adopts* it instead, so the outer writer waits for both and gets both's errors. A
change with no awaiting coroutine (a sync call through ``.sync`` on some thread, a writer
cancelled meanwhile) still has its hooks run on the loop; their exceptions go to the loop's
exception handler.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import copy
import itertools
import threading
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple

from . import _inflight
from ._records import CHANGE, NEXT_PREV, Change
from .errors import HookError

_ids = itertools.count(1)
_local = threading.local()


class Call:
    """One AsyncAgent call: the loop that awaits it and the entries of coroutine hooks its
    changes queued (by the bridge, on the thread that ran the call: a thread of the pool, which
    sets it as its thread's current call, or a library worker thread, whose entries the call's
    completion callback collects with :func:`take_worker_entries`)."""

    __slots__ = ("loop", "entries")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.entries: List["_Entry"] = []

    def __enter__(self) -> "Call":
        _local.call = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.call = None


def current() -> Optional[Call]:
    """The AsyncAgent call running on this thread, if any."""
    return getattr(_local, "call", None)


#: The entries the bridge queued on a library worker thread running a submitted call (no
#: :class:`Call` there: each callback runs in a thread state of its own), by thread.
_worker_entries: Dict[int, List["_Entry"]] = {}


def take_worker_entries() -> List["_Entry"]:
    """The entries the bridge queued on this thread (a library worker thread) since the last
    take: those of the submitted call whose completion callback runs now, on it."""
    return _worker_entries.pop(threading.get_ident(), [])


def _on_library_worker() -> bool:
    # A library worker thread runs each Python callback in a fresh thread state, so it has no
    # frame of a call in flight; a Python thread's hooks run inside its call's frame.
    return not getattr(_inflight.tls, "frames", None)


class _Entry:
    """One change waiting for (or done with) its coroutine hooks."""

    __slots__ = ("change", "hooks", "errors", "pending", "parent", "claimed", "done")

    def __init__(self, change: Change, hooks: Tuple["AsyncHook", ...]) -> None:
        self.change = change
        self.hooks = hooks
        self.errors: List[BaseException] = []
        self.pending = 1  # its own hooks, plus each adopted entry
        self.parent: Optional[_Entry] = None
        self.claimed = False  # a coroutine awaits it (or its parent collects its errors)
        # Resolved (with the errors) once its hooks and its adopted entries have run.
        self.done: "concurrent.futures.Future[List[BaseException]]" = concurrent.futures.Future()

    def adopt(self, child: "_Entry", loop: asyncio.AbstractEventLoop) -> None:
        """Makes this entry wait for ``child`` (a change made while its hooks ran) and collect
        its errors; once this entry is done (a task its hook started wrote later), nobody
        waits for ``child``: its errors go to the loop's handler."""
        if self.done.done():
            child.claimed = False
            if child.done.done() and child.errors:
                _unclaimed(loop, child.errors)
            return
        child.parent = self
        self.pending += 1

    def finish(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.done.done():
            return
        self.pending -= 1
        if self.pending > 0:
            return
        parent = self.parent
        if parent is not None and not parent.done.done():
            parent.errors.extend(self.errors)
            parent.finish(loop)
        elif self.errors and not self.claimed:
            _unclaimed(loop, self.errors)
        self.done.set_result(self.errors)


#: The entry whose hooks the running coroutine serves (set by the dispatcher; inherited by
#: what a hook awaits and by the tasks it creates).
_delivering: "contextvars.ContextVar[Optional[_Entry]]" = contextvars.ContextVar(
    "agent_state_delivering", default=None
)


def _unclaimed(loop: asyncio.AbstractEventLoop, errors: List[BaseException]) -> None:
    """Hands the errors of hooks nobody awaits to the loop's exception handler."""
    for exc in errors:
        loop.call_exception_handler(
            {
                "message": "agent_state: a coroutine hook raised for a change no coroutine awaited",
                "exception": exc,
            }
        )


class AsyncHook:
    """The handle of a coroutine hook registration (what :meth:`AsyncAgent.on_state_changed
    <agent_state.AsyncAgent.on_state_changed>` and :meth:`~agent_state.AsyncAgent.on_change`
    return for an ``async def``): the same interface as :class:`~agent_state.Hook`.

    Attributes:
        id: the hook's id among the agent's coroutine hooks (not a library hook id).
        callback: the registered coroutine function.
    """

    __slots__ = ("id", "callback", "_form", "_delivery")

    def __init__(self, delivery: "Delivery", callback: Callable[..., Any], form: str) -> None:
        self.id = next(_ids)
        self.callback = callback
        #: How it is called: CHANGE, NEXT_PREV_PATCH or NEXT_PREV (_records, _callbacks).
        self._form = form
        self._delivery = delivery

    @property
    def active(self) -> bool:
        """True until :meth:`remove` (or the agent's close)."""
        return self in self._delivery.hooks

    def remove(self) -> bool:
        """Unregisters the hook: it is not awaited for changes delivered later. Idempotent;
        True if this call removed it."""
        return self._delivery.remove(self)

    async def _invoke(self, change: Change) -> None:
        form = self._form
        if form == CHANGE:
            await self.callback(change)
        elif form == NEXT_PREV:
            await self.callback(change.next, change.prev)
        else:
            await self.callback(change.next, change.prev, change.patch)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.callback(*args, **kwargs)

    def __enter__(self) -> "AsyncHook":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"<agent_state.AsyncHook id={self.id} {state} callback={self.callback!r}>"


class Delivery:
    """The coroutine hooks of one AsyncAgent and their delivery queues, one per event loop."""

    def __init__(self) -> None:
        self.hooks: Tuple[AsyncHook, ...] = ()  # replaced, never mutated: the bridge reads it
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # of the latest call
        self.bridged = False
        self._lock = threading.Lock()
        self._queues: Dict[asyncio.AbstractEventLoop, Deque[_Entry]] = {}
        self._tasks: Set["asyncio.Task[None]"] = set()

    # -- registration (any thread) --------------------------------------------------------------

    def add(self, callback: Callable[..., Any], form: str) -> AsyncHook:
        hook = AsyncHook(self, callback, form)
        with self._lock:
            self.hooks = self.hooks + (hook,)
        return hook

    def remove(self, hook: AsyncHook) -> bool:
        with self._lock:
            if hook not in self.hooks:
                return False
            self.hooks = tuple(h for h in self.hooks if h is not hook)
            return True

    def clear(self) -> None:
        with self._lock:
            self.hooks = ()

    # -- the bridge (the committing thread, in commit order) -----------------------------------

    def bridge(self, change: "Change[Any]") -> None:
        """The sync agent's hook: queues ``change`` for the coroutine hooks registered now."""
        hooks = self.hooks
        if not hooks:
            return
        call = current()
        worker = call is None and _on_library_worker()
        loop = call.loop if call is not None else self.loop
        if loop is None or loop.is_closed():
            raise RuntimeError(
                "agent_state: no open event loop to run this AsyncAgent's coroutine hooks on "
                "(the change was made by a sync call before any coroutine of the agent ran, or "
                "after its loop closed)"
            )
        entry = _Entry(change, hooks)
        entry.claimed = call is not None or worker
        with self._lock:
            queue = self._queues.get(loop)
            start = queue is None
            if queue is None:
                queue = self._queues[loop] = collections.deque()
            queue.append(entry)
        if call is not None:
            call.entries.append(entry)
        elif worker:
            _worker_entries.setdefault(threading.get_ident(), []).append(entry)
        if start:
            try:
                loop.call_soon_threadsafe(self._start, loop)
            except RuntimeError:  # it closed meanwhile
                self._abandon(loop, "its event loop closed")
                raise

    # -- the dispatcher (on the loop) ----------------------------------------------------------

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        task = loop.create_task(self._dispatch(loop))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while True:
                with self._lock:
                    queue = self._queues[loop]
                    if not queue:
                        del self._queues[loop]
                        return
                    entry = queue.popleft()
                await self._deliver(loop, entry)
        except BaseException:
            self._abandon(loop, "the task delivering them was cancelled (the event loop is shutting down)")
            raise

    async def _deliver(self, loop: asyncio.AbstractEventLoop, entry: _Entry) -> None:
        outer = _delivering.set(entry)
        try:
            first = True
            for hook in entry.hooks:
                if not hook.active:
                    continue
                # Each hook gets values of its own, as plain hooks do.
                change = entry.change if first else copy.deepcopy(entry.change)
                first = False
                try:
                    await hook._invoke(change)
                except asyncio.CancelledError as exc:
                    entry.errors.append(exc)
                    raise
                except Exception as exc:
                    entry.errors.append(exc)
        finally:
            _delivering.reset(outer)
            entry.finish(loop)

    def _abandon(self, loop: asyncio.AbstractEventLoop, why: str) -> None:
        """Resolves every entry still queued for ``loop`` with an error saying ``why``."""
        with self._lock:
            queue = self._queues.pop(loop, None)
        for entry in queue or ():
            entry.errors.append(RuntimeError(f"agent_state: a coroutine hook did not run: {why}"))
            while entry.pending:
                entry.finish(loop)

    # -- the awaiting side (on the loop) --------------------------------------------------------

    async def settle(self, call: Call, error: Optional[BaseException]) -> None:
        """Waits until the coroutine hooks of ``call``'s changes have run; then raises
        :class:`HookError` if any raised (with the plain hooks' exceptions of ``error``, a
        HookError the call itself raised), else re-raises ``error`` if given."""
        entries = call.entries
        outer = _delivering.get()
        if outer is not None:
            # Inside a hook's delivery: the outer entry waits for these (see the module doc).
            for entry in entries:
                outer.adopt(entry, call.loop)
            if error is not None:
                raise error
            return
        errors: List[BaseException] = []
        try:
            for entry in entries:
                ran: List[BaseException] = await asyncio.shield(asyncio.wrap_future(entry.done))
                errors.extend(ran)
        except asyncio.CancelledError:
            self.orphan(call)
            raise
        if errors:
            earlier = list(error.exceptions) if isinstance(error, HookError) else []
            hook_error = HookError(
                f"{len(errors)} coroutine hook(s) raised after the change committed: "
                f"{type(errors[0]).__name__}: {errors[0]}",
                exceptions=earlier + errors,
            )
            raise hook_error from (earlier + errors)[0]
        if error is not None:
            raise error

    def orphan(self, call: Call) -> None:
        """``call``'s awaiter is gone: the errors of its entries' hooks go to the loop's
        exception handler once they have run."""
        loop = call.loop
        for entry in call.entries:
            if entry.parent is not None:
                continue

            def report(done: "concurrent.futures.Future[List[BaseException]]") -> None:
                if done.result() and not loop.is_closed():
                    loop.call_soon_threadsafe(_unclaimed, loop, done.result())

            entry.done.add_done_callback(report)
