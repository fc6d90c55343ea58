"""Exceptions raised by :mod:`agent_state`.

Every failure of the C library is an :class:`AgentError` carrying the library's status code
(``.status``) and its message (``.message``, read from ``agent_last_error()`` on the thread that
made the failing call). Each status code has its own subclass, so callers catch exactly the
failure they can act on::

    try:
        agent.set_state(patch)
    except StateTooLargeError:
        ...

Values the binding cannot encode raise :class:`CodecError` (status ``AGENT_ERR_CODEC``) before
any call into the library, so nothing is written.
"""

from __future__ import annotations

import re
import warnings
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type

__all__ = [
    "AgentError",
    "InvalidArgumentError",
    "BadHandleError",
    "JSONError",
    "CodecError",
    "StateTooLargeError",
    "StorageError",
    "BusyError",
    "HookError",
    "ConflictError",
    "RejectedError",
    "GapError",
    "UnavailableError",
    "AuthError",
    "CallCancelledError",
    "NewerSchemaError",
    "MigrationError",
    "PathError",
    "TestFailedError",
    "PanicError",
    "AGENT_OK",
    "AGENT_ERR_INVALID_ARGUMENT",
    "AGENT_ERR_BAD_HANDLE",
    "AGENT_ERR_JSON",
    "AGENT_ERR_CODEC",
    "AGENT_ERR_TOO_LARGE",
    "AGENT_ERR_STORAGE",
    "AGENT_ERR_BUSY",
    "AGENT_ERR_HOOK",
    "AGENT_ERR_CONFLICT",
    "AGENT_ERR_REJECTED",
    "AGENT_ERR_GAP",
    "AGENT_ERR_UNAVAILABLE",
    "AGENT_ERR_AUTH",
    "AGENT_ERR_CANCELLED",
    "AGENT_ERR_NEWER_SCHEMA",
    "AGENT_ERR_MIGRATION",
    "AGENT_ERR_PATH",
    "AGENT_ERR_TEST_FAILED",
    "AGENT_ERR_PANIC",
]

#: Success.
AGENT_OK = 0
#: A required argument was missing, an option was unknown or ill-typed, a patch or state was
#: not a JSON object, or a hook id was unknown.
AGENT_ERR_INVALID_ARGUMENT = 1
#: The handle was never issued, or has been closed.
AGENT_ERR_BAD_HANDLE = 2
#: The input is not well-formed JSON.
AGENT_ERR_JSON = 3
#: The input is JSON the storage codec refuses, or a value the binding cannot encode.
AGENT_ERR_CODEC = 4
#: The input, or the state a change would produce, exceeds ``max_value_bytes``.
AGENT_ERR_TOO_LARGE = 5
#: The store failed (I/O, read-only store, foreign or corrupt file, newer schema).
AGENT_ERR_STORAGE = 6
#: The store stayed locked longer than ``busy_timeout_ms``, or a call came from inside the
#: handle's own initial-state hook or validator.
AGENT_ERR_BUSY = 7
#: A hook failed. For ``on_state_changed`` hooks the change is committed all the same.
AGENT_ERR_HOOK = 8
#: A compare-and-set write found the state at another version than expected; nothing was
#: written.
AGENT_ERR_CONFLICT = 9
#: The agent's validator rejected the change; nothing was written.
AGENT_ERR_REJECTED = 10
#: The change log no longer holds changes that were asked for (pruned by its retention).
AGENT_ERR_GAP = 11
#: The database server (PostgreSQL) could not be reached within ``server_timeout_ms``, or the
#: connection was lost. The call had no effect unless the message says a commit's outcome is
#: unknown; the agent stays usable and reconnects on its next call.
AGENT_ERR_UNAVAILABLE = 12
#: The connection to the database server (PostgreSQL) could not be secured or authenticated:
#: the TLS handshake or the server's certificate failed, the server offers no TLS while
#: ``sslmode`` requires it, or the server refused the credentials. Retrying will not help.
AGENT_ERR_AUTH = 13
#: The call's cancel token fired, or its deadline passed, while it waited; nothing written.
AGENT_ERR_CANCELLED = 14
#: The state is stored under a newer schema version than the agent declares (the open option
#: ``schema_version``): a newer program wrote it. Nothing was read into the older shape or
#: written over it; run the newer program, or open ``read_only`` to read it as stored.
AGENT_ERR_NEWER_SCHEMA = 15
#: Upgrading a stored state to the agent's schema version failed: a step failed or is missing,
#: or its result is refused (codec, size cap, validator). The stored state is as it was.
AGENT_ERR_MIGRATION = 16
#: A JSON Pointer names nothing in the state: a read of one place (``get_path``, ``get_tail``)
#: of a member that does not exist or an index out of range, or a JSON Patch operation whose
#: ``path`` (or ``from``) does not exist, or a ``move`` into its own child. Nothing was written.
AGENT_ERR_PATH = 17
#: A ``test`` operation of a JSON Patch found another value than the one it names. Nothing was
#: written.
AGENT_ERR_TEST_FAILED = 18
#: A bug in the library was caught at the ABI boundary.
AGENT_ERR_PANIC = 99

#: The name of each status code: the constants above, as named in the C header.
_STATUS_NAMES: Dict[int, str] = {
    code: name for name, code in list(globals().items()) if name == "AGENT_OK" or name.startswith("AGENT_ERR_")
}


class AgentError(Exception):
    """Base class of every error of this package.

    Attributes:
        status: the library's status code (one of the ``AGENT_ERR_*`` constants).
        message: the library's message for the failing call (``agent_last_error()``), or the
            binding's own message for failures detected before calling the library.
        delivered: set by :meth:`Agent.poll <agent_state.Agent.poll>` on the error it raises:
            how many changes it delivered all the same (for :class:`GapError` and
            :class:`HookError` the deliveries happened; 0 for other errors). ``None`` for the
            errors of every other call.
    """

    #: The status code this class stands for (``AgentError`` itself is used for unknown codes).
    default_status: int = -1
    #: See the class docstring; set on the instance by ``Agent.poll``.
    delivered: Optional[int] = None

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.status: int = self.default_status if status is None else status

    @property
    def status_name(self) -> str:
        """The name of :attr:`status`, e.g. ``"AGENT_ERR_CODEC"``."""
        return _STATUS_NAMES.get(self.status, "AGENT_ERR_UNKNOWN")

    def __str__(self) -> str:
        return f"{self.message} [{self.status_name}]"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (self.__class__, (self.message, self.status))


class InvalidArgumentError(AgentError, ValueError):
    """``AGENT_ERR_INVALID_ARGUMENT``: bad option, a patch or state that is not an object, an
    unknown hook."""

    default_status = AGENT_ERR_INVALID_ARGUMENT


class BadHandleError(AgentError):
    """``AGENT_ERR_BAD_HANDLE``: the agent was closed (possibly by another thread). Named after
    the C status, as the other bindings name it (Go ``ErrBadHandle``, C++
    ``Status::bad_handle``). ``ClosedError`` is a deprecated alias of it (the same class)."""

    default_status = AGENT_ERR_BAD_HANDLE


#: The deprecated names of the package, and the names they stand for (the same objects).
_DEPRECATED = {"ClosedError": "BadHandleError"}


def deprecated_name(module: str, name: str) -> Any:
    """What the deprecated ``name`` of ``module`` stands for, with a :class:`DeprecationWarning`
    pointing at the code that used it (a module ``__getattr__`` calls this);
    :class:`AttributeError` for any other name."""
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated: use {new}, the same class, named after the status "
        "AGENT_ERR_BAD_HANDLE as in the C header and the other bindings",
        DeprecationWarning,
        stacklevel=3,
    )
    return globals()[new]


if TYPE_CHECKING:
    #: Deprecated: :class:`BadHandleError`.
    ClosedError = BadHandleError
else:

    def __getattr__(name: str) -> Any:
        return deprecated_name(__name__, name)


class JSONError(AgentError, ValueError):
    """``AGENT_ERR_JSON``: the input is not well-formed JSON (only reachable through the
    ``*_json`` methods that take raw JSON text)."""

    default_status = AGENT_ERR_JSON


class CodecError(AgentError, ValueError):
    """``AGENT_ERR_CODEC``: a value the storage codec refuses.

    Raised by the binding itself, before any call into the library, for values it cannot
    encode (functions, arbitrary objects, circular references, NaN and infinities, naive
    datetimes, ambiguous tag-shaped dicts, ...), and by the library for JSON it refuses
    (malformed tagged values, numbers out of the double range, nesting deeper than 64 levels). Nothing is written in either case.
    """

    default_status = AGENT_ERR_CODEC


class StateTooLargeError(AgentError):
    """``AGENT_ERR_TOO_LARGE``: the document, or the state a change would produce, exceeds
    ``max_value_bytes``. Nothing was written."""

    default_status = AGENT_ERR_TOO_LARGE


class StorageError(AgentError):
    """``AGENT_ERR_STORAGE``: the store failed (SQLite I/O error, read-only store, a file that is
    not an agent store, a store of a newer schema; a PostgreSQL error other than an unreachable
    server, see :class:`UnavailableError`)."""

    default_status = AGENT_ERR_STORAGE


class BusyError(AgentError):
    """``AGENT_ERR_BUSY``: another connection held the write lock longer than
    ``busy_timeout_ms``, or the agent was used from inside its own initial-state hook or
    validator."""

    default_status = AGENT_ERR_BUSY


class HookError(AgentError):
    """``AGENT_ERR_HOOK``: a hook failed.

    For a write (``set_state``, ``patch_state``, ``replace_state``, their ``_if`` forms,
    ``restore``) this is raised *after* the change committed: the state is changed all the same, and the call returns
    no state (read it again if needed). For ``poll()`` every delivery still happened
    (``.delivered`` counts them). The message names the first exception a Python hook raised,
    type and text (``on_state_changed hook 1 raised RuntimeError: websocket send failed``).

    Attributes:
        exceptions: the exceptions raised by the Python hooks that ran during the call, in the
            order they were raised (empty if a hook failed without a Python exception). The
            first one is also ``__cause__``.
    """

    default_status = AGENT_ERR_HOOK

    def __init__(
        self,
        message: str,
        status: Optional[int] = None,
        exceptions: Sequence[BaseException] = (),
    ) -> None:
        super().__init__(message, status)
        self.exceptions: List[BaseException] = list(exceptions)


class ConflictError(AgentError):
    """``AGENT_ERR_CONFLICT``: a compare-and-set write (:meth:`Agent.set_state_if
    <agent_state.Agent.set_state_if>`, :meth:`Agent.patch_state_if
    <agent_state.Agent.patch_state_if>`, :meth:`Agent.replace_state_if
    <agent_state.Agent.replace_state_if>`) found the state at another version than the one
    expected: another writer committed in between. Nothing was written; read the state again
    and retry."""

    default_status = AGENT_ERR_CONFLICT


class RejectedError(AgentError):
    """``AGENT_ERR_REJECTED``: the agent's validator (:meth:`Agent.set_validator
    <agent_state.Agent.set_validator>`) rejected the change. Nothing was written and no hook
    ran.

    The message includes ``str()`` of the exception the validator raised, and that exception is
    ``__cause__``.
    """

    default_status = AGENT_ERR_REJECTED


class GapError(AgentError):
    """``AGENT_ERR_GAP``: the change log no longer holds changes that were asked for: its
    retention pruned them.

    From :meth:`Agent.poll <agent_state.Agent.poll>`: the pruned changes were skipped and the
    ones still logged were delivered all the same (``.delivered`` counts them; the state is
    current); raised once per gap. From :meth:`Agent.changes_since
    <agent_state.Agent.changes_since>`: send the whole state instead. From
    :meth:`Agent.state_at <agent_state.Agent.state_at>` and :meth:`Agent.restore
    <agent_state.Agent.restore>`: that version is not retained.

    Attributes:
        exceptions: the exceptions raised by hooks during the same ``poll()`` (the gap takes
            precedence over :class:`HookError`); the first one is also ``__cause__``.
    """

    default_status = AGENT_ERR_GAP

    def __init__(
        self,
        message: str,
        status: Optional[int] = None,
        exceptions: Sequence[BaseException] = (),
    ) -> None:
        super().__init__(message, status)
        self.exceptions: List[BaseException] = list(exceptions)


class UnavailableError(AgentError):
    """``AGENT_ERR_UNAVAILABLE``: the database server (PostgreSQL) could not be reached within
    ``server_timeout_ms`` (refused, timed out, restarting), or the connection was lost.

    The call had no effect, except when the connection dropped while a commit was in flight:
    then the message says the commit's outcome is unknown (read the version to tell). The agent
    stays usable: its next call reconnects, so retrying later is the remedy. A SQLite file never
    raises it.
    """

    default_status = AGENT_ERR_UNAVAILABLE


class AuthError(AgentError):
    """``AGENT_ERR_AUTH``: the connection to the database server (PostgreSQL) could not be
    secured or authenticated: the TLS handshake failed (the server's certificate is not trusted,
    has expired or names another host; the server offers no TLS while ``sslmode`` requires it,
    or wants a client certificate), or the server refused the credentials (a wrong password, no
    ``pg_hba.conf`` entry). The message says which, never the password. Unlike
    :class:`UnavailableError`, retrying with the same URI will not help.
    """

    default_status = AGENT_ERR_AUTH


class CallCancelledError(AgentError):
    """``AGENT_ERR_CANCELLED``: the call's cancel token fired, or its deadline passed, while the
    call waited (for another connection's lock, a connection of the pool or the server); nothing
    was written and the agent stays usable. (Not :class:`asyncio.CancelledError`: this is the
    library's status.)
    """

    default_status = AGENT_ERR_CANCELLED


_NEWER = re.compile(r"schema version (\d+), newer than this handle's schema_version (\d+)")
_STEP = re.compile(r"schema step (\d+) -> \d+")


class NewerSchemaError(AgentError):
    """``AGENT_ERR_NEWER_SCHEMA``: the agent's state is stored under a newer schema version
    than this agent declares (its ``schema_version`` open option): a newer program wrote it.
    Every read and write of this agent fails so, with nothing written (an older program never
    reads a newer state into its older shape, nor writes over it). Run the newer program, or
    open the agent with ``read_only=True`` to read the state as stored. Also raised by
    :meth:`Agent.upgrade_state <agent_state.Agent.upgrade_state>` for a ``from_version`` above
    the agent's.

    Attributes:
        stored: the schema version the state is stored under, as the message says it
            (``None`` if the message does not).
        declared: this agent's ``schema_version`` (``None`` if the message does not say).
    """

    default_status = AGENT_ERR_NEWER_SCHEMA

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message, status)
        found = _NEWER.search(message)
        self.stored: Optional[int] = int(found.group(1)) if found else None
        self.declared: Optional[int] = int(found.group(2)) if found else None


class MigrationError(AgentError):
    """``AGENT_ERR_MIGRATION``: upgrading the stored state to this agent's schema version
    failed: a step (``schema_steps``, or one set with :meth:`Agent.set_schema_step
    <agent_state.Agent.set_schema_step>`) raised or is missing, or its result is not a state
    the codec, the size cap or the validator accepts. The message names the step
    (``schema step 0 -> 1: the step failed: ValueError: ...``); the stored state is as it was
    and nothing was written. When a Python step raised, its exception is ``__cause__``.

    Attributes:
        from_version: the version the failing step upgrades from (``None`` if the message
            does not name a step).
    """

    default_status = AGENT_ERR_MIGRATION

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message, status)
        found = _STEP.search(message)
        self.from_version: Optional[int] = int(found.group(1)) if found else None


#: The library's naming of a JSON Patch operation in its messages: ``operation 1 (remove "/q")``
#: (its index from 0, its ``op``, and its ``path`` as a quoted string with backslash escapes).
_OPERATION = re.compile(r'operation (\d+)(?: \((\w+)(?: "((?:[^"\\]|\\.)*)")?\))?: ')
#: The escapes of the quoted path: ``\"``, ``\\``, ``\n``, ``\u{1f}``, ...
_ESCAPE = re.compile(r"\\(u\{([0-9a-fA-F]+)\}|.)", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "0": "\0"}


def _unquote(text: str) -> str:
    """The path as written, from its quoted form in a message."""

    def one(m: "re.Match[str]") -> str:
        if m.group(2) is not None:
            return chr(int(m.group(2), 16))
        c = m.group(1)
        return _SIMPLE_ESCAPES.get(c, c)

    return _ESCAPE.sub(one, text)


def _operation_of(message: str) -> Tuple[Optional[int], Optional[str], Optional[str]]:
    """``(index, op, path)`` of the operation a message names, each ``None`` when it does not
    say."""
    found = _OPERATION.search(message)
    if found is None:
        return None, None, None
    path = found.group(3)
    return int(found.group(1)), found.group(2), None if path is None else _unquote(path)


class _NamesAnOperation(AgentError):
    """An error whose message may name the JSON Patch operation at fault (``operation 1
    (remove "/q"): ...``): its index, ``op`` and ``path`` as attributes, ``None`` where the
    message does not say."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message, status)
        self.operation: Optional[int]
        self.op: Optional[str]
        self.path: Optional[str]
        self.operation, self.op, self.path = _operation_of(message)


class PathError(_NamesAnOperation, LookupError):
    """``AGENT_ERR_PATH``: a JSON Pointer names nothing in the state. Raised by
    :meth:`Agent.get_path <agent_state.Agent.get_path>` and :meth:`Agent.get_tail
    <agent_state.Agent.get_tail>` for a member that does not exist or an index out of range
    (or with a leading zero, or ``-``), and by :meth:`Agent.patch_state
    <agent_state.Agent.patch_state>` for an operation whose ``path`` (or ``from``) does not
    exist, or a ``move`` into its own child. Nothing was written. (Also a ``LookupError``, as
    ``KeyError`` and ``IndexError`` are.)

    Attributes:
        operation: the index (from 0) in the patch of the operation at fault, as the message
            names it (``operation 1 (remove "/q"): ...``); ``None`` for a read, or when the
            message does not name one.
        op: that operation's ``op`` (``"remove"``), or ``None``.
        path: that operation's ``path`` as written (``"/q"``); for a read, the pointer that
            was read; ``None`` when neither is known.
    """

    default_status = AGENT_ERR_PATH



class TestFailedError(_NamesAnOperation):
    """``AGENT_ERR_TEST_FAILED``: a ``test`` operation of :meth:`Agent.patch_state
    <agent_state.Agent.patch_state>` found another value than the one it names: the patch's
    own compare-and-set said no, and nothing was written. Read the state again and retry, as
    after a :class:`ConflictError`.

    Attributes:
        operation: the index (from 0) in the patch of the ``test`` that failed, as the message
            names it (``operation 0 (test "/status"): ...``); ``None`` when it does not.
        op: ``"test"`` (``None`` when the message does not say).
        path: the pointer the operation tested, as written; ``None`` when the message does
            not say.
    """

    default_status = AGENT_ERR_TEST_FAILED
    # Not a test class, whatever its name says (pytest collects classes named Test*).
    __test__ = False



class PanicError(AgentError):
    """``AGENT_ERR_PANIC``: the library caught an internal bug at its boundary (please report
    it). The agent may still be used."""

    default_status = AGENT_ERR_PANIC


def _public_classes(base: Type[AgentError]) -> List[Type[AgentError]]:
    """Every public subclass of ``base``, at any depth (the private ones only share code)."""
    found: List[Type[AgentError]] = []
    for cls in base.__subclasses__():
        if not cls.__name__.startswith("_"):
            found.append(cls)
        found.extend(_public_classes(cls))
    return found


#: The exception class of each status: the one whose ``default_status`` it is.
_CLASSES: Dict[int, Type[AgentError]] = {cls.default_status: cls for cls in _public_classes(AgentError)}


def error_for_status(status: int, message: str) -> AgentError:
    """Builds the exception for a non-zero library status: the subclass for that status, or
    :class:`AgentError` for a code this binding does not know."""
    cls = _CLASSES.get(status, AgentError)
    return cls(message, status)


def status_name(status: int) -> str:
    """The name of a status code, e.g. ``"AGENT_ERR_CODEC"`` (``"AGENT_ERR_UNKNOWN"`` for a
    number that is not a status)."""
    return _STATUS_NAMES.get(status, "AGENT_ERR_UNKNOWN")
