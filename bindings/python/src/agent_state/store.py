"""A store's agents as a whole: list them, delete one (its state, versions and change log, in
one transaction, erased on SQLite), expire the idle ones in bounded batches; and the same as
coroutines, on :class:`~agent_state.AsyncAgent`'s thread pool with its cancellation.

Each call opens a connection of its own to the store (no :class:`~agent_state.Agent` needed,
none kept), with the connection's open options, the keywords of
:class:`~agent_state.ConnectionOptions` (on PostgreSQL the process's pool is shared with its
agents). The agent's own options (the other keys of :class:`~agent_state.OpenOptions`) are not
parameters: passing one raises :class:`TypeError`.
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime as _dt
import functools
import json
from typing import TYPE_CHECKING, Any, Callable, List, Optional, TypeVar

from . import _native
from ._async_hooks import Call
from ._native import call
from ._options import CONNECTION_KEYS, check_version, int_arg, options_json, store_path, text_arg
from ._records import AgentInfo, PathLike
from .async_agent import offload
from .errors import InvalidArgumentError
from .limits import MAX_LIST_LIMIT
from .options import ConnectionOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "list_agents",
    "delete_agent",
    "expire_agents",
    "list_agents_async",
    "delete_agent_async",
    "expire_agents_async",
]

_T = TypeVar("_T")

#: expire_agents' default batch: the ``agent-state expire`` command's ``--batch`` default (the C
#: function takes no default: a limit of 0 is refused).
DEFAULT_EXPIRE_LIMIT = 1000

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = _dt.timedelta(milliseconds=1)
_MAX_INT64 = 2**63 - 1


def _limit(value: Any) -> int:
    """``limit``: an int (not a bool) from 1 to ``MAX_LIST_LIMIT`` (checked here: ctypes would
    cut a larger one to 32 bits)."""
    number = int_arg(value, "limit")
    if not 1 <= number <= MAX_LIST_LIMIT:
        raise InvalidArgumentError(f"limit must be from 1 to {MAX_LIST_LIMIT}, got {number}")
    return number


def _idle_ms(idle_for: Any) -> int:
    """``idle_for``, a non-negative ``timedelta``, in milliseconds rounded up (an agent idle for
    less than ``idle_for`` is never taken for idler)."""
    if not isinstance(idle_for, _dt.timedelta):
        raise TypeError(f"idle_for must be a datetime.timedelta, not {type(idle_for).__name__}")
    if idle_for < _dt.timedelta(0):
        raise InvalidArgumentError(f"idle_for must not be negative, got {idle_for!r}")
    whole, rest = divmod(idle_for, _MS)
    return int(whole) + (1 if rest else 0)


def _connection(options: ConnectionOptions, caller: str) -> Optional[bytes]:
    """The options JSON of a store function's keyword ``options`` (:class:`TypeError` for
    another keyword, an agent's own option included)."""
    encoded, _ = options_json(options, CONNECTION_KEYS, caller)
    return encoded


def _entries(text: str) -> List[AgentInfo]:
    return [
        AgentInfo(
            entry["id"],
            entry["version"],
            entry["bytes"],
            _EPOCH + _dt.timedelta(milliseconds=entry["written_at"]),
        )
        for entry in json.loads(text)
    ]


def _listing(fn: Any, *args: Any) -> List[AgentInfo]:
    """``fn(*args, &buffer)``, a store function answering with the JSON array of
    ``agent_store_list``, as :class:`AgentInfo` records (the buffer is freed)."""
    buf = _native.AgentBuffer()
    lib = _native.library()
    try:
        call(fn, *args, ctypes.byref(buf))
        text = _native.text_at(buf.data, buf.len)
    finally:
        lib.agent_buffer_free(ctypes.byref(buf))
    return _entries(text)


def list_agents(
    path: PathLike,
    *,
    prefix: Optional[str] = None,
    after: Optional[str] = None,
    limit: int = 100,
    **options: Unpack[ConnectionOptions],
) -> List[AgentInfo]:
    """The agents with a state stored in the store at ``path`` (a SQLite file or a PostgreSQL
    URI, as for :class:`~agent_state.Agent`), ordered by id (the byte order of their UTF-8,
    which is ``str`` order), as :class:`~agent_state.AgentInfo` records ``(id, version, bytes,
    written_at)``: at most ``limit`` (1 to 10000) of them, those whose id comes after
    ``after`` (``None``: from the first) and starts with ``prefix`` (``None``: any). For the
    next page pass the last id as ``after``; a page costs what it holds, whatever the store
    holds::

        after = None
        while page := list_agents("app.db", after=after, limit=1000):
            ...
            after = page[-1].id

    A SQLite file's single agent (opened without ``agent_id``) is listed with the id ``""``
    (first). Agents opened but never written, and deleted ones, are not listed. The store must
    exist (listing never creates one: :class:`~agent_state.StorageError`).

    Raises :class:`~agent_state.InvalidArgumentError` (``limit`` out of range, a ``prefix`` or
    ``after`` longer than 255 UTF-8 bytes or with a NUL, a bad option),
    :class:`~agent_state.StorageError`, :class:`~agent_state.BusyError`,
    :class:`~agent_state.UnavailableError`, :class:`~agent_state.AuthError`.
    """
    raw_path = store_path(path)
    encoded = _connection(options, "list_agents")
    raw_prefix = None if prefix is None else text_arg(prefix, "prefix")
    raw_after = None if after is None else text_arg(after, "after")
    return _listing(_native.library().agent_store_list, raw_path, encoded, raw_prefix, raw_after, _limit(limit))


def delete_agent(
    path: PathLike,
    agent_id: str,
    *,
    if_version: Optional[int] = None,
    **options: Unpack[ConnectionOptions],
) -> Optional[int]:
    """Deletes the agent ``agent_id`` of the store at ``path``: its state, its versions and its
    change log, in one transaction (its ``change_log`` setting stays). Returns the version it
    had, or ``None`` when nothing was stored (nothing done; not an error). With
    ``if_version``, only if its state is still at that version (0: nothing stored), else
    :class:`~agent_state.ConflictError` and nothing deleted. ``""`` is a SQLite file's single
    agent.

    Agents open on it, in this process or another, find it gone at their next call: a read
    returns their initial state at version 0; with the change log on, their hooks get the
    deletion as one :class:`~agent_state.Change` (by :meth:`~agent_state.Agent.poll`, or ahead
    of their next write) from the last state they saw to their initial state, ``patch``
    ``None``, ``version`` 0. Versions never go back: the agent's next first write takes the
    version after the one it was deleted at (the store keeps a tombstone: a 64-bit hash of the
    id, not the id, and that version), so a compare-and-set against a version read before the
    deletion never succeeds after it.

    Erasure: on SQLite, once it returns, no byte of the deleted state or of its history is left
    in the database file or its WAL. If another connection's read outlasts ``busy_timeout_ms``
    meanwhile, it raises :class:`~agent_state.BusyError` after the deletion committed: call it
    again to finish the erasure. On PostgreSQL the rows are deleted; what VACUUM, WAL archives
    and backups keep is the server's (the book's guide "Erasure and retention").

    Raises :class:`~agent_state.InvalidArgumentError` (an id longer than 255 UTF-8 bytes or
    with a NUL, a bad option), :class:`~agent_state.ConflictError`,
    :class:`~agent_state.StorageError` (no store there, ``read_only``), and the connection's
    errors as :func:`list_agents`.
    """
    raw_path = store_path(path)
    encoded = _connection(options, "delete_agent")
    raw_id = text_arg(agent_id, "agent_id")
    expected = -1
    if if_version is not None:
        expected = check_version(if_version, "if_version")
        if expected > _MAX_INT64:
            raise InvalidArgumentError(f"if_version must be from 0 to 2**63 - 1, not {expected}")
    deleted = ctypes.c_uint64(0)
    call(_native.library().agent_store_delete, raw_path, encoded, raw_id, expected, ctypes.byref(deleted))
    return deleted.value or None


def expire_agents(
    path: PathLike,
    idle_for: _dt.timedelta,
    *,
    limit: int = DEFAULT_EXPIRE_LIMIT,
    dry_run: bool = False,
    **options: Unpack[ConnectionOptions],
) -> List[AgentInfo]:
    """Deletes, as :func:`delete_agent` does (erasure included), at most ``limit`` (1 to 10000)
    agents of the store at ``path`` whose state was last written more than ``idle_for`` ago
    (a ``timedelta``, rounded up to whole milliseconds), the longest idle first, in one
    transaction, and returns them as :class:`~agent_state.AgentInfo` records (as they were);
    with ``dry_run``, deletes nothing and returns those it would delete. An agent written
    during the call is not deleted. A call costs what it deletes, whatever the store holds:
    call it until it returns fewer than ``limit`` (a cron job, a timer). Every agent of the
    store counts, whatever its id.

    Raises what :func:`delete_agent` raises (but :class:`~agent_state.ConflictError`), and
    :class:`~agent_state.InvalidArgumentError` for ``limit`` out of range or a negative
    ``idle_for``.
    """
    raw_path = store_path(path)
    encoded = _connection(options, "expire_agents")
    return _listing(
        _native.library().agent_store_expire, raw_path, encoded, _idle_ms(idle_for), _limit(limit), 1 if dry_run else 0
    )


# -- coroutines --------------------------------------------------------------------------------


async def _run(fn: Callable[[], _T]) -> _T:
    """``fn()`` on a worker thread of AsyncAgent's pool, under a cancel token that cancelling
    the awaiting task fires (``async_agent.offload``)."""
    loop = asyncio.get_running_loop()
    return await offload(loop, Call(loop), fn)


async def list_agents_async(
    path: PathLike,
    *,
    prefix: Optional[str] = None,
    after: Optional[str] = None,
    limit: int = 100,
    **options: Unpack[ConnectionOptions],
) -> List[AgentInfo]:
    """:func:`list_agents`, awaited: run on a worker thread of :class:`~agent_state.AsyncAgent`'s
    pool; cancelling the await ends a call still waiting (for a lock, a pooled connection, the
    server) within milliseconds, and raises :class:`asyncio.CancelledError`."""
    return await _run(functools.partial(list_agents, path, prefix=prefix, after=after, limit=limit, **options))


async def delete_agent_async(
    path: PathLike,
    agent_id: str,
    *,
    if_version: Optional[int] = None,
    **options: Unpack[ConnectionOptions],
) -> Optional[int]:
    """:func:`delete_agent`, awaited (as :func:`list_agents_async`). A deletion cancelled while
    it waits for a lock deletes nothing; one whose commit was under way completes (the await
    still raises :class:`asyncio.CancelledError`): list or read the agent to know."""
    return await _run(functools.partial(delete_agent, path, agent_id, if_version=if_version, **options))


async def expire_agents_async(
    path: PathLike,
    idle_for: _dt.timedelta,
    *,
    limit: int = DEFAULT_EXPIRE_LIMIT,
    dry_run: bool = False,
    **options: Unpack[ConnectionOptions],
) -> List[AgentInfo]:
    """:func:`expire_agents`, awaited (as :func:`delete_agent_async`)."""
    return await _run(functools.partial(expire_agents, path, idle_for, limit=limit, dry_run=dry_run, **options))
