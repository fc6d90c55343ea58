"""Watching a store: :func:`watch` follows the changes of any agents of a store (by id or by id
prefix), committed by any handle or process, and hands them out as :class:`WatchEvent` records.

A :class:`Watch` is a queue the library fills from the store's watcher thread (one per store
per process, whatever the number of watches and agents: see the book's *Watching* page). It is
read three ways:

- ``for event in w`` (a blocking iterator that ends once the watch is closed) or
  ``w.next(timeout=...)``;
- ``async for event in w`` on an asyncio loop: the queue's descriptor is watched with
  ``loop.add_reader`` (no thread per watch), and each wake-up takes at most :data:`_BATCH`
  events, so that a burst does not hold the loop;
- as a context manager (``with watch(...) as w:``), which closes it.

Per agent, events come in commit order, each once; a change the reader can no longer be given
(pruned from the change log, the log off, or the reader more than ``max_pending`` behind)
becomes one ``"resync"`` event carrying the agent's current state. Across agents no order is
promised.

The queue stays in the library (bounded by ``max_pending``); the binding keeps at most
:data:`_BATCH` decoded events per watch beside it.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import datetime as _dt
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Deque, Dict, Iterable, Iterator, Literal, Mapping, Optional, Union

from . import _native
from ._options import CONNECTION_KEYS, check_keywords, check_version, int_arg, options_json, store_path, text_arg
from ._records import AppliedPatch, PathLike, State
from .codec import encode_value
from .decoding import decode
from .errors import AgentError, BadHandleError, InvalidArgumentError
from .values import JSONInt

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .options import ConnectionOptions

__all__ = ["watch", "Watch", "WatchEvent", "WatchKind"]

#: What kind of change a :class:`WatchEvent` is (the same words in every language):
#: ``"merge"`` (``set_state`` and its forms: ``patch`` is the merge patch), ``"json_patch"``
#: (``patch_state``: ``patch`` is the list of operations), ``"replace"`` (``replace_state``,
#: ``restore``), ``"migration"`` (a state upgraded to a newer schema version), ``"deleted"``
#: (the agent was deleted or expired: version 0, no state) or ``"resync"`` (changes were missed:
#: ``state`` is the current state, which replaces a copy kept from earlier events).
WatchKind = Literal["merge", "json_patch", "replace", "migration", "deleted", "resync"]
#: ``AgentWatchEvent.kind`` (``AGENT_WATCH_*``) as a :data:`WatchKind`.
_KINDS: Dict[int, WatchKind] = {
    1: "merge",
    2: "json_patch",
    3: "replace",
    4: "migration",
    5: "deleted",
    6: "resync",
}
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
#: Events taken from the library per wake-up of an asyncio reader (as ``AsyncAgent`` takes its
#: completions): the loop's work per wake-up stays bounded, the rest come at the next turns.
_BATCH = 32
#: A blocking ``next()`` waits in slices this long (seconds), so that a signal handler (Ctrl-C's
#: ``KeyboardInterrupt``) runs within one slice: a thread waiting inside one C call would not
#: run it until an event came.
_SLICE = 0.2


@dataclass(frozen=True)
class WatchEvent:
    """One change delivered by a :class:`Watch`. Fresh, decoded values: keep them as you like.

    ``patch`` and ``state`` are decoded with the package's codec (as ``get_state`` decodes
    states): ``patch`` is the merge patch (a dict) of a ``"merge"`` event, the list of
    operations of a ``"json_patch"`` one, else ``None``. ``state`` is the agent's state after
    the change: always there for ``"replace"``, ``"migration"`` and ``"resync"`` events and for
    the first change of an agent the watch delivers; for every event but ``"deleted"`` when the
    watch was opened with ``states=True``; else ``None``.
    """

    #: The agent that changed.
    agent_id: str
    #: Its version after the change (0 for ``"deleted"``).
    version: int
    #: What kind of change it was (:data:`WatchKind`).
    kind: WatchKind
    #: The change as applied (see above), or ``None``.
    patch: Optional[AppliedPatch]
    #: The state after the change (see above), or ``None``.
    state: Optional[State]
    #: The schema version the state was written under (0 when none).
    schema: int
    #: When it was committed (by the writer's clock, millisecond precision,
    #: ``tzinfo=timezone.utc``, as :class:`~agent_state.LoggedChange` has it); ``None`` when
    #: unknown (a ``"resync"``).
    at: Optional[_dt.datetime]
    #: For a ``"migration"``, the schema version the state was upgraded from; else ``None``.
    migrated_from: Optional[int] = None


def _pointer_at(event: Any, field: Any) -> Optional[int]:
    # The struct's text fields are ``const char *`` (c_char_p for ctypes, which reads them up to
    # a NUL): their address is read as is, and the text by its length.
    value: Optional[int] = ctypes.c_void_p.from_buffer(event, field.offset).value
    return value


def _event_of(raw: Any) -> WatchEvent:
    """Decodes the library's ``AgentWatchEvent`` (not freed here)."""
    cls = _native.AgentWatchEvent
    agent_id = _native.text_at(_pointer_at(raw, cls.agent_id), raw.agent_id_len)
    kind = _KINDS.get(raw.kind)
    if kind is None:  # a newer library's kind: say what it is rather than guess
        raise AgentError(f"watch: an event of an unknown kind {raw.kind} (a newer library?)")
    patch_p = _pointer_at(raw, cls.patch)
    state_p = _pointer_at(raw, cls.state)
    patch = decode(_native.text_at(patch_p, raw.patch_len)) if patch_p else None
    state = decode(_native.text_at(state_p, raw.state_len)) if state_p else None
    at = _EPOCH + _dt.timedelta(milliseconds=raw.at_ms) if raw.at_ms else None
    migrated_from = raw.migrated_from if kind == "migration" else None
    return WatchEvent(agent_id, raw.version, kind, patch, state, raw.schema, at, migrated_from)


#: Bumped in a child made by fork(): a watch belongs to the process that opened it (the library
#: refuses a child's calls on it but close); its descriptor is the parent's.
_generation = [0]


def _forked() -> None:
    _generation[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _seconds_ms(value: Any, what: str) -> int:
    """A duration argument (seconds as an int or float, or a ``timedelta``) in whole
    milliseconds, rounded up, at least 1."""
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidArgumentError(f"{what} must be seconds (an int or float) or a timedelta, not {type(value).__name__}")
    if not seconds > 0:
        raise InvalidArgumentError(f"{what} must be more than 0 seconds, not {value!r}")
    ms = int(-(-seconds * 1000 // 1))
    return max(ms, 1)


def _watch_json(
    open_options: Mapping[str, Any],
    ids: Optional[Iterable[str]],
    prefix: Optional[str],
    since: Optional[Mapping[str, int]],
    states: bool,
    max_pending: Optional[int],
    poll_interval: Any,
    rescan_interval: Any,
) -> bytes:
    """The options JSON of ``agent_watch_open``: the connection options, then the watch's
    own keys."""
    text, _ = options_json(open_options, CONNECTION_KEYS, "watch")
    parts = [text.decode("utf-8")[1:-1]] if text else []
    if ids is not None and prefix is not None:
        raise InvalidArgumentError("watch: give ids or prefix, not both")
    if ids is not None:
        if isinstance(ids, (str, bytes)):
            raise InvalidArgumentError("watch: ids must be a list of agent ids, not one string")
        listed = [text_arg(i, "an agent id of ids").decode("utf-8") for i in ids]
        parts.append('"ids":' + encode_value(listed))
    elif prefix is not None:
        parts.append('"prefix":' + encode_value(text_arg(prefix, "prefix").decode("utf-8")))
    if since is not None:
        if not isinstance(since, Mapping):
            raise InvalidArgumentError(f"watch: since must be a dict of agent id to version, not {type(since).__name__}")
        resume = {
            text_arg(k, "an agent id of since").decode("utf-8"): JSONInt(check_version(v, f"since[{k!r}]"))
            for k, v in since.items()
        }
        parts.append('"since":' + encode_value(resume))
    if not isinstance(states, bool):
        raise InvalidArgumentError(f"watch: states must be a bool, not {type(states).__name__}")
    if states:
        parts.append('"states":true')
    if max_pending is not None:
        parts.append('"max_pending":' + str(int_arg(max_pending, "max_pending")))
    if poll_interval is not None:
        parts.append('"watch_poll_ms":' + str(_seconds_ms(poll_interval, "poll_interval")))
    if rescan_interval is not None:
        parts.append('"rescan_ms":' + str(_seconds_ms(rescan_interval, "rescan_interval")))
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def watch(
    location: PathLike,
    *,
    ids: Optional[Iterable[str]] = None,
    prefix: Optional[str] = None,
    since: Optional[Mapping[str, int]] = None,
    states: bool = False,
    max_pending: Optional[int] = None,
    poll_interval: Union[float, _dt.timedelta, None] = None,
    rescan_interval: Union[float, _dt.timedelta, None] = None,
    **open_options: "Unpack[ConnectionOptions]",
) -> "Watch":
    """Starts watching the store at ``location`` (a SQLite file path or a ``postgres://`` URI,
    as :class:`~agent_state.Agent` takes it) and returns the :class:`Watch`. When it returns,
    every change committed afterwards is delivered.

    Which agents: ``ids`` (a list of agent ids; may be empty and grow with :meth:`Watch.add`)
    or ``prefix`` (every agent whose id starts with it, agents created later included); neither
    is every agent of the store (``prefix=""``).

    ``since`` maps agent ids to the version to resume after: their changes after it are
    delivered first, from the change log (or one ``"resync"`` when the log no longer holds
    them). The other agents start at their version when the watch begins.

    ``states=True`` gives every event the agent's state after the change (the library keeps the
    last state of each watched agent for it). ``max_pending`` (default 10000) bounds the events
    queued for a reader that does not keep up: beyond it, that agent's queued events give way to
    one ``"resync"``. ``poll_interval`` (seconds or a ``timedelta``; PostgreSQL only) reads the
    watched agents' versions once per interval instead of LISTEN, for a connection through a
    transaction pooler. ``rescan_interval`` (default 30 s) is how often the watcher also compares
    every watched agent's stored version, as a safety net for commits it was not told of.

    The other keywords are the connection's options (:class:`~agent_state.ConnectionOptions`).
    Nothing is ever created: watching a store that does not exist raises.

    Raises :class:`~agent_state.InvalidArgumentError` (a bad id or prefix, both ``ids`` and
    ``prefix``, ``max_pending`` 0, ``":memory:"``), :class:`~agent_state.StorageError` (no store
    there), :class:`~agent_state.UnavailableError` and :class:`~agent_state.AuthError` (the
    server), :class:`~agent_state.BusyError`; :class:`TypeError` for an unknown keyword.
    """
    check_keywords(open_options, CONNECTION_KEYS, "watch")
    path = store_path(location)
    options = _watch_json(open_options, ids, prefix, since, states, max_pending, poll_interval, rescan_interval)
    lib = _native.library()
    handle = ctypes.c_uint64(0)
    fd = ctypes.c_int32(-1)
    # The queue form: a NULL callback (ctypes passes None only for pointer types, not for a
    # CFUNCTYPE argument, hence a NULL function pointer of the type).
    lib.agent_watch_open(path, options, _native.WATCH_FN(), None, ctypes.byref(handle), ctypes.byref(fd))
    return Watch(handle.value, fd.value, os.fsdecode(path))


class Watch:
    """A subscription to a store's changes (see :func:`watch`). Iterate it (``for``, or
    ``async for`` on an asyncio loop) or call :meth:`next`; close it with :meth:`close` or a
    ``with`` block (a watch forgotten without closing is closed when collected).

    Thread-safety: any thread may call any method; a blocking :meth:`next` in one thread
    returns (the iterator ends) once another closes the watch. ``async for`` reads on one
    event loop at a time.
    """

    def __init__(self, handle: int, fd: int, location: str) -> None:
        self._handle = handle
        self._fd = fd
        self._location = location
        self._generation = _generation[0]
        self._lock = threading.Lock()
        self._closed = False
        #: Events taken from the library by an asyncio reader, not yet handed out.
        self._buffer: Deque[WatchEvent] = collections.deque()
        #: While an ``async for`` waits: its loop and the future the descriptor's reader
        #: resolves.
        self._waiting: Optional[Any] = None
        self._out = ctypes.POINTER(_native.AgentWatchEvent)()
        self._finalizer = weakref.finalize(self, _close, handle)

    # -- reading ------------------------------------------------------------------------------

    def _take(self, timeout_ms: int) -> Optional[WatchEvent]:
        """One ``agent_watch_next`` call: an event, or None when none came within the time."""
        if self._generation != _generation[0]:
            raise BadHandleError("watch: this watch belongs to the process that opened it (this is a fork() child)")
        out = ctypes.POINTER(_native.AgentWatchEvent)()
        _native.library().agent_watch_next(self._handle, timeout_ms, ctypes.byref(out))
        if not out:
            return None
        try:
            return _event_of(out.contents)
        finally:
            _native.library().agent_watch_event_free(out)

    def next(self, timeout: Optional[float] = None) -> Optional[WatchEvent]:
        """The next event, waiting up to ``timeout`` seconds (``None``: until one comes); ``None``
        when none came in time.

        Raises :class:`~agent_state.BadHandleError` once the watch is closed (also when another
        thread closes it while this waits), and the store's error if the watch failed for good
        (failures that pass, such as a server restarting, are retried by the watcher, which then
        catches up).
        """
        if self._buffer:
            try:
                return self._buffer.popleft()
            except IndexError:  # another thread took it
                pass
        if timeout is None:
            while True:
                event = self._take(int(_SLICE * 1000))
                if event is not None:
                    return event
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise InvalidArgumentError(f"timeout must be seconds (an int or float) or None, not {type(timeout).__name__}")
        if timeout <= 0:
            return self._take(0)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            event = self._take(max(0, min(int(left * 1000 + 0.999), int(_SLICE * 1000))))
            if event is not None or left <= _SLICE:
                return event

    def try_next(self) -> Optional[WatchEvent]:
        """The next event if one is queued, else ``None``, without waiting."""
        return self.next(0)

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        try:
            event = self.next()
        except BadHandleError:
            if self._closed:
                raise StopIteration from None
            raise
        assert event is not None
        return event

    # -- asyncio -------------------------------------------------------------------------------

    def __aiter__(self) -> "Watch":
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            try:
                self._fill()
            except BadHandleError:
                if self._closed:
                    raise StopAsyncIteration from None
                raise
            if self._buffer:
                continue
            await self._readable()

    def _fill(self) -> None:
        """Takes up to :data:`_BATCH` queued events into the buffer, without waiting."""
        for _ in range(_BATCH):
            event = self._take(0)
            if event is None:
                return
            self._buffer.append(event)

    async def _readable(self) -> None:
        """Waits until the watch's descriptor is readable (an event is queued) or the watch is
        closed. Readers on one loop share one wait."""
        loop = asyncio.get_running_loop()
        waiting = self._waiting
        if waiting is None or waiting[1].done():
            if self._closed:
                return
            future: "asyncio.Future[None]" = loop.create_future()
            waiting = self._waiting = (loop, future)
            try:
                loop.add_reader(self._fd, self._wake, waiting)
            except NotImplementedError:  # a loop that cannot watch a descriptor (Proactor)
                self._waiting = None
                event = await loop.run_in_executor(None, self._take, int(_SLICE * 1000))
                if event is not None:
                    self._buffer.append(event)
                return
        elif waiting[0] is not loop:
            raise RuntimeError("watch: async for reads this watch on another event loop already")
        await asyncio.shield(waiting[1])

    def _wake(self, waiting: Any) -> None:
        """On the loop: the descriptor is readable, or the watch closed."""
        loop, future = waiting
        if self._waiting is waiting:
            self._waiting = None
        if not loop.is_closed():
            loop.remove_reader(self._fd)
        if not future.done():
            future.set_result(None)

    # -- the agents followed -------------------------------------------------------------------

    def add(self, agent_id: str, since: Optional[int] = None) -> None:
        """Follows one more agent (a watch of ``ids`` only), from after version ``since`` (caught
        up from the change log), or from its current version (``None``). Raises
        :class:`~agent_state.InvalidArgumentError` (a prefix watch, a bad id or version) and
        :class:`~agent_state.BadHandleError` (closed)."""
        raw = text_arg(agent_id, "agent_id")
        version = -1 if since is None else check_version(since, "since")
        if version >= 2**63:
            raise InvalidArgumentError(f"since must be below 2**63, not {version}")
        _native.library().agent_watch_add(self._handle, raw, version)

    def remove(self, agent_id: str) -> None:
        """Stops following an agent (its events already queued stay queued). Raises
        :class:`~agent_state.BadHandleError` (closed)."""
        _native.library().agent_watch_remove(self._handle, text_arg(agent_id, "agent_id"))

    # -- closing -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def location(self) -> str:
        """The store watched, as given."""
        return self._location

    def close(self) -> None:
        """Closes the watch: queued events are dropped, a blocking :meth:`next` raises
        :class:`~agent_state.BadHandleError` (a ``for`` loop ends), an ``async for`` ends.
        Idempotent; any thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._buffer.clear()
        waiting = self._waiting
        if waiting is not None:
            loop = waiting[0]
            # The reader must be off the descriptor before the library closes it.
            if _on_loop(loop):
                self._wake(waiting)
            else:
                done = threading.Event()

                def wake() -> None:
                    self._wake(waiting)
                    done.set()

                try:
                    loop.call_soon_threadsafe(wake)
                    done.wait(1.0)
                except RuntimeError:  # the loop is closed: nothing watches the descriptor
                    pass
        self._finalizer()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "Watch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    async def aclose(self) -> None:
        """:meth:`close`, for ``async with`` and ``contextlib.aclosing``."""
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<agent_state.Watch {self._location!r} {state}>"


def _on_loop(loop: Any) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _close(handle: int) -> None:
    """Frees a watch in the library (its finalizer: run once, by close() or collection)."""
    lib = _native._lib
    if lib is None:  # pragma: no cover - a watch was made, so the library is loaded
        return
    try:
        lib.agent_watch_close(handle)
    except BadHandleError:  # already gone: closing is idempotent
        pass
