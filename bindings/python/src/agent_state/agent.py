"""The :class:`Agent`: one persistent, transactional JSON state value in one store file."""

from __future__ import annotations

import ctypes
import datetime as _dt
import functools
import os
import re
import threading
import weakref
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import _callbacks, _inflight, _native
from ._callbacks import CallbackTable
from ._hook import Hook
from ._options import check_version as _version
from ._options import int_arg
from ._options import OPEN_KEYS, options_json, store_path
from ._native import call, call_text, call_text_versioned
from ._models import build
from ._snapshot import StateCache
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
    new_logged_change,
)
from .codec import encode_patch, encode_state, encode_value, json_text
from .decoding import decode, decode_state
from .errors import AGENT_ERR_BAD_HANDLE, BadHandleError, InvalidArgumentError, PathError
from .options import OpenOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Agent", "library_version"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
#: The largest schema version a step may start from (a ``uint32_t`` in the C ABI).
_MAX_SCHEMA = 2**32 - 1
#: The largest ``size_t``: a count of ``get_tail`` above it asks for all elements all the same.
_MAX_SIZE = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
M = TypeVar("M")
#: A validator, returned as given (set_validator is a decorator).
_V = TypeVar("_V", bound=Callable[..., Any])

# The decoders give dicts; an agent's reads are typed as its state type (StateT: a TypedDict, or
# Dict[str, Any] by default), which is a claim about those dicts for type checkers only. Typed
# through these Any-returning names, a read needs no cast() call at run time.
_decode_state: Callable[[Any], Any] = decode_state
#: The password of a ``postgres[ql]://user:password@host`` URI.
_PASSWORD = re.compile(r"^(postgres(?:ql)?://[^/@:]*:)[^/@]*@")


def _close_handle(handle: int) -> None:
    """Finalizer of an agent that was garbage-collected (or alive at exit) without close()."""
    if _inflight.exiting and _inflight.refuses():
        # Collected on a daemon thread while the interpreter exits: that thread must stay out
        # of the library (see _inflight); the exiting thread closes the handle instead.
        _inflight.defer_to_exit(functools.partial(_close_handle, handle))
        return
    try:
        call(_native.library().agent_close, handle)
    except Exception:
        pass


def _schema_arg(value: Any, what: str) -> int:
    """A schema version argument: an int (not a bool) from 0 to 2**32 - 1."""
    number = int_arg(value, what)
    if not 0 <= number <= _MAX_SCHEMA:
        raise InvalidArgumentError(f"{what} must be from 0 to 2**32 - 1, not {number}")
    return number


def _encode_operations(operations: Any, default: Optional[Callable[[Any], Any]]) -> bytes:
    """The UTF-8 JSON text of a JSON Patch: a list, tuple or other sequence of operations (not
    a ``str`` or ``bytes``), each value through
    the codec (with the agent's ``default`` encoder). Anything else raises :class:`TypeError`;
    what the operations mean is the library's to check (it names the operation at fault)."""
    if not isinstance(operations, Sequence) or isinstance(operations, (str, bytes, bytearray)):
        raise TypeError(
            "the operations must be a list of dicts (RFC 6902 JSON Patch), not "
            f"{type(operations).__name__}"
        )
    text = encode_value(list(operations), default=default)
    return text.encode("utf-8")


def _pointer(pointer: Any) -> bytes:
    """The UTF-8 bytes of a JSON Pointer argument (a ``str``; :class:`TypeError` otherwise). A
    lone surrogate passes through as invalid UTF-8, which the library refuses."""
    if not isinstance(pointer, str):
        raise TypeError(f"the pointer must be a str (an RFC 6901 JSON Pointer), not {type(pointer).__name__}")
    return pointer.encode("utf-8", "surrogatepass")


def library_version() -> str:
    """The version of the loaded C library, e.g. ``"0.1.0"``."""
    version: bytes = _native.library().agent_version()
    return version.decode("ascii")


class Agent(Generic[StateT]):
    """An open agent store: one persistent JSON-object state, merged by RFC 7396.

    >>> with Agent("conv.db", initial_state={"status": "idle", "at": 0}) as agent:
    ...     agent.set_state({"status": "processing"})
    {'status': 'processing', 'at': 0}

    Args:
        path: the store file (created when absent, mode 0600), ``":memory:"`` for a private
            in-memory store, or a PostgreSQL connection URI (a ``str`` or ``bytes`` starting
            with ``postgres://`` or ``postgresql://``, libpq syntax, e.g.
            ``"postgresql:///app?host=/var/run/postgresql&port=5432&user=app"``; TLS as libpq
            sets it up, ``sslmode=verify-full&sslrootcert=...``: the book's guide "PostgreSQL in production").
            ``str`` and ``bytes`` are passed to the library unchanged; only other
            path-like objects go through ``os.fspath`` (a ``pathlib.Path`` would collapse the
            URI's ``//``, so never wrap a URI in one).
        **options: the open options, the keys of :class:`~agent_state.OpenOptions`, which
            documents each: every open option of the library (absent, or ``None``: the
            library's default), and ``default``, the binding's encoder of values the codec
            cannot store. Another keyword raises :class:`TypeError`. A dict typed
            ``OpenOptions`` may be passed as ``Agent(path, **options)``.

    **Typed state.** ``Agent[ConvState]`` (``ConvState`` a ``TypedDict``) makes type checkers
    see ``get_state()``, the states the writes return and the hooks' states as a
    ``ConvState``; ``agent: Agent[ConvState] = Agent(...)`` says the same. A plain ``Agent``
    is ``Agent[Dict[str, Any]]``. Writes also take a dataclass or pydantic model instance
    (:meth:`set_state`, :meth:`replace_state`), and :meth:`get_state_as` reads the state as
    one.

    Every method may be called from any thread, on one shared ``Agent``; calls release the GIL
    while the library works. ``close()`` is idempotent; any other call after it raises
    :class:`~agent_state.BadHandleError`. An agent that is garbage-collected unclosed is closed.
    """

    def __init__(self, path: PathLike, **options: Unpack[OpenOptions]) -> None:
        self._handle = 0
        self._lock = threading.Lock()
        default = options.get("default")
        if default is not None and not callable(default):
            raise TypeError(f"default must be callable, not {type(default).__name__}")
        self._default = default
        # The callables the library may call for this agent, owned by it (see _callbacks): a
        # callable that refers back to the agent does not keep it from being collected.
        self._callbacks = CallbackTable(default)
        # The last state read or written, reused where the library's text proves it equal.
        self._cache = StateCache()
        raw_path = store_path(path)
        self._path = os.fsdecode(raw_path)

        encoded, hook = options_json(options, OPEN_KEYS, "Agent")

        lib = _native.library()
        out = ctypes.c_uint64(0)
        lib.agent_open(raw_path, encoded, ctypes.byref(out))
        self._handle = out.value
        self._finalizer = weakref.finalize(self, _close_handle, self._handle)
        # After the first finalize(): the exit step runs before the finalizers at exit.
        _inflight.register_exit_step()
        if hook is not None:
            try:
                self.set_initial_state_hook(hook)
            except BaseException:
                self.close()
                raise

    # -- lifetime ------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The path the store was opened with."""
        return self._path

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return not self._handle

    def close(self) -> None:
        """Closes the store and unregisters every hook. Idempotent; may be called from inside
        one of this agent's ``on_state_changed`` hooks (not from its initial-state hook:
        :class:`~agent_state.BusyError`, and the agent stays open). Calls already running on
        other threads finish or raise :class:`~agent_state.BadHandleError`."""
        handle = self._handle
        if not handle:
            return
        # The library's status, recorded as soon as it answers: an interrupt (raised by a
        # signal handler once the call returned) must not leave a closed handle looking open.
        status: List[int] = []
        try:
            call(_native._hot_close, handle, answer=status)
        except BadHandleError:
            pass  # closed by another thread at the same time
        finally:
            if status and status[0] in (0, AGENT_ERR_BAD_HANDLE):
                with self._lock:
                    if self._handle == handle:
                        self._handle = 0
                        self._finalizer.detach()

    def __enter__(self) -> "Agent[StateT]":
        self._h()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        # A connection URI's password stays out of reprs (and so out of logs).
        shown = _PASSWORD.sub(r"\1***@", self._path)
        return f"<agent_state.Agent {shown!r} {state}>"

    def _h(self) -> int:
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        return handle

    # -- state ---------------------------------------------------------------------------------

    # The state methods go through _native.call_text: the library call (GIL released), the
    # hook-exception frame and the buffer, with no Python code run for a successful status.

    def get_state_json(self) -> str:
        """The state as the library stores it: compact JSON text."""
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        return call_text(_native._hot_get_state, handle)

    def get_state(self) -> StateT:
        """The stored state, or the initial state while nothing is stored (reading never
        stores it). A fresh ``dict`` on every call."""
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        state: StateT = self._cache.decoded(call_text(_native._hot_get_state, handle))
        return state

    def get_state_as(self, model: Type[M]) -> M:
        """The state (as :meth:`get_state` reads it) as an instance of ``model``, a dataclass
        or a pydantic model class: pydantic validates it (``model_validate``); a dataclass is
        built from the state's members of its ``__init__`` fields (others are ignored),
        each converted back by the field's type where the codec's mapping changed it (an
        ``Enum`` from its value, a ``UUID``, a ``Decimal`` from the number's exact digits, a
        ``pathlib`` path, a nested dataclass; also inside ``Optional``, lists, tuples and
        dicts). A member the model requires and the state lacks raises what the model raises
        (``TypeError``, pydantic's ``ValidationError``)."""
        return build(model, self.get_state())

    def set_state(self, patch: Patch) -> StateT:
        """Merges ``patch`` into the state by RFC 7396 (nested dicts merge, ``None`` deletes a
        key, anything else replaces) in one transaction, and returns the merged state.

        ``patch`` is a dict (any mapping with ``str`` keys), or a dataclass or pydantic model
        instance standing for the fields it sets: a pydantic model's fields set explicitly
        (``model_dump(exclude_unset=True)``), a dataclass's fields whose value is not the
        field's default (the book's Python page, "Typed state").

        Hooks run after the commit, on this thread. If one raises, this call raises
        :class:`~agent_state.HookError` (the hook's exception as ``__cause__``) *after* the
        change committed. Values that cannot be stored raise
        :class:`~agent_state.CodecError` before anything is sent to the library.
        """
        data, plain = encode_patch(patch, "patch", self._default)
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        text = call_text(_native._hot_set_state, handle, data, len(data))
        state: StateT = self._cache.merged(plain, text)
        return state

    # A plain agent's state may be any mapping; a typed one's is checked against its type.
    @overload
    def replace_state(
        self: "Agent[Dict[str, Any]]", state: Union[Mapping[str, Any], StateModel]
    ) -> Dict[str, Any]: ...
    @overload
    def replace_state(self, state: Union[StateT, StateModel]) -> StateT: ...
    def replace_state(self, state: Union[Mapping[str, Any], StateModel]) -> Any:
        """Replaces the whole state with ``state`` and returns it (as stored). Hooks see
        ``patch=None``. Same transaction, hook and error rules as :meth:`set_state`.
        ``state`` is a dict (any mapping with ``str`` keys), or a dataclass or pydantic model
        instance (all its fields)."""
        data = encode_state(state, "state", self._default)
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        stored: StateT = _decode_state(call_text(_native._hot_replace_state, handle, data, len(data)))
        return stored

    def set_state_json(self, patch: Union[str, bytes]) -> str:
        """:meth:`set_state` with raw JSON text in and out (malformed text raises
        :class:`~agent_state.JSONError`)."""
        data = json_text(patch, "patch")
        return call_text(_native._hot_set_state, self._h(), data, len(data))

    def replace_state_json(self, state: Union[str, bytes]) -> str:
        """:meth:`replace_state` with raw JSON text in and out."""
        data = json_text(state, "state")
        return call_text(_native._hot_replace_state, self._h(), data, len(data))

    # -- JSON Patch (RFC 6902) and reads of one place (RFC 6901) -------------------------------

    def patch_state(self, operations: Operations) -> StateT:
        """Applies an RFC 6902 JSON Patch to the state and returns the new state (as
        :meth:`set_state` returns the merged one).

        ``operations`` is a list (or tuple, or other sequence) of operations, each a dict with ``"op"``
        (``"add"``, ``"remove"``, ``"replace"``, ``"move"``, ``"copy"``, ``"test"``),
        ``"path"`` (an RFC 6901 JSON Pointer; ``"/messages/-"`` is the place after an array's
        last element, where ``"add"`` appends) and ``"value"`` or ``"from"`` as the operation
        needs. Values go through the binding's codec as a state's do (a ``datetime``, a
        ``JSMap``, the ``default`` encoder), so a ``"test"`` compares with the value as stored.
        The operations apply in order, all or nothing, in one write transaction that starts
        from the latest committed state: appending a message never rewrites the others and
        never loses another writer's append. A patch that leaves the state as it is commits
        nothing.

        Hooks and the validator see the change with ``kind == "json_patch"`` and the list of
        operations as its ``patch``; the change log keeps them (:meth:`changes_since`).

        Raises, with nothing written (but for :class:`~agent_state.HookError`, raised after the
        commit as for :meth:`set_state`): :class:`TypeError` (``operations`` not a list or
        another sequence), :class:`~agent_state.InvalidArgumentError` (a malformed patch: an operation
        that is not a dict, an unknown ``op``, a missing member, a pointer with a bad escape
        such as ``~2``; a result that is not an object), :class:`~agent_state.PathError` (a
        ``path`` or ``from`` that names nothing, an index out of range, a ``move`` into its own
        child), :class:`~agent_state.TestFailedError` (a ``test`` that does not hold),
        :class:`~agent_state.CodecError` (a value that cannot be stored),
        :class:`~agent_state.StateTooLargeError`, :class:`~agent_state.RejectedError`, and the
        others of :meth:`set_state`. The message of each of the first three names the
        operation at fault (``operation 1 (remove "/q"): ...``), as do the ``operation`` and
        ``path`` attributes of the last two.
        """
        data = _encode_operations(operations, self._default)
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        state: StateT = self._cache.decoded(call_text(_native._hot_patch_state, handle, data, len(data)))
        return state

    def patch_state_json(self, operations: Union[str, bytes]) -> str:
        """:meth:`patch_state` with raw JSON text in (the array of operations, passed as it
        is) and out (the new state). Malformed text raises :class:`~agent_state.JSONError`, a
        duplicate member in an operation :class:`~agent_state.CodecError`."""
        data = json_text(operations, "operations")
        return call_text(_native._hot_patch_state, self._h(), data, len(data))

    def patch_state_if(self, expected_version: int, operations: Operations) -> Versioned[StateT]:
        """Compare-and-set :meth:`patch_state`: applies ``operations`` only if the state's
        version is still ``expected_version`` (0: nothing stored yet) when the write
        transaction starts, and returns ``Versioned(new state, new version)``; otherwise raises
        :class:`~agent_state.ConflictError` and writes nothing. (A ``"test"`` operation checks
        one value; this checks the whole state's version.) Other errors as for
        :meth:`patch_state`."""
        data = _encode_operations(operations, self._default)
        expected = _version(expected_version, "expected_version")
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        text, version = call_text_versioned(_native._hot_patch_state_if, handle, expected, data, len(data))
        state: StateT = self._cache.decoded(text)
        return Versioned(state, version)

    def patch_state_if_json(self, expected_version: int, operations: Union[str, bytes]) -> Tuple[str, int]:
        """:meth:`patch_state_if` with raw JSON text: returns ``(new state's JSON text, new
        version)``."""
        data = json_text(operations, "operations")
        expected = _version(expected_version, "expected_version")
        return call_text_versioned(_native._hot_patch_state_if, self._h(), expected, data, len(data))

    def get_path(self, pointer: str) -> Any:
        """The value at ``pointer`` in the state, decoded (a fresh value): ``pointer`` is an
        RFC 6901 JSON Pointer such as ``"/messages/0/text"`` (``"~1"`` stands for ``/`` and
        ``"~0"`` for ``~`` in a member name; ``""`` is the whole state). Only that part of the
        state is encoded and decoded, whatever the state's size. Reads as :meth:`get_state`
        does (the initial state while nothing is stored; never writes).

        Raises :class:`~agent_state.PathError` (nothing there: a member that does not exist, an
        index out of range or with a leading zero, ``-``; its ``path`` is ``pointer``),
        :class:`~agent_state.InvalidArgumentError` (not a JSON Pointer: no leading ``/``, a bad
        escape such as ``~2``), :class:`TypeError` (``pointer`` not a ``str``), and what
        :meth:`get_state` raises."""
        return decode(self.get_path_json(pointer))

    def get_path_json(self, pointer: str) -> str:
        """:meth:`get_path` as the library returns it: the compact JSON text of the value at
        ``pointer``."""
        data = _pointer(pointer)
        handle = self._h()
        try:
            return call_text(_native._hot_get_path, handle, data, len(data))
        except PathError as e:
            if e.path is None:
                e.path = pointer
            raise

    def get_tail(self, pointer: str, n: int) -> List[Any]:
        """The last ``n`` elements of the array at ``pointer`` (as :meth:`get_path` reads it),
        oldest first, as a list of fresh values: all of them when there are fewer, ``[]`` for
        ``n == 0``. The last message of a conversation is ``agent.get_tail("/messages",
        1)``; only those elements are encoded and decoded, whatever the array's length.

        Raises what :meth:`get_path` raises, :class:`~agent_state.InvalidArgumentError` when
        the value there is not an array or ``n`` is negative, and :class:`TypeError` when ``n``
        is not an int."""
        tail: List[Any] = decode(self.get_tail_json(pointer, n))
        return tail

    def get_tail_json(self, pointer: str, n: int) -> str:
        """:meth:`get_tail` as the library returns it: the JSON text of an array."""
        count = int_arg(n, "n")
        if count < 0:
            raise InvalidArgumentError(f"n must not be negative, not {count}")
        data = _pointer(pointer)
        handle = self._h()
        try:
            return call_text(_native._hot_get_tail, handle, data, len(data), min(count, _MAX_SIZE))
        except PathError as e:
            if e.path is None:
                e.path = pointer
            raise

    # -- versions and compare-and-set -----------------------------------------------------------

    def get_state_versioned(self) -> Versioned[StateT]:
        """The state and its version, read together, as ``Versioned(state, version)``: the
        version counts the changes committed to this agent's state, through any handle or
        process (0 while nothing is stored; the state is then the initial state). Pass it to
        :meth:`set_state_if` or :meth:`replace_state_if` to write only if nobody wrote in
        between."""
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        text, version = call_text_versioned(_native._hot_get_state_versioned, handle)
        state: StateT = self._cache.decoded(text)
        return Versioned(state, version)

    def set_state_if(self, expected_version: int, patch: Patch) -> Versioned[StateT]:
        """Compare-and-set :meth:`set_state`: merges ``patch`` only if the state's version is
        still ``expected_version`` (0: nothing stored yet) when the write transaction starts,
        and returns ``Versioned(merged state, new version)``. Otherwise raises
        :class:`~agent_state.ConflictError` and writes nothing. With
        :meth:`get_state_versioned` it makes read-modify-write loops that never overwrite
        another writer's change, in this process or another::

            while True:
                state, version = agent.get_state_versioned()
                try:
                    agent.set_state_if(version, {"count": state.get("count", 0) + 1})
                    break
                except ConflictError:
                    continue

        Other errors, hooks and the validator as for :meth:`set_state` (on
        :class:`~agent_state.HookError` the change committed: read the state again).
        """
        data, plain = encode_patch(patch, "patch", self._default)
        expected = _version(expected_version, "expected_version")
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        text, version = call_text_versioned(_native._hot_set_state_if, handle, expected, data, len(data))
        state: StateT = self._cache.merged(plain, text)
        return Versioned(state, version)

    @overload
    def replace_state_if(
        self: "Agent[Dict[str, Any]]", expected_version: int, state: Union[Mapping[str, Any], StateModel]
    ) -> Versioned[Dict[str, Any]]: ...
    @overload
    def replace_state_if(
        self, expected_version: int, state: Union[StateT, StateModel]
    ) -> Versioned[StateT]: ...
    def replace_state_if(self, expected_version: int, state: Union[Mapping[str, Any], StateModel]) -> Any:
        """Compare-and-set :meth:`replace_state`: replaces the state with ``state`` only if the
        state's version is still ``expected_version``, and returns ``Versioned(state, new
        version)``; otherwise raises :class:`~agent_state.ConflictError`, with nothing written.
        Other errors as for :meth:`set_state_if`."""
        data = encode_state(state, "state", self._default)
        expected = _version(expected_version, "expected_version")
        handle = self._handle
        if not handle:
            raise BadHandleError("the agent is closed")
        text, version = call_text_versioned(_native._hot_replace_state_if, handle, expected, data, len(data))
        stored: StateT = _decode_state(text)
        return Versioned(stored, version)

    # -- the change log ------------------------------------------------------------------------

    def poll(self) -> int:
        """Delivers to this agent's hooks (:meth:`on_state_changed`, :meth:`on_change`), on
        this thread and in commit order, every change that other handles on the same agent (other
        ``Agent`` objects, other processes) committed since this handle's last delivery, each
        once, with its real ``prev``, ``next``, ``patch`` and version; returns how many it
        delivered.

        Needs the agent's change log (the ``change_log`` option, given when this or another
        handle on the same agent opened it; another agent's log does not count): without it,
        raises :class:`~agent_state.InvalidArgumentError`. The library starts no
        thread: call it when convenient (a timer, an event loop). Changes committed before this
        agent was opened are not delivered; a write through this agent first delivers the
        pending ones itself, so its hooks see one ordered history.

        If the log's retention pruned changes before this agent delivered them, they are
        skipped: the rest are delivered and :class:`~agent_state.GapError` is raised (once;
        the state is current). If a hook raises, every delivery still happens and
        :class:`~agent_state.HookError` is raised. Either way ``.delivered`` on the exception
        counts the deliveries made. May be called from inside a hook (what it delivers is
        delivered after the running hook returns), not from the validator or the initial-state
        hook (:class:`~agent_state.BusyError`).
        """
        return _native.call_poll(self._h())

    def changes_since(self, version: int) -> List[LoggedChange[StateT]]:
        """The changes committed after ``version`` (through any handle or process), oldest
        first, as :class:`LoggedChange` tuples ``(version, at, patch, next)`` (with ``kind``,
        ``schema`` and ``migrated_from``: ``next`` as stored, see :meth:`upgrade_state`;
        ``patch`` the list of operations of a ``"json_patch"`` change); ``[]`` if
        ``version`` is the current one. What a client that reconnects with the state at
        ``version`` needs to catch up. Needs the agent's change log.

        Raises :class:`~agent_state.GapError` (the log no longer holds all of them: send the
        whole state instead), :class:`~agent_state.InvalidArgumentError` (the log is off, or
        ``version`` is in the future).
        """
        text = call_text(_native._hot_changes_since, self._h(), _version(version, "version"))
        return [
            new_logged_change(
                entry["version"],
                _EPOCH + _dt.timedelta(milliseconds=entry["at"]),
                entry["patch"],
                entry["next"],
                entry.get("schema", 0),
                entry.get("migrated_from"),
                entry.get("kind"),
            )
            for entry in decode(text)
        ]

    def changes_since_json(self, version: int) -> str:
        """:meth:`changes_since` as the library returns it, one JSON array ready to send:
        ``[{"version":N,"at":MS,"kind":K,"schema":S,"migrated_from":F|null,"patch":{...}|[...]|null,"next":{...}},...]``
        (``at`` in milliseconds since the Unix epoch; ``kind`` ``"merge"``, ``"json_patch"``,
        ``"replace"`` or ``"migration"``; ``patch`` the array of operations of a JSON Patch,
        null for a replacement or a migration)."""
        return call_text(_native._hot_changes_since, self._h(), _version(version, "version"))

    def state_at(self, version: int) -> StateT:
        """The state at ``version``: the current one, one the change log retains, or 0 (the
        initial state). Raises :class:`~agent_state.GapError` (not retained, or the log is off)
        and :class:`~agent_state.InvalidArgumentError` (a future version)."""
        text = call_text(_native._hot_get_state_at, self._h(), _version(version, "version"))
        state: StateT = _decode_state(text)
        return state

    def restore(self, version: int) -> Versioned[StateT]:
        """Point-in-time recovery: replaces the state with the state at ``version`` (as
        :meth:`state_at` finds it; one stored under an older schema version upgraded to this
        agent's by its steps) as a new change, and returns ``Versioned(restored state, new
        version)``. The validator gates it and hooks see it as a replacement (``patch`` None).
        Raises what :meth:`state_at` and :meth:`replace_state` raise, and
        :class:`~agent_state.MigrationError`."""
        text, new_version = call_text_versioned(
            _native._hot_restore_state, self._h(), _version(version, "version")
        )
        state: StateT = _decode_state(text)
        return Versioned(state, new_version)

    # -- hooks ---------------------------------------------------------------------------------

    def on_state_changed(
        self,
        callback: Union[
            Callable[[StateT, StateT], Any],
            Callable[[StateT, StateT, Optional[State]], Any],
            Callable[[StateT, StateT, Optional[AppliedPatch]], Any],
        ],
    ) -> Hook:
        """Registers ``callback(next, prev)`` (the reference's ``onStateChanged(next, prev)``)
        or ``callback(next, prev, patch)`` to run after every committed change delivered to
        this agent's hooks, from any thread; usable as a decorator. (To see each change's
        version too, use :meth:`on_change`.)

        Which of the two is chosen here, from the callable's signature; one that can be called
        neither way raises :class:`TypeError` (nothing registered). A callable whose signature
        cannot be read (some builtins) is called with the three arguments.

        Delivery is on the thread that made the change, after the commit, in commit order
        (each ``prev`` is the previous ``next``), hooks in registration order. ``patch`` is the
        merge patch (a dict), the list of operations of :meth:`patch_state`, or ``None`` for
        :meth:`replace_state`. The changes delivered are those
        made through this agent and, with the agent's change log on, those of other handles on
        the same agent and other processes, delivered by :meth:`poll` or ahead of this agent's
        next write. A hook may
        read and change the state (a nested change is delivered after the hook returns),
        register or remove hooks and close the agent. An exception it raises makes the
        triggering call raise :class:`~agent_state.HookError` after the commit, whose message
        names the exception (``on_state_changed hook 1 raised RuntimeError: ...``) and whose
        ``__cause__`` is it.

        Returns a :class:`Hook`, whose ``remove()`` unregisters the callback.
        """
        return self._register_hook(callback, "on_state_changed")

    def on_change(
        self,
        callback: Union[
            Callable[["Change[StateT]"], Any],
            Callable[[StateT, StateT], Any],
            Callable[[StateT, StateT, Optional[State]], Any],
            Callable[[StateT, StateT, Optional[AppliedPatch]], Any],
        ],
    ) -> Hook:
        """Registers ``callback(change)`` to run after every committed change delivered to this
        agent's hooks; usable as a decorator. :meth:`on_state_changed` with the version:
        ``change`` is a :class:`Change` ``(next, prev, patch, version)``. Same delivery,
        ordering, re-entrance and error rules; both kinds of hook run in one registration
        order. A callable that cannot take one argument but can take ``(next, prev, patch)``
        or ``(next, prev)`` is called so; one that can be called none of these ways raises
        :class:`TypeError`.

        With the change log on, the versions of successive deliveries increase by one (unless
        its retention pruned some: see :meth:`poll`).
        """
        return self._register_hook(callback, "on_change")

    def _register_hook(self, callback: Any, what: str) -> Hook:
        if not callable(callback):
            raise TypeError(f"the hook must be callable, not {type(callback).__name__}")
        trampoline = _callbacks.HOOK_TRAMPOLINES[_callbacks.call_form(callback, what)]
        handle = self._h()
        key = _callbacks.register(self._callbacks, callback)
        hook_id = ctypes.c_uint64(0)
        # On failure the library has already called FREE_TRAMPOLINE(key): nothing to undo.
        call(
            _native.library().agent_on_state_changed,
            handle,
            trampoline,
            key,
            _callbacks.FREE_TRAMPOLINE,
            ctypes.byref(hook_id),
        )
        return Hook(self, hook_id.value, callback, key)

    def remove_hook(self, hook: Hook) -> bool:
        """Unregisters ``hook`` (same as ``hook.remove()``)."""
        if hook._agent is not self:
            raise InvalidArgumentError("the hook belongs to another agent")
        return hook.remove()

    def set_initial_state_hook(self, callback: Optional[InitialStateCallback]) -> None:
        """Sets ``callback()`` as the source of the initial state (``None`` removes it).

        It takes precedence over the ``initial_state`` option and is called every time a
        default state is needed: by :meth:`get_state` while nothing is stored, and by the first
        write. It returns a dict (or raw JSON text). It runs under the agent's lock: using this
        agent from inside it raises :class:`~agent_state.BusyError`. An exception it raises
        makes the call that needed the state raise :class:`~agent_state.HookError`.
        """
        handle = self._h()
        lib = _native.library()
        if callback is None:
            call(lib.agent_set_initial_state_hook, handle, _callbacks.NULL_INITIAL_STATE, None, _callbacks.NULL_FREE)
            return
        if not callable(callback):
            raise TypeError(f"the initial-state hook must be callable, not {type(callback).__name__}")
        key = _callbacks.register(self._callbacks, callback)
        call(lib.agent_set_initial_state_hook, handle, _callbacks.INITIAL_STATE_TRAMPOLINE, key, _callbacks.FREE_TRAMPOLINE)

    def set_validator(self, validator: Optional[_V]) -> Optional[_V]:
        """Sets ``validator(change)`` as this agent's validation gate (``None`` removes it) and
        returns it, so it may be used as a decorator (``@agent.set_validator``). A validator
        of ``(next, prev, patch)`` or ``(next, prev)`` is called with those, as hooks are
        (:meth:`on_change`); one that can be called none of these ways raises
        :class:`TypeError`.

        It sees every change made through this agent (:meth:`set_state`,
        :meth:`patch_state`, :meth:`replace_state`, their ``_if`` and ``_json`` forms,
        :meth:`restore`) as a
        :class:`Change` whose ``version`` is the version it would get, inside the write
        transaction, after the merge and the codec and size checks, before the commit, on the
        writing thread. Returning (whatever the value) lets the change commit. Raising rejects
        it: nothing is written, no hook runs, and the write raises
        :class:`~agent_state.RejectedError`, whose message includes ``str()`` of the exception
        (its type name if that is empty) and whose ``__cause__`` is the exception itself
        (``KeyboardInterrupt``, ``SystemExit`` and other non-``Exception`` errors reject the
        change and then propagate as themselves). Changes made through other agents or
        processes are not gated by it.

        It runs with the agent's lock held and the store's write lock taken: keep it quick;
        using this agent from inside it raises :class:`~agent_state.BusyError` (other agents
        may be used); do not wait in it for another thread that uses this agent.
        """
        handle = self._h()
        lib = _native.library()
        if validator is None:
            call(lib.agent_set_validator, handle, _callbacks.NULL_VALIDATE, None, _callbacks.NULL_FREE)
            return None
        if not callable(validator):
            raise TypeError(f"the validator must be callable, not {type(validator).__name__}")
        trampoline = _callbacks.VALIDATE_TRAMPOLINES[_callbacks.call_form(validator, "validator")]
        key = _callbacks.register(self._callbacks, validator)
        # On failure the library has already called FREE_TRAMPOLINE(key): nothing to undo.
        call(lib.agent_set_validator, handle, trampoline, key, _callbacks.FREE_TRAMPOLINE)
        return validator

    # -- schema evolution ----------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """The schema version this agent declares: its ``schema_version`` open option (0 when
        none). Raises :class:`~agent_state.BadHandleError` once closed."""
        out = ctypes.c_uint32(0)
        call(_native.library().agent_schema_version, self._h(), ctypes.byref(out))
        return out.value

    def set_schema_step(self, from_version: int, step: Optional[SchemaStepCallback]) -> None:
        """Sets ``step`` as this agent's schema step of code from ``from_version`` to
        ``from_version + 1`` (``None`` removes it).

        An agent opened with ``schema_version=N`` upgrades a state stored under an older
        version the first time it reads or writes it: it runs the steps from the stored
        version up to N (the declarative ones of the ``schema_steps`` option, these for the
        versions it leaves out), then the validator, and commits the result as a change of its
        own (hooks see ``kind == "migration"``), once, whichever agent or process gets there
        first. Set the steps right after opening, before the first read or write.

        ``step(state)`` or ``step(state, from_version)`` (chosen here from its signature, as
        for hooks; one that can be called neither way raises :class:`TypeError`) gets the
        state as stored under ``from_version``, a fresh ``dict``, and returns the upgraded
        state (a dict, or a dataclass or pydantic model instance), or ``None`` for ``state``
        as it changed it in place. An exception it raises fails the upgrade: the read or write
        that needed it raises :class:`~agent_state.MigrationError`, whose message names the
        step and the exception (``schema step 0 -> 1: the step failed: ValueError: ...``) and
        whose ``__cause__`` is the exception; nothing is written. (``KeyboardInterrupt``,
        ``SystemExit`` and other non-``Exception`` errors fail the upgrade and then propagate
        as themselves.) Its result goes through the codec (with the ``default`` encoder), the
        size cap and the validator, which may refuse it too (``MigrationError``).

        It runs with the agent's lock held, inside the write transaction, on the thread that
        made the call (and for :meth:`upgrade_state` outside any transaction): keep it quick,
        and do not use this agent from inside it (:class:`~agent_state.BusyError`). The agent
        holds ``step`` until it is replaced, removed or the agent closed.

        Raises :class:`TypeError` (``from_version`` not an int, ``step`` not callable),
        :class:`~agent_state.InvalidArgumentError` (``from_version`` negative or not below
        :attr:`schema_version`, or a declarative step from ``from_version`` already given in
        ``schema_steps``: one step per version), :class:`~agent_state.BadHandleError`.
        """
        start = _schema_arg(from_version, "from_version")
        lib = _native.library()
        if step is None:
            handle = self._h()
            call(lib.agent_set_schema_step, handle, start, _callbacks.NULL_SCHEMA_STEP, None, _callbacks.NULL_FREE)
            return
        if not callable(step):
            raise TypeError(f"the schema step must be callable, not {type(step).__name__}")
        trampoline = _callbacks.SCHEMA_STEP_TRAMPOLINES[_callbacks.call_form(step, "schema step")]
        handle = self._h()
        key = _callbacks.register(self._callbacks, step)
        # On failure the library has already called FREE_TRAMPOLINE(key): nothing to undo.
        call(lib.agent_set_schema_step, handle, start, trampoline, key, _callbacks.FREE_TRAMPOLINE)

    def state_at_stored(self, version: int) -> Tuple[State, int]:
        """The state at ``version`` as :meth:`state_at` finds it, as stored, and the schema
        version it was written under: ``(state, schema)`` (for version 0, the initial state,
        this agent's own :attr:`schema_version`). Nothing is upgraded:
        :meth:`upgrade_state` brings an older one to this agent's shape. Raises what
        :meth:`state_at` raises."""
        number = _version(version, "version")
        handle = self._h()
        buf = _native.AgentBuffer()
        schema = ctypes.c_uint32(0)
        try:
            call(_native.library().agent_get_state_at_stored, handle, number, ctypes.byref(buf), ctypes.byref(schema))
            state: State = decode_state(_native.text_at(buf.data, buf.len))
        finally:
            _native.library().agent_buffer_free(ctypes.byref(buf))
        return state, schema.value

    def upgrade_state(self, state: Union[Mapping[str, Any], StateModel], from_version: int) -> StateT:
        """``state``, stored under schema version ``from_version``, upgraded to this agent's
        :attr:`schema_version` by its steps (declarative and of code, as a migration would
        run them, without the validator); nothing is read or written. For a state of the
        history (:meth:`state_at_stored`, a :class:`LoggedChange`'s ``next`` and ``schema``)
        wanted in the current shape; a state of this agent's version comes back as it is.

        Raises :class:`~agent_state.NewerSchemaError` (``from_version`` above this agent's),
        :class:`~agent_state.MigrationError` (a step failed or is missing),
        :class:`~agent_state.CodecError` (a value that cannot be stored), :class:`TypeError`
        and :class:`~agent_state.InvalidArgumentError` (the arguments),
        :class:`~agent_state.BusyError` (from inside one of this agent's steps or its
        validator).
        """
        data = encode_state(state, "state", self._default)
        start = _schema_arg(from_version, "from_version")
        handle = self._h()
        buf = _native.AgentBuffer()
        try:
            call(_native.library().agent_upgrade_state, handle, data, len(data), start, ctypes.byref(buf))
            upgraded: StateT = _decode_state(_native.text_at(buf.data, buf.len))
        finally:
            _native.library().agent_buffer_free(ctypes.byref(buf))
        return upgraded
