"""The :class:`AsyncAgent`: an :class:`~agent_state.Agent` for asyncio.

Each call runs the sync :class:`~agent_state.Agent`'s method on a worker thread of one bounded,
module-level thread pool (awaited through ``asyncio.wrap_future``), under a cancel token of the library bound
to that thread (``agent_cancel_new`` / ``agent_cancel_bind``); ctypes releases the GIL while the
library works, so the event loop stays responsive while a call waits for a lock. When the
awaiting coroutine is cancelled, the token is fired, the worker's call is waited for (it ends
within milliseconds), and :class:`asyncio.CancelledError` propagates.

Coroutine hooks are delivered on the loop by ``_async_hooks``; :meth:`AsyncAgent.changes`
polls the change feed from the loop, on the same pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import inspect
import os
import threading
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
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

from . import _callbacks, _native
from ._async_hooks import AsyncHook, Call, Delivery
from ._hook import Hook
from ._options import OPEN_KEYS, check_keywords
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
from .agent import Agent
from .errors import AgentError, InvalidArgumentError
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
    ``AsyncAgent[ConvState]`` types the state as :class:`~agent_state.Agent` does. Each store
    call runs the sync agent's method on a worker thread of one
    module-level thread pool shared by every ``AsyncAgent`` of the process (at most
    ``max(32, os.cpu_count() + 4)`` threads; more concurrent calls queue), so the event loop is
    never blocked while a call waits for a lock, a pooled connection or the server.

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
    right after the commit, as in the sync API. A coroutine hook is awaited on the event loop
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
        await self._run(self._agent.close)

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
        return await self._run(self._agent.get_state)

    async def get_state_as(self, model: Type[M]) -> M:
        """:meth:`Agent.get_state_as <agent_state.Agent.get_state_as>`, awaited."""
        return await self._run(self._agent.get_state_as, model)

    async def get_state_json(self) -> str:
        """:meth:`Agent.get_state_json <agent_state.Agent.get_state_json>`, awaited."""
        return await self._run(self._agent.get_state_json)

    async def set_state(self, patch: Patch) -> StateT:
        """:meth:`Agent.set_state <agent_state.Agent.set_state>`, awaited (hooks run on the
        worker thread before it returns)."""
        return await self._run(self._agent.set_state, patch)

    @overload
    async def replace_state(
        self: "AsyncAgent[Dict[str, Any]]", state: Union[Mapping[str, Any], StateModel]
    ) -> Dict[str, Any]: ...
    @overload
    async def replace_state(self, state: Union[StateT, StateModel]) -> StateT: ...
    async def replace_state(self, state: Union[Mapping[str, Any], StateModel]) -> Any:
        """:meth:`Agent.replace_state <agent_state.Agent.replace_state>`, awaited."""
        return await self._run(self._agent.replace_state, state)

    async def set_state_json(self, patch: Union[str, bytes]) -> str:
        """:meth:`Agent.set_state_json <agent_state.Agent.set_state_json>`, awaited."""
        return await self._run(self._agent.set_state_json, patch)

    async def replace_state_json(self, state: Union[str, bytes]) -> str:
        """:meth:`Agent.replace_state_json <agent_state.Agent.replace_state_json>`, awaited."""
        return await self._run(self._agent.replace_state_json, state)

    async def get_state_versioned(self) -> Versioned[StateT]:
        """:meth:`Agent.get_state_versioned <agent_state.Agent.get_state_versioned>`, awaited."""
        return await self._run(self._agent.get_state_versioned)

    async def set_state_if(self, expected_version: int, patch: Patch) -> Versioned[StateT]:
        """:meth:`Agent.set_state_if <agent_state.Agent.set_state_if>`, awaited."""
        return await self._run(self._agent.set_state_if, expected_version, patch)

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
        return await self._run(self._agent.replace_state_if, expected_version, state)

    # -- JSON Patch (RFC 6902) and reads of one place (RFC 6901) -------------------------------

    async def patch_state(self, operations: Operations) -> StateT:
        """:meth:`Agent.patch_state <agent_state.Agent.patch_state>`, awaited."""
        return await self._run(self._agent.patch_state, operations)

    async def patch_state_json(self, operations: Union[str, bytes]) -> str:
        """:meth:`Agent.patch_state_json <agent_state.Agent.patch_state_json>`, awaited."""
        return await self._run(self._agent.patch_state_json, operations)

    async def patch_state_if(self, expected_version: int, operations: Operations) -> Versioned[StateT]:
        """:meth:`Agent.patch_state_if <agent_state.Agent.patch_state_if>`, awaited."""
        return await self._run(self._agent.patch_state_if, expected_version, operations)

    async def patch_state_if_json(self, expected_version: int, operations: Union[str, bytes]) -> Tuple[str, int]:
        """:meth:`Agent.patch_state_if_json <agent_state.Agent.patch_state_if_json>`,
        awaited."""
        return await self._run(self._agent.patch_state_if_json, expected_version, operations)

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
