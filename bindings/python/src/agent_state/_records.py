"""The records and signatures of the public API: the named tuples that :class:`~agent_state.Agent`
returns and hands to callbacks, and the types of those callbacks and of the options.

**Typed state.** ``Agent``, ``AsyncAgent`` and the records holding a state (``Change``,
``Versioned``, ``LoggedChange``) are generic in the state's type, :data:`StateT`: a
``TypedDict`` (or any ``Mapping[str, Any]``) that type checkers then see ``get_state()`` and the
hooks' arguments as, ``Agent[ConvState]``. It defaults to ``Dict[str, Any]``, so a plain
``Agent(...)`` is typed as before. Types only: at run time a state is always a ``dict``.

The records are generic named tuples for type checkers; at run time, where a generic
``NamedTuple`` needs Python 3.11, they are plain named tuples that may still be subscripted
(``Versioned[ConvState]``).
"""

from __future__ import annotations

import datetime as _dt
import os
import types
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Literal,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Union,
)

State = Dict[str, Any]

#: What kind of change a :class:`Change` (or :class:`LoggedChange`) is: ``"merge"``
#: (``set_state`` and its forms), ``"json_patch"`` (``patch_state`` and its forms: ``patch`` is
#: the list of operations), ``"replace"`` (``replace_state`` and its forms, ``restore``, a
#: deletion seen by ``poll``) or ``"migration"`` (a state stored under an older schema version
#: upgraded to the agent's).
ChangeKind = Literal["merge", "json_patch", "replace", "migration"]
#: The kinds of the C ABI's ``AgentStateChange.kind`` (``AGENT_CHANGE_*``).
CHANGE_KINDS: Dict[int, ChangeKind] = {1: "merge", 2: "replace", 3: "migration", 4: "json_patch"}
#: One RFC 6902 operation, as ``patch_state`` takes it and a ``"json_patch"`` change holds it:
#: ``{"op": "add", "path": "/messages/-", "value": {...}}``.
Operation = Dict[str, Any]
#: The patch of a change as applied: the merge patch (a dict) of a ``"merge"`` change, the
#: list of operations of a ``"json_patch"`` one.
AppliedPatch = Union[State, List[Operation]]
#: The operations ``patch_state`` takes: a list (or tuple) of dicts (any mappings).
Operations = Sequence[Mapping[str, Any]]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from typing_extensions import Protocol, TypeVar

    #: The type of an agent's state, for type checkers (a TypedDict, or any Mapping[str, Any]).
    StateT = TypeVar("StateT", bound=Mapping[str, Any], default=Dict[str, Any])

    class PydanticModel(Protocol):
        """A pydantic (v2) model instance, as far as this package uses it."""

        def model_dump(self, *, exclude_unset: bool = ...) -> Dict[str, Any]: ...

    #: A model instance that writes accept in place of a dict: a dataclass or a pydantic model.
    StateModel = Union[DataclassInstance, PydanticModel]

    class Change(NamedTuple, Generic[StateT]):
        next: StateT
        prev: StateT
        patch: Optional[AppliedPatch]
        version: int

        @property
        def kind(self) -> ChangeKind: ...
        @property
        def schema(self) -> int: ...
        @property
        def migrated_from(self) -> Optional[int]: ...

    class Versioned(NamedTuple, Generic[StateT]):
        state: StateT
        version: int

    class LoggedChange(NamedTuple, Generic[StateT]):
        version: int
        at: _dt.datetime
        patch: Optional[AppliedPatch]
        next: StateT

        @property
        def kind(self) -> ChangeKind: ...
        @property
        def schema(self) -> int: ...
        @property
        def migrated_from(self) -> Optional[int]: ...

else:
    from typing import TypeVar

    StateT = TypeVar("StateT", bound=Mapping[str, Any])
    StateModel = Any

    def _kind_of(patch: Any) -> ChangeKind:
        """The kind a change's ``patch`` alone tells: a list of operations is a JSON Patch, a
        dict a merge, ``None`` a replacement."""
        if patch is None:
            return "replace"
        return "json_patch" if isinstance(patch, list) else "merge"

    def _subscript(cls: Any, item: Any) -> Any:
        # Versioned[ConvState] at run time (in a cast(), say): an alias of the plain class.
        return types.GenericAlias(cls, item)

    class _SchemaAttributes:
        """``schema`` and ``migrated_from``, kept as attributes besides a named tuple's fields
        (:class:`Change`, :class:`LoggedChange`), and a ``_replace`` that keeps them."""

        @property
        def schema(self) -> int:
            """The schema version of ``next``: the writer's ``schema_version`` open option
            (0 when none)."""
            value: int = self.__dict__.get("schema", 0)
            return value

        @property
        def migrated_from(self) -> Optional[int]:
            """For a migration, the schema version the state was upgraded from; else
            ``None``."""
            value: Optional[int] = self.__dict__.get("migrated_from")
            return value

        def _replace(self, **fields: Any) -> Any:
            # namedtuple's _replace makes the tuple alone: keep the attributes besides it.
            new = super()._replace(**fields)  # type: ignore[misc]
            new.__dict__.update(self.__dict__)
            return new

    class _ChangeFields(NamedTuple):
        #: The state after the change.
        next: State
        #: The state before it (for a store's first change, the initial state of the agent that
        #: made it).
        prev: State
        #: The merge patch as applied (``set_state`` and its forms), a dict; the list of
        #: operations (``patch_state`` and its forms, ``kind == "json_patch"``); ``None`` for a
        #: replacement (``replace_state`` and its forms, ``restore``) and a migration.
        patch: Optional[AppliedPatch]
        #: The state's version after the change: 1 for the agent's first write, one more for
        #: each commit. The validator sees the version the change would get.
        version: int

    class Change(_SchemaAttributes, _ChangeFields):
        """One change of the state, as :meth:`Agent.on_change` hooks and the validator
        (:meth:`Agent.set_validator`) see it. Fresh, decoded values: keep them as you like.

        A named tuple ``(next, prev, patch, version)``; ``kind``, ``schema`` and
        ``migrated_from`` (below) are attributes besides the tuple's four fields, so that
        unpacking and comparing changes work as in earlier releases (two changes that differ
        only in them compare equal).
        """

        def __new__(
            cls,
            next: State,
            prev: State,
            patch: Optional[AppliedPatch],
            version: int,
            kind: Optional[ChangeKind] = None,
            schema: int = 0,
            migrated_from: Optional[int] = None,
        ) -> "Change":
            self = super().__new__(cls, next, prev, patch, version)
            if kind is not None:
                self.__dict__["kind"] = kind
            self.__dict__["schema"] = schema
            self.__dict__["migrated_from"] = migrated_from
            return self

        @property
        def kind(self) -> ChangeKind:
            """``"merge"``, ``"json_patch"``, ``"replace"`` or ``"migration"``
            (:data:`ChangeKind`): a JSON Patch's ``patch`` is its list of operations; a
            migration upgraded a state stored under schema version ``migrated_from`` to
            ``schema`` (its ``patch`` is ``None``). Built without it: ``"json_patch"`` when
            ``patch`` is a list, ``"merge"`` when it is a dict, else ``"replace"``."""
            kind: Optional[ChangeKind] = self.__dict__.get("kind")
            if kind is None:
                return _kind_of(self.patch)
            return kind


    class Versioned(NamedTuple):
        """A state together with its version, as :meth:`Agent.get_state_versioned`, the
        compare-and-set writes and :meth:`Agent.restore` return it (a tuple:
        ``state, version = agent.get_state_versioned()``)."""

        #: The state (a fresh dict).
        state: State
        #: The number of changes committed to the agent's state up to this one (0 while
        #: nothing is stored: the state is then the initial state).
        version: int

    class _LoggedChangeFields(NamedTuple):
        #: The state's version after the change.
        version: int
        #: When the change was committed (millisecond precision, ``tzinfo=timezone.utc``).
        at: _dt.datetime
        #: The merge patch as applied (a dict), or a JSON Patch's list of operations
        #: (``kind == "json_patch"``); ``None`` for a replacement (``replace_state``,
        #: ``restore``) and a migration.
        patch: Optional[AppliedPatch]
        #: The state after the change, as stored (under schema version ``schema``).
        next: State

    class LoggedChange(_SchemaAttributes, _LoggedChangeFields):
        """One change retained by the agent's change log, as :meth:`Agent.changes_since`
        returns it: a named tuple ``(version, at, patch, next)``, with ``kind``, ``schema``
        and ``migrated_from`` as attributes besides its four fields (as :class:`Change` has
        them). ``next`` is as stored: :meth:`Agent.upgrade_state` brings a state of an older
        ``schema`` to the agent's."""

        def __new__(
            cls,
            version: int,
            at: _dt.datetime,
            patch: Optional[AppliedPatch],
            next: State,
            schema: int = 0,
            migrated_from: Optional[int] = None,
            kind: Optional[ChangeKind] = None,
        ) -> "LoggedChange":
            self = super().__new__(cls, version, at, patch, next)
            self.__dict__["schema"] = schema
            self.__dict__["migrated_from"] = migrated_from
            if kind is not None:
                self.__dict__["kind"] = kind
            return self

        @property
        def kind(self) -> ChangeKind:
            """What kind of change it was (:data:`ChangeKind`), as the change log recorded
            it: ``"merge"``, ``"json_patch"`` (``patch`` is the list of operations),
            ``"replace"`` or ``"migration"``. Built without it (or read from a log written
            before the log recorded kinds): what ``patch`` and ``migrated_from`` say."""
            kind: Optional[ChangeKind] = self.__dict__.get("kind")
            if kind is None:
                if self.migrated_from is not None:
                    return "migration"
                return _kind_of(self.patch)
            return kind

    for _record in (Change, Versioned, LoggedChange):
        _record.__class_getitem__ = classmethod(_subscript)


#: ``Change(next, prev, patch, version, kind, schema, migrated_from)`` and
#: ``LoggedChange(version, at, patch, next, schema, migrated_from, kind)``: the records with their
#: attributes besides the tuple (the types above declare the tuple's fields alone).
new_change: Callable[..., "Change[Any]"] = Change
new_logged_change: Callable[..., "LoggedChange[Any]"] = LoggedChange


class AgentInfo(NamedTuple):
    """One agent of a store, as :func:`~agent_state.list_agents` lists it and
    :func:`~agent_state.expire_agents` returns what it deleted."""

    #: The agent's id (``""``: a SQLite file's single agent, opened without ``agent_id``).
    id: str
    #: The version of its stored state.
    version: int
    #: The stored state's size in bytes (its JSON text, as the library stores it).
    bytes: int
    #: When its state was last written (millisecond precision, ``tzinfo=timezone.utc``; by the
    #: writer's clock).
    written_at: _dt.datetime


# How a hook or validator is called (chosen at registration from its signature: _callbacks).
#: ``fn(change)``, a :class:`Change` (``on_change`` hooks and validators).
CHANGE = "change"
#: ``fn(next, prev, patch)`` (``on_state_changed`` hooks).
NEXT_PREV_PATCH = "next, prev, patch"
#: ``fn(next, prev)``, the reference's ``onStateChanged(next, prev)``.
NEXT_PREV = "next, prev"
# How a schema step of code is called (Agent.set_schema_step).
#: ``step(state)``.
STATE = "state"
#: ``step(state, from_version)``.
STATE_FROM = "state, from_version"

#: ``callback(next, prev)`` or ``callback(next, prev, patch)``; ``patch`` is ``None`` for a
#: ``replace_state`` change, and the list of operations for a ``patch_state`` one (a callback
#: typed for merge patches alone, ``Optional[Dict[str, Any]]``, is accepted as before).
StateChangedCallback = Union[
    Callable[[State, State], Any],
    Callable[[State, State, Optional[State]], Any],
    Callable[[State, State, Optional[AppliedPatch]], Any],
]
#: ``callback(change)``, given a :class:`Change` (with the version); see :meth:`Agent.on_change`
#: (which also takes the forms of :data:`StateChangedCallback`).
ChangeCallback = Union[Callable[[Change], Any], StateChangedCallback]
#: ``validator(change)`` (or ``validator(next, prev[, patch])``), given the :class:`Change` about
#: to commit: raising rejects it, returning (whatever the value) accepts it; see
#: :meth:`Agent.set_validator`.
ValidatorCallback = Union[Callable[[Change], Any], StateChangedCallback]
#: ``step(state)`` or ``step(state, from_version)``: a schema step of code
#: (:meth:`Agent.set_schema_step`), returning the upgraded state (or ``None``: ``state`` as it
#: changed it in place).
SchemaStepCallback = Union[Callable[[State], Any], Callable[[State, int], Any]]
#: ``callback()`` returning the initial state (a dict, a dataclass or pydantic model instance),
#: or its raw JSON text (str or bytes).
InitialStateCallback = Callable[[], Union[Mapping[str, Any], "StateModel", str, bytes]]
#: A merge patch: a mapping, or a dataclass or pydantic model instance (the fields it sets).
Patch = Union[Mapping[str, Any], "StateModel"]
#: The ``default`` option: ``default(value)`` returns a storable stand-in for a value the codec
#: cannot store (or raises), as ``json.dumps``'s ``default`` does.
DefaultEncoder = Callable[[Any], Any]
#: The ``change_log`` option: ``{"keep_last": N}`` and/or ``{"keep_seconds": T}`` (an int, or a
#: ``timedelta`` rounded up to whole seconds) switch the log on; ``False`` switches it off.
ChangeLogOption = Union[Mapping[str, Union[int, _dt.timedelta]], bool]
#: The ``synchronous`` option: ``"full"`` (an acknowledged write survives power loss) or
#: ``"normal"`` (it survives a process crash).
Synchronous = Literal["full", "normal"]
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
