"""The records and signatures of the public API: the named tuples that :class:`~agent_state.Agent`
returns and hands to callbacks, and the types of those callbacks and of the options."""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Callable, Dict, Literal, Mapping, NamedTuple, Optional, Union

State = Dict[str, Any]


class Change(NamedTuple):
    """One change of the state, as :meth:`Agent.on_change` hooks and the validator
    (:meth:`Agent.set_validator`) see it. Fresh, decoded values: keep them as you like."""

    #: The state after the change.
    next: State
    #: The state before it (for a store's first change, the initial state of the agent that
    #: made it).
    prev: State
    #: The merge patch as applied (``set_state`` and its forms); ``None`` for a replacement
    #: (``replace_state`` and its forms, ``restore``).
    patch: Optional[State]
    #: The state's version after the change: 1 for a store's first write, one more for each
    #: commit. The validator sees the version the change would get.
    version: int


class Versioned(NamedTuple):
    """A state together with its version, as :meth:`Agent.get_state_versioned`, the
    compare-and-set writes and :meth:`Agent.restore` return it (a tuple:
    ``state, version = agent.get_state_versioned()``)."""

    #: The state (a fresh dict).
    state: State
    #: The number of changes committed to the store up to this state (0 while nothing is
    #: stored: the state is then the initial state).
    version: int


class LoggedChange(NamedTuple):
    """One change retained by the store's change log, as :meth:`Agent.changes_since` returns
    it."""

    #: The state's version after the change.
    version: int
    #: When the change was committed (millisecond precision, ``tzinfo=timezone.utc``).
    at: _dt.datetime
    #: The merge patch as applied; ``None`` for a replacement (``replace_state``, ``restore``).
    patch: Optional[State]
    #: The state after the change.
    next: State


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

#: ``callback(next, prev)`` or ``callback(next, prev, patch)``; ``patch`` is ``None`` for a
#: ``replace_state`` change.
StateChangedCallback = Union[Callable[[State, State], Any], Callable[[State, State, Optional[State]], Any]]
#: ``callback(change)``, given a :class:`Change` (with the version); see :meth:`Agent.on_change`
#: (which also takes the forms of :data:`StateChangedCallback`).
ChangeCallback = Union[Callable[[Change], Any], StateChangedCallback]
#: ``validator(change)`` (or ``validator(next, prev[, patch])``), given the :class:`Change` about
#: to commit: raising rejects it, returning (whatever the value) accepts it; see
#: :meth:`Agent.set_validator`.
ValidatorCallback = Union[Callable[[Change], Any], StateChangedCallback]
#: ``callback()`` returning the initial state (a dict), or its raw JSON text (str or bytes).
InitialStateCallback = Callable[[], Union[Mapping[str, Any], str, bytes]]
#: The ``change_log`` option: ``{"keep_last": N}`` and/or ``{"keep_seconds": T}`` (an int, or a
#: ``timedelta`` rounded up to whole seconds) switch the log on; ``False`` switches it off.
ChangeLogOption = Union[Mapping[str, Union[int, _dt.timedelta]], bool]
#: The ``synchronous`` option: ``"full"`` (an acknowledged write survives power loss) or
#: ``"normal"`` (it survives a process crash).
Synchronous = Literal["full", "normal"]
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
