"""The :class:`AsyncAgent`: an :class:`~agent_state.Agent` for asyncio.

**Submitted calls.** The state calls (``get_state``, ``set_state``, ``replace_state``,
``patch_state``, their ``_json``, ``_if`` and versioned forms) are submitted to the library
(``agent_queue_submit``) and complete on its small pool of worker threads (at most 8 by
default, ``AGENT_STATE_WORKERS``), or at once on the loop's thread when they need not wait (a
read the handle's validated copy answers): no Python thread waits for them. Each event loop has
one completion queue (made on the loop's first call; its descriptor watched with
``loop.add_reader``; freed when the last AsyncAgent that used it closes, or once the loop is
closed, when the next loop's queue is made; a forked child makes its own). A call's coroutine
awaits a future that the queue's reader resolves, taking at most ``_BATCH`` completions per
wake-up so that a thousand completions do not hold the loop at once. The loop's work per call is
the encoding of its argument, one ctypes call and the decoding of the result.

**Bursts.** ``asyncio.gather`` of a thousand calls runs their first steps in one loop iteration;
encoding and submitting them all there would stall the loop for that long. So a call first
takes its turn (:meth:`_Port.turn`): at most ``_ADMIT`` calls start per ``_WINDOW``, and the
others wait, in order, for later iterations (a call waiting its turn and cancelled was never
submitted). A lone call starts at once.

An agent with Python callbacks (hooks, validator, initial-state hook, schema steps) submits
with a completion callback instead (``agent_submit``): the callbacks run on the library's
worker thread, which has no frame of a Python call, so what they raise is carried there
(``_inflight.carry``) with the coroutine hooks' entries (``_async_hooks``), and the completion
callback, run next on that thread, hands them to the awaiting coroutine through
``loop.call_soon_threadsafe``.

**Cancelling.** Each call in flight holds a cancel token of the library (a token never fired is
reused by the next call: no ctypes call per call); cancelling the awaiting task fires it, waits
for the completion (within milliseconds of the fire, or once a commit under way is done) and
re-raises :class:`asyncio.CancelledError`.

A loop that cannot watch a descriptor (no ``add_reader``: asyncio's ``ProactorEventLoop``) runs
these calls as the others, on the pool (``_call_now``).

**The pool.** Calls without a submitted form (``poll``, ``changes_since``, ``state_at``,
``restore``, ``get_path``, ``get_tail``, the schema calls, ``aclose``, ``AsyncAgent.open`` and
the store functions) run the sync agent's method on a worker thread of one bounded,
module-level thread pool (``offload``), under a cancel token bound to that thread.

Coroutine hooks are delivered on the loop by ``_async_hooks``; :meth:`AsyncAgent.changes`
polls the change feed from the loop, on the pool.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import ctypes
import inspect
import itertools
import os
import threading
import time
import weakref
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Deque,
    Dict,
    Generator,
    Generic,
    List,
    Mapping,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import _callbacks, _inflight, _native
from ._async_hooks import AsyncHook, Call, Delivery, take_worker_entries
from ._hook import Hook
from ._models import build
from ._options import OPEN_KEYS, check_keywords
from ._options import check_version as _version
from ._records import (
    AppliedPatch,
    Change,
    InitialStateCallback,
    LoggedChange,
    Operations,
    Patch,
    PathLike,
    SchemaStepCallback,
    State,
    StateModel,
    StateT,
    Versioned,
)
from .agent import Agent, _encode_operations
from .codec import encode_patch, encode_state, json_text
from .decoding import decode_state
from .errors import AgentError, BadHandleError, InvalidArgumentError
from .options import OpenOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AsyncAgent", "ChangeFeed"]

_T = TypeVar("_T")
M = TypeVar("M")
_V = TypeVar("_V", bound=Callable[..., Any])

#: The most worker threads the calls of all AsyncAgents of the process use at once. A call
#: waiting for a lock or the server holds its worker (the GIL released), so the pool is sized
#: for waits, not for the CPUs: 32, or more on a machine with more than 28 CPUs.
POOL_SIZE = max(32, (os.cpu_count() or 1) + 4)

_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """The module's one thread pool, made on first use (and again in a forked child, whose
    copy of the parent's pool has no threads)."""
    global _pool, _pool_pid
    pool = _pool
    if pool is not None and _pool_pid == os.getpid():
        return pool
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=POOL_SIZE, thread_name_prefix="agent_state-async"
            )
            _pool_pid = os.getpid()
        return _pool


class _Cancel:
    """The cancel token of one call: made and bound by the worker, fired by the loop."""

    __slots__ = ("lock", "token", "fired")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.token = 0  # while the worker has it
        self.fired = False

    def fire(self) -> None:
        with self.lock:
            self.fired = True
            if self.token:
                _native.library().agent_cancel_fire(self.token)


def _run_cancellable(cancel: _Cancel, call: Call, fn: Callable[..., _T], *args: Any) -> _T:
    """On the worker thread: ``fn(*args)`` under a fresh token bound to this thread, as
    ``call`` (what coroutine hooks its changes queue, ``_async_hooks``)."""
    lib = _native.library()
    out = ctypes.c_uint64(0)
    lib.agent_cancel_new(-1, ctypes.byref(out))
    token = out.value
    try:
        with cancel.lock:
            cancel.token = token
            if cancel.fired:  # cancelled before the worker started
                lib.agent_cancel_fire(token)
        lib.agent_cancel_bind(token)
        try:
            with call:
                return fn(*args)
        finally:
            lib.agent_cancel_bind(0)
    finally:
        # Under the lock: the loop never fires a freed token.
        with cancel.lock:
            cancel.token = 0
            lib.agent_cancel_free(token)


async def offload(loop: asyncio.AbstractEventLoop, call: Call, fn: Callable[..., _T], *args: Any) -> _T:
    """Awaits ``fn(*args)`` run on a worker thread of the pool under a cancel token of its own
    (``_run_cancellable``), as ``call``. Cancelling the awaiting task fires the token, waits
    for the worker's call to end (within milliseconds of the fire, or once its commit is done)
    and re-raises :class:`asyncio.CancelledError`; a call no worker picked up yet never runs.
    :class:`AsyncAgent`'s calls and the store functions' coroutines (``store.py``) go through
    it."""
    cancel = _Cancel()
    work = _executor().submit(_run_cancellable, cancel, call, fn, *args)
    try:
        # Cancelling this await cancels the wrapper, which cancels `work` if no worker has
        # taken it yet (asyncio chains the two futures).
        return await asyncio.wrap_future(work, loop=loop)
    except asyncio.CancelledError:
        if work.cancelled() or work.cancel():  # never started: now it never will
            raise
        cancel.fire()
        # Wait for the worker's call to end (within ms of the fire, or once its commit is
        # done), whatever more cancellations come meanwhile.
        ended = asyncio.wrap_future(work, loop=loop)
        while not ended.done():
            try:
                await asyncio.shield(ended)
            except BaseException:
                pass
        if not ended.cancelled():
            ended.exception()  # retrieved: no "never retrieved" warning
        raise


# -- submitted calls: the library's worker pool and a completion queue per event loop ------------

#: Bumped in a child made by fork(): what the parent submitted never completes there, and its
#: completion queues are not the child's.
_generation = [0]
_tags = itertools.count(1)
#: Cancel tokens of the library that were never fired, for the next calls (a call takes one
#: for as long as it is in flight; a fired one is freed once its call completed).
_tokens: List[int] = []
#: The calls submitted with a completion callback (agents with Python callbacks), by tag.
_by_tag: Dict[int, "_Submitted"] = {}
#: A completion: (status, version, state text, message, what the callbacks raised, the
#: coroutine hooks' entries).
_Result = Tuple[int, int, str, str, List[Any], List[Any]]
#: The empty list of a completion that carried nothing (never changed).
_NOTHING: List[Any] = []


def _forked() -> None:
    # In the child: the parent's queues are not this process's (the library refuses them); only
    # this process's copies of their descriptors are closed (the parent's loops watch theirs).
    _generation[0] += 1
    _tokens.clear()
    _by_tag.clear()
    for port in _ports.values():
        port.closed = True
        try:
            os.close(port.fd)
        except OSError:
            pass
    _ports.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _token() -> int:
    try:
        return _tokens.pop()
    except IndexError:
        out = ctypes.c_uint64(0)
        _native.library().agent_cancel_new(-1, ctypes.byref(out))
        return out.value


class _Submitted:
    """One submitted call, awaited on ``loop``: ``waker`` is the future its coroutine awaits,
    resolved once ``result`` is set; ``thread`` the submitting thread's id (a completion
    callback run on it, inside the submission, completed the call at once)."""

    __slots__ = ("loop", "waker", "result", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waker: "asyncio.Future[None]" = loop.create_future()
        self.result: Optional[_Result] = None
        self.thread = 0


def _wake(call: _Submitted, result: _Result) -> None:
    """On the call's loop: records its completion and wakes its coroutine."""
    call.result = result
    waker = call.waker
    if not waker.done():
        waker.set_result(None)


def _completed(c: Any, carried: List[Any], entries: List[Any]) -> _Result:
    """The completion ``c`` (an ``AgentCompletion``) as a :data:`_Result`; its buffers are
    freed."""
    state = c.state
    data = state.data
    text = ""
    if data:
        text = _native._utf8_at(data, state.len, None)
        _native._buffer_free(state)
    message = c.message
    note = ""
    if message.data:
        note = _native._utf8_at(message.data, message.len, None)
        _native._buffer_free(message)
    return (c.status, c.version, text, note, carried, entries)


def _done(context: Optional[int], completion: Any) -> None:
    """The completion callback of calls submitted with ``agent_submit``: on the library worker
    thread that ran the call, right after it (and its hooks) ran there, or on the submitting
    thread when it completed at once. Collects what the call's callbacks left on this thread."""
    tag = context or 0
    try:
        carried = _inflight.take_carried()
        entries: List[Any] = take_worker_entries()
        result = _completed(completion.contents, carried, entries)
        call = _by_tag.pop(tag, None)
        if call is None:  # a call of the parent, in a forked child
            return
        if call.thread == threading.get_ident():
            call.result = result  # inside the submission: the coroutine reads it at once
            return
        try:
            call.loop.call_soon_threadsafe(_wake, call, result)
        except RuntimeError:  # the loop closed: nobody awaits the call any more
            pass
    finally:
        try:
            _inflight.submitted.remove(tag)
        except ValueError:
            pass


_DONE = _native.DONE_FN(_done)
#: Completions taken from a queue at a time: the loop's work per wake-up stays bounded (the
#: descriptor stays readable while more wait, so the rest come at the next iterations).
_BATCH = 32
#: Calls started per :data:`_WINDOW` seconds: a burst (``gather`` of a thousand calls starts
#: them all in one loop iteration) is spread over as many iterations as it takes, in order, so
#: that the loop encodes and submits at most this many at a stretch.
_ADMIT = 32
_WINDOW = 0.001
_clock = time.perf_counter


class _Port:
    """An event loop's completion queue (``agent_queue_new``): its descriptor is watched with
    ``loop.add_reader``, and each wake-up takes up to :data:`_BATCH` completions and wakes
    their coroutines. Used on the loop's thread only."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        lib = _native.library()
        queue = ctypes.c_uint64(0)
        fd = ctypes.c_int32(-1)
        lib.agent_queue_new(ctypes.byref(queue), ctypes.byref(fd))
        self.loop = loop
        self.queue = queue.value
        self.fd = fd.value
        self.generation = _generation[0]
        self.closed = False
        #: Calls in flight, by tag.
        self.waiting: Dict[int, _Submitted] = {}
        #: The AsyncAgents that submitted through it: it is freed when the last one closes.
        self.users: "weakref.WeakSet[AsyncAgent[Any]]" = weakref.WeakSet()
        # Reused by every submission (the library copies what it needs before returning).
        self.call = _native.AgentCall()
        self.call_p = ctypes.pointer(self.call)
        self.now = _native.AgentCompletion()
        self.now_p = ctypes.pointer(self.now)
        self.done = ctypes.c_int32(0)
        self.done_p = ctypes.pointer(self.done)
        self.out = (_native.AgentCompletion * _BATCH)()
        #: Calls started since ``window`` began, the calls waiting for a later iteration, and
        #: whether ``_next`` is scheduled to start some.
        self.started = 0
        self.window = 0.0
        self.turns: "Deque[asyncio.Future[None]]" = collections.deque()
        self.next_scheduled = False
        self.taken = ctypes.c_size_t(0)
        self.taken_p = ctypes.pointer(self.taken)
        try:
            loop.add_reader(self.fd, self._drain)
        except BaseException:
            lib.agent_queue_free(self.queue)
            raise

    def turn(self) -> "Optional[asyncio.Future[None]]":
        """``None`` when a call may start now; else a future to await first (resolved at a
        later iteration, in the order of the calls; see :data:`_ADMIT`)."""
        turns = self.turns
        if not turns:
            now = _clock()
            if now - self.window >= _WINDOW:
                self.window = now
                self.started = 0
            if self.started < _ADMIT:
                self.started += 1
                return None
        waiter: "asyncio.Future[None]" = self.loop.create_future()
        turns.append(waiter)
        if not self.next_scheduled:
            self.next_scheduled = True
            self.loop.call_soon(self._next)
        return waiter

    def _next(self) -> None:
        """At the next iteration: the next :data:`_ADMIT` calls waiting their turn start (their
        coroutines run at the iteration after), and this runs again while more wait."""
        turns = self.turns
        released = 0
        while turns and released < _ADMIT:
            waiter = turns.popleft()
            if not waiter.done():  # (a cancelled one gave up its turn)
                waiter.set_result(None)
                released += 1
        self.next_scheduled = bool(turns)
        if turns:
            self.loop.call_soon(self._next)

    def _drain(self) -> None:
        status = _native._hot_queue_take(self.queue, self.out, _BATCH, self.taken_p)
        if status:  # pragma: no cover - the queue is this process's and not freed
            return
        out = self.out
        waiting = self.waiting
        for i in range(self.taken.value):
            c = out[i]
            call = waiting.pop(c.tag, None)
            result = _completed(c, _NOTHING, _NOTHING)
            if call is not None:
                _wake(call, result)

    def close(self) -> None:
        """Stops watching the descriptor and frees the queue (calls still in flight complete
        into nothing). Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.generation != _generation[0]:
            return  # the parent's (ports are forgotten at the fork)
        if not self.loop.is_closed():
            self.loop.remove_reader(self.fd)
        _native.library().agent_queue_free(self.queue)


#: Each event loop's port, by the loop's id (the port holds its loop; closed loops' ports are
#: freed when the next port is made).
_ports: Dict[int, _Port] = {}


def _port_for(loop: asyncio.AbstractEventLoop) -> _Port:
    port = _ports.get(id(loop))
    if port is not None and port.loop is loop and not port.closed:
        return port
    for key, other in list(_ports.items()):
        if other.loop.is_closed() or other.closed:
            del _ports[key]
            other.close()
    for key, closed in list(_portless.items()):
        if closed.is_closed():
            del _portless[key]
    port = _ports[id(loop)] = _Port(loop)
    return port


#: Loops without ``add_reader`` (``ProactorEventLoop``), by id, until they close: their calls
#: run the synchronous function on the thread pool (:func:`_call_now`).
_portless: Dict[int, asyncio.AbstractEventLoop] = {}


def _call_now(handle: int, op: int, data: Optional[bytes], flags: int, expected: int) -> Tuple[int, str]:
    """The synchronous call a submitted one is (on a thread of the pool, for loops that cannot
    watch a completion queue): ``(version, state text)``; the version is 0 where the
    synchronous function reports none (the writes without ``_if``, which do not need it)."""
    if op == _native.OP_GET_STATE:
        text, version = _native.call_text_versioned(_native._hot_get_state_versioned, handle)
        return version, text
    assert data is not None
    plain, conditional = {
        _native.OP_SET_STATE: (_native._hot_set_state, _native._hot_set_state_if),
        _native.OP_REPLACE_STATE: (_native._hot_replace_state, _native._hot_replace_state_if),
        _native.OP_PATCH_STATE: (_native._hot_patch_state, _native._hot_patch_state_if),
    }[op]
    if flags & _native.CALL_IF:
        text, version = _native.call_text_versioned(conditional, handle, expected, data, len(data))
        return version, text
    return 0, _native.call_text(plain, handle, data, len(data))


#: The synchronous function of each op, whose name the library's messages start with.
_NAMES = {
    _native.OP_GET_STATE: "agent_get_state",
    _native.OP_SET_STATE: "agent_set_state",
    _native.OP_REPLACE_STATE: "agent_replace_state",
    _native.OP_PATCH_STATE: "agent_patch_state",
}


def _is_async_callable(callback: Any) -> bool:
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        getattr(callback, "__call__", None)
    )


class AsyncAgent(Generic[StateT]):
    """An :class:`~agent_state.Agent` whose store calls are coroutines, for asyncio.

    >>> async def main():
    ...     async with AsyncAgent.open("conv.db", initial_state={"status": "idle"}) as agent:
    ...         return await agent.set_state({"status": "processing"})

    Opened with :meth:`open` (``agent = await AsyncAgent.open(path, **options)``), which
    connects on a worker thread, or constructed with the same arguments, which opens the store
    at once on the calling thread: in a coroutine, the event loop's, held for as long as the
    open takes (on PostgreSQL, a connection to the server: up to ``server_timeout_ms``).
    ``AsyncAgent[ConvState]`` types the state as :class:`~agent_state.Agent` does. The state
    calls (reads and writes of the whole state, and their ``_if`` and ``_json`` forms) are
    submitted to the library's worker pool, shared by every agent of the process (at most 8
    threads by default, the environment variable ``AGENT_STATE_WORKERS`` sets another cap; more
    concurrent calls queue), and complete through one completion queue per event loop; a read
    the handle's validated copy answers completes at once, on the loop. The other calls
    (``poll``, the history, ``get_path``, ``get_tail``, the schema calls, ``aclose``) run the
    sync agent's method on a worker thread of one module-level thread pool (at most
    ``max(32, os.cpu_count() + 4)`` threads). Either way the event loop is never blocked while
    a call waits for a lock, a pooled connection or the server.

    Cancelling the awaiting task (``task.cancel()``, an ``asyncio.wait_for`` or
    ``asyncio.timeout`` running out) fires the call's cancel token: a call still waiting (for
    another connection's lock, a connection of the pool, its turn on the handle, the server)
    ends within milliseconds having written nothing, the agent stays usable, and the await
    raises :class:`asyncio.CancelledError` (``wait_for``: :class:`TimeoutError`). A call whose
    commit was already under way is not cancelled: it finishes (the await still raises
    ``CancelledError``), so a cancelled write *may* have happened; read the state or its
    version (:meth:`get_state_versioned`) to know. The await returns only once the worker's
    call has ended, so nothing of a cancelled call runs after it.

    Hooks (:meth:`on_state_changed`, :meth:`on_change`) may be plain functions or coroutine
    functions (``async def``). A plain hook runs on the worker thread that made the change,
    right after the commit, as in the sync API: for the state calls a thread of the library's
    pool (not a Python thread: ``threading.current_thread()`` is a dummy there), for the others
    a thread of the module's pool. A coroutine hook is awaited on the event loop
    (never on a worker thread), in commit order, after the change's plain hooks and before the
    writer's ``await`` returns; its exception reaches the writer as
    :class:`~agent_state.HookError` (after the commit: the change stays). The validator and
    the initial-state hook are plain functions only (they run inside the transaction, on the
    worker thread); inside any plain callback use the sync agent (:attr:`sync`), not this
    object's coroutines.
    """

    def __init__(self, path: PathLike, **options: Unpack[OpenOptions]) -> None:
        check_keywords(options, OPEN_KEYS, "AsyncAgent")
        self._agent: Agent[StateT] = Agent(path, **options)
        self._delivery = Delivery()
        self._port: Optional[_Port] = None

    @classmethod
    def open(cls, path: PathLike, **options: Unpack[OpenOptions]) -> "Opening[StateT]":
        """Opens the store as the constructor does (same arguments), on a worker thread of the
        pool instead of the event loop's: ``agent = await AsyncAgent.open("conv.db")``, or
        ``async with AsyncAgent.open("conv.db") as agent:`` (closed on exit).

        The constructor opens on the calling thread, which in a coroutine is the loop's: on
        PostgreSQL that is a connection to the server, up to ``server_timeout_ms``, during
        which no other task runs. Cancelling the await (a timeout) ends an open still waiting
        for the server or a lock as any call's cancellation does; an agent opened meanwhile is
        closed.
        """
        check_keywords(options, OPEN_KEYS, "AsyncAgent.open")
        return Opening(cls, path, options)

    @classmethod
    def _wrap(cls, agent: "Agent[StateT]") -> "AsyncAgent[StateT]":
        """An AsyncAgent around an :class:`Agent` already open."""
        self = cls.__new__(cls)
        self._agent = agent
        self._delivery = Delivery()
        self._port = None
        return self

    # -- running calls -------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        loop = asyncio.get_running_loop()
        self._delivery.loop = loop
        call = Call(loop)
        try:
            result = await offload(loop, call, fn, *args)
        except AgentError as exc:
            if not call.entries:
                raise
            await self._delivery.settle(call, exc)  # raises
            raise  # pragma: no cover - settle always raises here
        except BaseException:
            self._delivery.orphan(call)
            raise
        if call.entries:
            await self._delivery.settle(call, None)
        return result

    def _turn(self) -> "Optional[asyncio.Future[None]]":
        """The running loop's port for this agent's calls (made on the loop's first call) and
        this call's turn on it (:meth:`_Port.turn`): await what it returns, if anything, before
        encoding and submitting."""
        port = self._port_on(asyncio.get_running_loop())
        return port.turn() if port is not None else None

    def _port_on(self, loop: asyncio.AbstractEventLoop) -> Optional[_Port]:
        """The loop's port; None for a loop that cannot watch a descriptor (no ``add_reader``:
        its calls run on the thread pool)."""
        port = self._port
        if port is None or port.loop is not loop or port.closed or port.generation != _generation[0]:
            if _portless.get(id(loop)) is loop:
                return None
            try:
                port = _port_for(loop)
            except NotImplementedError:
                _portless[id(loop)] = loop
                return None
            self._port = port
            port.users.add(self)
        return port

    async def _submit(
        self, op: int, data: Optional[bytes], flags: int = 0, expected: int = 0
    ) -> Tuple[int, str]:
        """Submits one call (``agent_queue_submit``, or ``agent_submit`` when the agent has
        Python callbacks, whose exceptions and coroutine hooks the completion callback
        collects on the worker thread) and awaits its completion: returns the state's version
        and text, or raises the synchronous call's error. See the class for cancellation."""
        agent = self._agent
        handle = agent._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        loop = asyncio.get_running_loop()
        port = self._port_on(loop)
        if port is None:
            return await self._run(_call_now, handle, op, data, flags, expected)
        self._delivery.loop = loop
        tag = next(_tags)
        token = _token()
        c = port.call
        c.op = op
        c.flags = flags
        c.data = data
        c.len = len(data) if data is not None else 0
        c.expected_version = expected
        c.cancel = token
        c.tag = tag
        result: Optional[_Result]
        if not agent._callbacks:
            status = _native._hot_queue_submit(port.queue, handle, port.call_p, port.now_p, port.done_p)
            if status:
                _tokens.append(token)
                raise _native.error_of(status, "agent_queue_submit", _native.last_error_text(), [])
            if port.done.value:  # completed at once: no hand-off
                _tokens.append(token)
                result = _completed(port.now, _NOTHING, _NOTHING)
            else:
                call = port.waiting[tag] = _Submitted(loop)
                result = None
        else:
            call = _Submitted(loop)
            call.thread = threading.get_ident()
            _by_tag[tag] = call
            _inflight.submitted.append(tag)
            stack = _inflight.frames()
            frame: List[Any] = []
            stack += (frame,)
            try:
                if _inflight.exiting:
                    _inflight.gate(stack)
                status = _native._hot_submit(handle, port.call_p, _DONE, tag)
            finally:
                if stack and stack[-1] is frame:
                    stack.pop()
            if status:
                _by_tag.pop(tag, None)
                _tokens.append(token)
                try:
                    _inflight.submitted.remove(tag)
                except ValueError:
                    pass
                raise _native.error_of(status, "agent_submit", _native.last_error_text(), frame)
            result = call.result
            if result is not None:  # completed at once, on this thread
                _tokens.append(token)
                if frame:
                    result = result[:4] + (frame + result[4], result[5])
        if result is None:
            result = await self._completion(call, token)
        status, version, text, message, carried, entries = result
        if entries:
            hooks = Call(loop)
            hooks.entries = entries
            error = _native.error_of(status, _NAMES[op], message, carried) if status or carried else None
            if error is not None and not isinstance(error, AgentError):
                self._delivery.orphan(hooks)  # an interrupt: nobody waits for the hooks
                raise error
            await self._delivery.settle(hooks, error)  # raises error, or the hooks' HookError
        elif status or carried:
            raise _native.error_of(status, _NAMES[op], message, carried)
        return version, text

    async def _completion(self, call: _Submitted, token: int) -> _Result:
        """Awaits ``call``'s completion. Cancelled meanwhile: fires its token, waits for the
        completion all the same (the call ends within milliseconds, or once its commit is
        done), lets the coroutine hooks of its changes run unawaited, and re-raises."""
        try:
            await call.waker
        except asyncio.CancelledError:
            fired = call.result is None
            if fired:
                _native.library().agent_cancel_fire(token)
                waker = call.waker = call.loop.create_future()
                while not waker.done():
                    try:
                        await asyncio.shield(waker)
                    except asyncio.CancelledError:
                        pass
                _native.library().agent_cancel_free(token)
            else:
                _tokens.append(token)
            result = call.result
            if result is not None and result[5]:
                hooks = Call(call.loop)
                hooks.entries = result[5]
                self._delivery.orphan(hooks)
            raise
        _tokens.append(token)
        result = call.result
        assert result is not None
        return result

    def _leave_port(self) -> None:
        port, self._port = self._port, None
        if port is None:
            return
        port.users.discard(self)
        if not port.users and not port.waiting and not port.closed:
            port.close()
            if _ports.get(id(port.loop)) is port:
                del _ports[id(port.loop)]

    # -- lifetime ------------------------------------------------------------------------------

    @property
    def sync(self) -> "Agent[StateT]":
        """The sync :class:`~agent_state.Agent` this object wraps (for hooks and validators,
        and for code that is not async)."""
        return self._agent

    @property
    def path(self) -> str:
        """The path the store was opened with."""
        return self._agent.path

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` (or ``sync.close()``) was called."""
        return self._agent.closed

    async def aclose(self) -> None:
        """Closes the store (on a worker thread: it waits for calls running on the handle).
        Idempotent."""
        if self._agent.closed:
            return
        self._delivery.clear()
        try:
            await self._run(self._agent.close)
        finally:
            self._leave_port()

    async def __aenter__(self) -> "AsyncAgent[StateT]":
        self._agent._h()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return "<agent_state.AsyncAgent " + repr(self._agent)[len("<agent_state.Agent "):]

    # -- state ---------------------------------------------------------------------------------

    async def get_state(self) -> StateT:
        """:meth:`Agent.get_state <agent_state.Agent.get_state>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        _, text = await self._submit(_native.OP_GET_STATE, None)
        state: StateT = self._agent._cache.decoded(text)
        return state

    async def get_state_as(self, model: Type[M]) -> M:
        """:meth:`Agent.get_state_as <agent_state.Agent.get_state_as>`, awaited."""
        return build(model, await self.get_state())

    async def get_state_json(self) -> str:
        """:meth:`Agent.get_state_json <agent_state.Agent.get_state_json>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        _, text = await self._submit(_native.OP_GET_STATE, None)
        return text

    async def set_state(self, patch: Patch) -> StateT:
        """:meth:`Agent.set_state <agent_state.Agent.set_state>`, awaited (plain hooks run on
        the library's worker thread before it returns)."""
        turn = self._turn()
        if turn is not None:
            await turn
        agent = self._agent
        data, plain = encode_patch(patch, "patch", agent._default)
        _, text = await self._submit(_native.OP_SET_STATE, data)
        state: StateT = agent._cache.merged(plain, text)
        return state

    @overload
    async def replace_state(
        self: "AsyncAgent[Dict[str, Any]]", state: Union[Mapping[str, Any], StateModel]
    ) -> Dict[str, Any]: ...
    @overload
    async def replace_state(self, state: Union[StateT, StateModel]) -> StateT: ...
    async def replace_state(self, state: Union[Mapping[str, Any], StateModel]) -> Any:
        """:meth:`Agent.replace_state <agent_state.Agent.replace_state>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        data = encode_state(state, "state", self._agent._default)
        _, text = await self._submit(_native.OP_REPLACE_STATE, data)
        return decode_state(text)

    async def set_state_json(self, patch: Union[str, bytes]) -> str:
        """:meth:`Agent.set_state_json <agent_state.Agent.set_state_json>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        _, text = await self._submit(_native.OP_SET_STATE, json_text(patch, "patch"))
        return text

    async def replace_state_json(self, state: Union[str, bytes]) -> str:
        """:meth:`Agent.replace_state_json <agent_state.Agent.replace_state_json>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        _, text = await self._submit(_native.OP_REPLACE_STATE, json_text(state, "state"))
        return text

    async def get_state_versioned(self) -> Versioned[StateT]:
        """:meth:`Agent.get_state_versioned <agent_state.Agent.get_state_versioned>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        version, text = await self._submit(_native.OP_GET_STATE, None)
        state: StateT = self._agent._cache.decoded(text)
        return Versioned(state, version)

    async def set_state_if(self, expected_version: int, patch: Patch) -> Versioned[StateT]:
        """:meth:`Agent.set_state_if <agent_state.Agent.set_state_if>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        agent = self._agent
        data, plain = encode_patch(patch, "patch", agent._default)
        expected = _version(expected_version, "expected_version")
        version, text = await self._submit(_native.OP_SET_STATE, data, _native.CALL_IF, expected)
        state: StateT = agent._cache.merged(plain, text)
        return Versioned(state, version)

    @overload
    async def replace_state_if(
        self: "AsyncAgent[Dict[str, Any]]", expected_version: int, state: Union[Mapping[str, Any], StateModel]
    ) -> Versioned[Dict[str, Any]]: ...
    @overload
    async def replace_state_if(
        self, expected_version: int, state: Union[StateT, StateModel]
    ) -> Versioned[StateT]: ...
    async def replace_state_if(
        self, expected_version: int, state: Union[Mapping[str, Any], StateModel]
    ) -> Any:
        """:meth:`Agent.replace_state_if <agent_state.Agent.replace_state_if>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        data = encode_state(state, "state", self._agent._default)
        expected = _version(expected_version, "expected_version")
        version, text = await self._submit(_native.OP_REPLACE_STATE, data, _native.CALL_IF, expected)
        return Versioned(decode_state(text), version)

    # -- JSON Patch (RFC 6902) and reads of one place (RFC 6901) -------------------------------

    async def patch_state(self, operations: Operations) -> StateT:
        """:meth:`Agent.patch_state <agent_state.Agent.patch_state>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        agent = self._agent
        data = _encode_operations(operations, agent._default)
        _, text = await self._submit(_native.OP_PATCH_STATE, data)
        state: StateT = agent._cache.decoded(text)
        return state

    async def patch_state_json(self, operations: Union[str, bytes]) -> str:
        """:meth:`Agent.patch_state_json <agent_state.Agent.patch_state_json>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        _, text = await self._submit(_native.OP_PATCH_STATE, json_text(operations, "operations"))
        return text

    async def patch_state_if(self, expected_version: int, operations: Operations) -> Versioned[StateT]:
        """:meth:`Agent.patch_state_if <agent_state.Agent.patch_state_if>`, awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        agent = self._agent
        data = _encode_operations(operations, agent._default)
        expected = _version(expected_version, "expected_version")
        version, text = await self._submit(_native.OP_PATCH_STATE, data, _native.CALL_IF, expected)
        state: StateT = agent._cache.decoded(text)
        return Versioned(state, version)

    async def patch_state_if_json(self, expected_version: int, operations: Union[str, bytes]) -> Tuple[str, int]:
        """:meth:`Agent.patch_state_if_json <agent_state.Agent.patch_state_if_json>`,
        awaited."""
        turn = self._turn()
        if turn is not None:
            await turn
        data = json_text(operations, "operations")
        expected = _version(expected_version, "expected_version")
        version, text = await self._submit(_native.OP_PATCH_STATE, data, _native.CALL_IF, expected)
        return text, version

    async def get_path(self, pointer: str) -> Any:
        """:meth:`Agent.get_path <agent_state.Agent.get_path>`, awaited."""
        return await self._run(self._agent.get_path, pointer)

    async def get_path_json(self, pointer: str) -> str:
        """:meth:`Agent.get_path_json <agent_state.Agent.get_path_json>`, awaited."""
        return await self._run(self._agent.get_path_json, pointer)

    async def get_tail(self, pointer: str, n: int) -> List[Any]:
        """:meth:`Agent.get_tail <agent_state.Agent.get_tail>`, awaited."""
        return await self._run(self._agent.get_tail, pointer, n)

    async def get_tail_json(self, pointer: str, n: int) -> str:
        """:meth:`Agent.get_tail_json <agent_state.Agent.get_tail_json>`, awaited."""
        return await self._run(self._agent.get_tail_json, pointer, n)

    # -- the change log ------------------------------------------------------------------------

    async def poll(self) -> int:
        """:meth:`Agent.poll <agent_state.Agent.poll>`, awaited (hooks run on the worker
        thread)."""
        return await self._run(self._agent.poll)

    async def changes_since(self, version: int) -> List[LoggedChange[StateT]]:
        """:meth:`Agent.changes_since <agent_state.Agent.changes_since>`, awaited."""
        return await self._run(self._agent.changes_since, version)

    async def changes_since_json(self, version: int) -> str:
        """:meth:`Agent.changes_since_json <agent_state.Agent.changes_since_json>`, awaited."""
        return await self._run(self._agent.changes_since_json, version)

    async def state_at(self, version: int) -> StateT:
        """:meth:`Agent.state_at <agent_state.Agent.state_at>`, awaited."""
        return await self._run(self._agent.state_at, version)

    async def restore(self, version: int) -> Versioned[StateT]:
        """:meth:`Agent.restore <agent_state.Agent.restore>`, awaited."""
        return await self._run(self._agent.restore, version)

    def changes(self, *, interval: float = 0.1) -> "ChangeFeed[StateT]":
        """The change feed as an async iterator: yields every change delivered to this agent's
        hooks from this call on, in commit order, as :class:`~agent_state.Change` records: its
        own writes (through this object or :attr:`sync`), and the changes of other handles on
        the same agent and other processes (the agent's ``change_log`` must be on), which it
        fetches by awaiting :meth:`poll` whenever it has nothing to yield, then every
        ``interval`` seconds while nothing comes. No thread waits for it meanwhile: each poll is one short call on the
        pool. Call it from a coroutine (it registers a hook at once, on the running loop).

        >>> async with agent.changes() as feed:   # doctest: +SKIP
        ...     async for change in feed:
        ...         await broadcast(change.next)

        It ends only when the consumer stops it: ``break`` leaves it registered until
        :meth:`ChangeFeed.aclose` (which ``async with`` calls) or its garbage collection. An
        exception of :meth:`poll` (:class:`~agent_state.GapError` when the log's retention
        pruned changes not yet delivered, :class:`~agent_state.HookError` when another hook
        raised, :class:`~agent_state.BadHandleError`) is raised from the iteration once the
        changes delivered before it were yielded.
        """
        return ChangeFeed(self, interval)

    # -- hooks (registered synchronously) ------------------------------------------------------

    def on_state_changed(
        self,
        callback: Union[
            Callable[[StateT, StateT], Any],
            Callable[[StateT, StateT, Optional[State]], Any],
            Callable[[StateT, StateT, Optional[AppliedPatch]], Any],
        ],
    ) -> Union[Hook, AsyncHook]:
        """:meth:`Agent.on_state_changed <agent_state.Agent.on_state_changed>`:
        ``callback(next, prev)`` or ``callback(next, prev, patch)`` (chosen from its
        signature; :class:`TypeError` for a callable of neither form), a plain function (run
        on the worker thread that made the change) or a coroutine function (awaited on the
        event loop in commit order before the writer's ``await`` returns; see the class).
        Returns the registration's handle."""
        if _is_async_callable(callback):
            return self._add_coroutine_hook(callback, "on_state_changed")
        return self._agent.on_state_changed(callback)

    def on_change(
        self,
        callback: Union[
            Callable[["Change[StateT]"], Any],
            Callable[[StateT, StateT], Any],
            Callable[[StateT, StateT, Optional[State]], Any],
            Callable[[StateT, StateT, Optional[AppliedPatch]], Any],
        ],
    ) -> Union[Hook, AsyncHook]:
        """:meth:`Agent.on_change <agent_state.Agent.on_change>`: ``callback(change)`` (or
        ``callback(next, prev[, patch])``), a plain or a coroutine function, as for
        :meth:`on_state_changed`."""
        if _is_async_callable(callback):
            return self._add_coroutine_hook(callback, "on_change")
        return self._agent.on_change(callback)

    def _add_coroutine_hook(self, callback: Callable[..., Any], what: str) -> AsyncHook:
        form = _callbacks.call_form(callback, what)
        self._agent._h()  # BadHandleError once closed
        delivery = self._delivery
        if not delivery.bridged:
            self._agent.on_change(delivery.bridge)
            delivery.bridged = True
        try:
            delivery.loop = asyncio.get_running_loop()
        except RuntimeError:
            pass  # bound by the first coroutine call
        return delivery.add(callback, form)

    def remove_hook(self, hook: Union[Hook, AsyncHook]) -> bool:
        """Unregisters ``hook`` (same as ``hook.remove()``)."""
        if isinstance(hook, AsyncHook):
            if hook._delivery is not self._delivery:
                raise InvalidArgumentError("the hook belongs to another agent")
            return hook.remove()
        return self._agent.remove_hook(hook)

    def set_initial_state_hook(self, callback: Optional[InitialStateCallback]) -> None:
        """:meth:`Agent.set_initial_state_hook <agent_state.Agent.set_initial_state_hook>`: a
        plain function."""
        _plain(callback, "initial-state hook")
        self._agent.set_initial_state_hook(callback)

    def set_validator(self, validator: Optional[_V]) -> Optional[_V]:
        """:meth:`Agent.set_validator <agent_state.Agent.set_validator>`: a plain function (it
        runs inside the write transaction, on the worker thread)."""
        _plain(validator, "validator")
        return self._agent.set_validator(validator)

    # -- schema evolution ----------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """:attr:`Agent.schema_version <agent_state.Agent.schema_version>` (no I/O)."""
        return self._agent.schema_version

    def set_schema_step(self, from_version: int, step: Optional[SchemaStepCallback]) -> None:
        """:meth:`Agent.set_schema_step <agent_state.Agent.set_schema_step>`: a plain function
        (it runs inside the write transaction, on the worker thread); a coroutine function
        raises :class:`TypeError`."""
        _plain(step, "schema step")
        self._agent.set_schema_step(from_version, step)

    async def state_at_stored(self, version: int) -> Tuple[State, int]:
        """:meth:`Agent.state_at_stored <agent_state.Agent.state_at_stored>`, on a worker
        thread."""
        return await self._run(self._agent.state_at_stored, version)

    async def upgrade_state(self, state: Union[Mapping[str, Any], StateModel], from_version: int) -> StateT:
        """:meth:`Agent.upgrade_state <agent_state.Agent.upgrade_state>`, on a worker
        thread."""
        return await self._run(self._agent.upgrade_state, state, from_version)


class Opening(Generic[StateT]):
    """What :meth:`AsyncAgent.open` returns: await it for the open
    :class:`AsyncAgent`, or use it as an async context manager (``async with
    AsyncAgent.open(path) as agent:``), which closes the agent on exit."""

    __slots__ = ("_cls", "_path", "_options", "_agent")

    def __init__(self, cls: Any, path: PathLike, options: OpenOptions) -> None:
        self._cls = cls
        self._path = path
        self._options = options
        self._agent: Optional[AsyncAgent[StateT]] = None

    async def _open(self) -> "AsyncAgent[StateT]":
        loop = asyncio.get_running_loop()
        made: List[Agent[StateT]] = []

        def make() -> "Agent[StateT]":
            agent: Agent[StateT] = Agent(self._path, **self._options)
            made.append(agent)
            return agent

        try:
            agent = await offload(loop, Call(loop), make)
        except BaseException:
            # Cancelled once the open had succeeded: nobody gets the agent, so close it now.
            for agent in made:
                agent.close()
            raise
        opened: AsyncAgent[StateT] = self._cls._wrap(agent)
        return opened

    def __await__(self) -> Generator[Any, None, "AsyncAgent[StateT]"]:
        return self._open().__await__()

    async def __aenter__(self) -> "AsyncAgent[StateT]":
        self._agent = await self._open()
        return self._agent

    async def __aexit__(self, *exc: Any) -> None:
        agent, self._agent = self._agent, None
        if agent is not None:
            await agent.aclose()


class ChangeFeed(Generic[StateT]):
    """What :meth:`AsyncAgent.changes` returns: an async iterator of
    :class:`~agent_state.Change` records, and an async context manager that closes it."""

    def __init__(self, agent: "AsyncAgent[StateT]", interval: float) -> None:
        if not interval > 0:
            raise ValueError("interval must be a positive number of seconds")
        loop = asyncio.get_running_loop()
        arrived: "asyncio.Queue[Change[StateT]]" = asyncio.Queue()

        def receive(change: "Change[StateT]") -> None:
            # From any thread, the loop's own included, through the loop's FIFO: commit order.
            try:
                loop.call_soon_threadsafe(arrived.put_nowait, change)
            except RuntimeError:  # the loop closed: the feed is gone with it
                pass

        self._agent = agent
        self._interval = interval
        self._arrived = arrived
        self._failure: Optional[BaseException] = None
        self._hook: Optional[Hook] = agent.sync.on_change(receive)

    def __aiter__(self) -> "ChangeFeed[StateT]":
        return self

    async def __anext__(self) -> "Change[StateT]":
        arrived = self._arrived
        while True:
            if self._hook is None:
                raise StopAsyncIteration
            if arrived.empty() and self._failure is None:
                try:
                    await self._agent.poll()
                except AgentError as exc:
                    self._failure = exc
            if not arrived.empty():
                return arrived.get_nowait()
            if self._failure is not None:
                failure, self._failure = self._failure, None
                await self.aclose()
                raise failure
            try:
                return await asyncio.wait_for(arrived.get(), self._interval)
            except asyncio.TimeoutError:
                continue

    async def aclose(self) -> None:
        """Unregisters the feed's hook: iteration ends. Idempotent."""
        hook, self._hook = self._hook, None
        if hook is not None:
            hook.remove()

    async def __aenter__(self) -> "ChangeFeed[StateT]":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __del__(self) -> None:
        hook = getattr(self, "_hook", None)
        if hook is not None:
            hook.remove()


def _plain(callback: Any, what: str) -> None:
    if callback is not None and _is_async_callable(callback):
        raise TypeError(f"an AsyncAgent's {what} must be a plain function, not a coroutine function")
