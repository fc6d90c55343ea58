"""The open options: the keywords :class:`~agent_state.Agent`, :class:`~agent_state.AsyncAgent`,
:meth:`AsyncAgent.open <agent_state.AsyncAgent.open>` and the store functions
(:func:`~agent_state.list_agents`, ...) take, described once, as ``TypedDict`` types.

They are the library's open options (the surface description,
``include/agent_state_surface.json``, lists them; ``tests/test_surface.py`` checks these types
against it), plus ``default``, this binding's own. Each key is a keyword of the same name;
leaving it out, or passing ``None``, gives the library's behaviour when the option is absent.
A key whose option has a fixed default says it as ``Annotated[..., Default(value)]``.
"""

# No `from __future__ import annotations` here: the keys' types (and their Default markers) are
# evaluated when the classes are made, so that the Default markers are there to read at run time.

from typing import Annotated, Any, Mapping, Optional, Sequence, TypedDict, Union

from ._records import ChangeLogOption, DefaultEncoder, InitialStateCallback, StateModel, Synchronous

__all__ = ["OpenOptions", "ConnectionOptions"]


class Default:
    """The library's fixed default of an open option, when the key is absent (a marker in the
    key's ``Annotated`` type; the binding sends nothing for an absent key, so this is what the
    library then uses)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Default({self.value!r})"


class ConnectionOptions(TypedDict, total=False):
    """The options of a connection to a store: the keywords of the store functions
    (:func:`~agent_state.list_agents`, :func:`~agent_state.delete_agent`,
    :func:`~agent_state.expire_agents` and their ``_async`` forms), and of every open
    (:class:`OpenOptions` has them all).

    Keys (each optional; ``None`` is the same as leaving it out):

    ``synchronous``
        ``"full"`` (default: an acknowledged write survives power loss) or ``"normal"``
        (survives a process crash); on PostgreSQL ``synchronous_commit`` on or off.
    ``busy_timeout_ms``
        How long a call waits for what another connection holds (default 5000; 0 fails at
        once): SQLite's write lock; on PostgreSQL the agent's row, a table lock or a pooled
        connection (:class:`~agent_state.BusyError` past it). It never bounds how long an
        uncontended statement takes.
    ``server_timeout_ms``
        PostgreSQL: how long the server may take to answer (default 10000; 1 to 2147483647):
        a connection attempt gets this long, a statement ``busy_timeout_ms +
        server_timeout_ms``; past it a frozen or partitioned server raises
        :class:`~agent_state.UnavailableError`. Accepted and unused on SQLite.
    ``read_only``
        Open the store read-only (default ``False``): writes raise
        :class:`~agent_state.StorageError`, and the store is never modified.
    ``max_connections``
        PostgreSQL: the most connections this process keeps to the server, shared by all its
        agents on it (1 to 1000, default 4; the pool has the largest size any open asked for).
        A SQLite file has no pool and does not use it.
    """

    synchronous: Annotated[Optional[Synchronous], Default("full")]
    busy_timeout_ms: Annotated[Optional[int], Default(5000)]
    server_timeout_ms: Annotated[Optional[int], Default(10000)]
    read_only: Annotated[Optional[bool], Default(False)]
    max_connections: Annotated[Optional[int], Default(4)]


class OpenOptions(ConnectionOptions, total=False):
    """The options of an open agent: the keywords of :class:`~agent_state.Agent`,
    :class:`~agent_state.AsyncAgent` and :meth:`AsyncAgent.open
    <agent_state.AsyncAgent.open>`. A dict of this type may be built once and passed to
    any of them, checked by type checkers::

        options: OpenOptions = {"agent_id": "support-bot-7", "busy_timeout_ms": 2000}
        agent = Agent(uri, **options)

    Keys: those of :class:`ConnectionOptions`, and (each optional; ``None`` is the same as
    leaving it out):

    ``initial_state``
        The state shown while nothing is stored (default ``{}``; never stored by a read): a
        dict (or a dataclass or pydantic model instance: all its fields), or a callable
        returning one (an initial-state hook, called every time a default state is needed; it
        must not use this agent).
    ``max_value_bytes``
        This handle's cap on the encoded state and on input documents, in bytes (2 to
        1000000000; absent: the cap recorded in the store by ``store_max_value_bytes``, if
        any, else the library's default, 2097152).
    ``store_max_value_bytes``
        Records this cap (2 to 1000000000) in the store, for every agent opened later without
        its own ``max_value_bytes`` (and this one, unless it gives its own); absent leaves the
        store's setting as it is. With ``read_only``, an
        :class:`~agent_state.InvalidArgumentError`.
    ``change_log``
        The agent's change log, which :meth:`~agent_state.Agent.poll`,
        :meth:`~agent_state.Agent.changes_since`, :meth:`~agent_state.Agent.state_at` and
        :meth:`~agent_state.Agent.restore` read: ``{"keep_last": N}`` and/or
        ``{"keep_seconds": T}`` (T an int or a ``timedelta``, rounded up to whole seconds; with
        both, both limits apply; the newest change is always kept) switch it on, ``False``
        switches it off and drops it; absent leaves the agent's setting. The setting is the
        agent's (the one ``agent_id`` names, or the file's single agent), recorded in the
        store: every handle on that agent, in any process, then logs its changes, whatever
        options it was opened with; other agents of the store keep their own setting.
    ``agent_id``
        Which agent of the store (a non-empty ``str`` of at most 255 UTF-8 bytes). Required on
        PostgreSQL. On a SQLite file, absent is the file's single agent; with an id, one file
        holds many isolated agents (state, version, change log, hooks), and the agents with an
        id in one process share one connection per file. Anything but a ``str`` raises
        :class:`~agent_state.InvalidArgumentError`.
    ``schema_version``
        The schema version of the states this program reads and writes (0 to 1000000, default
        0). A state stored under an older one is upgraded on first touch by the steps
        (``schema_steps``, :meth:`~agent_state.Agent.set_schema_step`), once, as a change of
        its own (hooks see ``kind == "migration"``); one stored under a newer one makes every
        read and write raise :class:`~agent_state.NewerSchemaError` with nothing written,
        unless ``read_only``, which reads every state as stored.
    ``schema_steps``
        Declarative steps (default ``[]``): a list of ``{"from": K, "ops": [...]}``, each
        upgrading a state from version K to K + 1 by its operations, in order:
        ``{"op": "merge", "value": {...}}`` (an RFC 7396 patch; with ``"path"``, at that
        member), ``{"op": "default", "path": P, "value": V}`` (set where missing),
        ``{"op": "set", "path": P, "value": V}``, ``{"op": "remove", "path": P}``,
        ``{"op": "rename", "path": P, "to": "newName"}`` and ``{"op": "move", "from": P,
        "path": Q}``; paths are JSON Pointers to object members (``"/user/name"``). Values
        are encoded as states are. A malformed step raises
        :class:`~agent_state.InvalidArgumentError` at open; steps of code fill the versions
        these leave out.
    ``watch``
        Pushes changes that other agents and processes commit to this agent's
        ``on_state_changed`` hooks (default ``False``), in commit order and once each, without
        :meth:`~agent_state.Agent.poll`: the store's watcher notices them and a library worker
        thread calls the hooks. Needs the change log (else
        :class:`~agent_state.InvalidArgumentError` at open).
    ``default``
        This binding's own, not the library's: a function called with a value the codec cannot
        store, returning a storable stand-in (or raising), as ``json.dumps``'s ``default``:
        used for every value written through the agent (``initial_state`` too). ``UUID``,
        ``Enum``, ``Decimal``, ``pathlib`` paths, dataclasses and pydantic models have a
        mapping of their own and do not reach it.
    """

    initial_state: Annotated[
        Union[Mapping[str, Any], StateModel, InitialStateCallback, None], Default({})
    ]
    max_value_bytes: Optional[int]
    store_max_value_bytes: Optional[int]
    change_log: Optional[ChangeLogOption]
    agent_id: Optional[str]
    schema_version: Annotated[Optional[int], Default(0)]
    schema_steps: Annotated[Optional[Sequence[Mapping[str, Any]]], Default([])]
    watch: Annotated[Optional[bool], Default(False)]
    default: Optional[DefaultEncoder]
