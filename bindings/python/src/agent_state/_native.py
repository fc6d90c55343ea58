"""The ctypes layer: finding and loading the shared library, and declaring every C function once.

Each ``agent_*`` function that returns an ``AgentStatus`` has ``argtypes``, ``restype`` and an
``errcheck`` that turns a non-zero status into the matching :class:`~agent_state.AgentError`
subclass, with the message read from ``agent_last_error()`` right after the call, on the same
thread (ctypes runs the call and its errcheck on the calling thread, and releases the GIL only
during the call itself).

Every call that may run a Python callback goes through :func:`call`, :func:`call_text`,
:func:`call_text_versioned` or :func:`call_poll`, which push a *frame* on the thread's stack for
its duration (``_inflight``) and pass the exit gate. Exceptions that callbacks raise are
collected in the frame (``_callbacks``); :func:`_raise_status` turns the call's status and its
frame into what the call raises: an interrupt (``KeyboardInterrupt``, ``SystemExit``) as itself
whatever the status; for ``AGENT_ERR_HOOK`` a :class:`~agent_state.HookError` carrying the
hooks' exceptions; for ``AGENT_ERR_REJECTED`` a :class:`~agent_state.RejectedError` caused by the
validator's exception.

The state calls (``agent_get_state``, ``agent_set_state``, ``agent_replace_state``, their
versioned and compare-and-set forms, ``agent_get_state_at``, ``agent_restore_state``,
``agent_changes_since``, ``agent_poll``, ``agent_patch_state`` and its compare-and-set form,
``agent_get_path``, ``agent_get_tail``) and ``agent_close`` also have second function objects
(the same declaration, without errcheck), used through :func:`call_text`, :func:`call_text_versioned`,
:func:`call_poll` and :func:`call`, which check the status and read the outputs themselves: the
same contract, with less Python run per call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import itertools
import re
import sys
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from . import _inflight
from ._inflight import REJECTED, STEP_FAILED, frames as _frames
from .errors import (
    AGENT_ERR_GAP,
    AGENT_ERR_HOOK,
    AGENT_ERR_MIGRATION,
    AGENT_ERR_REJECTED,
    AgentError,
    GapError,
    HookError,
    error_for_status,
)

#: Environment variable naming the shared library to load, overriding every other place.
LIBRARY_ENV = "AGENT_STATE_LIBRARY"

if sys.platform == "darwin":
    _LIB_NAME = "libagent_state.dylib"
elif sys.platform == "win32":
    _LIB_NAME = "agent_state.dll"
else:
    _LIB_NAME = "libagent_state.so"


class AgentBuffer(ctypes.Structure):
    """``struct AgentBuffer``: a library-owned view of bytes, released with
    ``agent_buffer_free``."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("owner", ctypes.c_void_p),
    ]


class AgentStateChange(ctypes.Structure):
    """``struct AgentStateChange``: borrowed views of one committed change (or, for the
    validator, of the change about to commit), valid only during the call. ``version`` was
    appended in 0.2; ``kind``, ``schema`` and ``migrated_from`` in 0.4."""

    _fields_ = [
        ("next", ctypes.c_void_p),
        ("next_len", ctypes.c_size_t),
        ("prev", ctypes.c_void_p),
        ("prev_len", ctypes.c_size_t),
        ("patch", ctypes.c_void_p),
        ("patch_len", ctypes.c_size_t),
        ("version", ctypes.c_uint64),
        ("kind", ctypes.c_int32),
        ("schema", ctypes.c_uint32),
        ("migrated_from", ctypes.c_uint32),
    ]


class AgentCall(ctypes.Structure):
    """``struct AgentCall``: one call to submit (``agent_submit``, ``agent_queue_submit``),
    read (and ``data`` copied) before the submitting function returns."""

    _fields_ = [
        ("op", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("data", ctypes.c_char_p),
        ("len", ctypes.c_size_t),
        ("expected_version", ctypes.c_uint64),
        ("cancel", ctypes.c_uint64),
        ("tag", ctypes.c_uint64),
    ]


class AgentCompletion(ctypes.Structure):
    """``struct AgentCompletion``: the outcome of a submitted call; its buffers are the
    receiver's (``agent_buffer_free``)."""

    _fields_ = [
        ("tag", ctypes.c_uint64),
        ("status", ctypes.c_int32),
        ("committed", ctypes.c_uint32),
        ("version", ctypes.c_uint64),
        ("state", AgentBuffer),
        ("message", AgentBuffer),
    ]


class AgentWatchEvent(ctypes.Structure):
    """``struct AgentWatchEvent``: one change delivered to a watch (``agent_watch_next``),
    the receiver's until ``agent_watch_event_free``. The text fields are read by their lengths
    (their addresses as ``c_void_p``: see ``watch.py``); ``patch`` and ``state`` are NULL when
    absent."""

    _fields_ = [
        ("agent_id", ctypes.c_char_p),
        ("agent_id_len", ctypes.c_size_t),
        ("version", ctypes.c_uint64),
        ("kind", ctypes.c_int32),
        ("migrated_from", ctypes.c_uint32),
        ("schema", ctypes.c_uint32),
        ("at_ms", ctypes.c_int64),
        ("patch", ctypes.c_char_p),
        ("patch_len", ctypes.c_size_t),
        ("state", ctypes.c_char_p),
        ("state_len", ctypes.c_size_t),
    ]


#: ``AgentCall.op``: read the state and its version.
OP_GET_STATE = 1
#: ``AgentCall.op``: merge an RFC 7396 merge patch.
OP_SET_STATE = 2
#: ``AgentCall.op``: replace the state.
OP_REPLACE_STATE = 3
#: ``AgentCall.op``: apply an RFC 6902 JSON Patch.
OP_PATCH_STATE = 4
#: ``AgentCall.flags``: compare-and-set (``expected_version``).
CALL_IF = 1
#: ``AgentCall.flags``: the completion carries no state.
CALL_NO_STATE = 2

#: ``void (*AgentDoneFn)(void *context, struct AgentCompletion *completion)``
DONE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(AgentCompletion))
#: ``int32_t (*AgentStateChangedFn)(void *user_data, const AgentStateChange *change)``
STATE_CHANGED_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(AgentStateChange))
#: ``int32_t (*AgentInitialStateFn)(void *user_data, AgentBuffer *out)``
INITIAL_STATE_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(AgentBuffer))
#: ``int32_t (*AgentValidateFn)(void *user_data, const AgentStateChange *change, AgentBuffer *message)``
VALIDATE_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(AgentStateChange), ctypes.POINTER(AgentBuffer)
)
#: ``int32_t (*AgentSchemaStepFn)(void *user_data, uint32_t from, const uint8_t *state,
#: size_t state_len, AgentBuffer *out, AgentBuffer *message)``
SCHEMA_STEP_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_void_p,
    ctypes.c_uint32,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.POINTER(AgentBuffer),
    ctypes.POINTER(AgentBuffer),
)
#: ``void (*AgentWatchFn)(void *context, const AgentWatchEvent *event)`` (the binding reads its
#: watches from their queue and passes NULL for it).
WATCH_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(AgentWatchEvent))
#: ``void (*AgentFreeFn)(void *user_data)``
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_c_status = ctypes.c_int32
_c_handle = ctypes.c_uint64

def _current_frame() -> List[Any]:
    stack = _frames()
    return stack[-1] if stack else []


def _pop_frame(stack: List[Any], frame: List[Any]) -> None:
    # Pop our own frame (it is the top one unless something went badly wrong).
    if stack and stack[-1] is frame:
        stack.pop()
    else:  # pragma: no cover - defensive
        try:
            stack.remove(frame)
        except ValueError:
            pass


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _candidates() -> List[Path]:
    here = Path(__file__).resolve().parent
    # The copy bundled by setup.py, in a directory that is not a Python identifier: the import
    # system and pkgutil never take it for an extension module.
    found: List[Path] = [here / ".libs" / _LIB_NAME]
    # Running from a source checkout (or an editable install): <repo>/target/release.
    for parent in here.parents:
        for profile in ("release", "debug"):
            found.append(parent / "target" / profile / _LIB_NAME)
        if (parent / "Cargo.toml").is_file():
            break
    return found


def library_path() -> str:
    """The path of the shared library this process loads (or would load).

    Order: the ``AGENT_STATE_LIBRARY`` environment variable; the copy bundled inside the
    package; ``target/release`` (then ``target/debug``) of an enclosing source checkout; the
    system's library search path.
    """
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return env
    for candidate in _candidates():
        if candidate.is_file():
            return str(candidate)
    system = ctypes.util.find_library("agent_state")
    if system:
        return system
    raise OSError(
        f"agent_state: cannot find {_LIB_NAME}. Build the library (`make build`) and reinstall "
        f"the package (`pip install ./bindings/python`), or set {LIBRARY_ENV} to its path."
    )


def _raise_status(result: int, name: str, carried: List[Any]) -> None:
    """Raises what a call must raise that ended with status ``result`` and whose callbacks
    carried ``carried`` (its frame; see ``_inflight.REJECTED``):

    - an interrupt (an exception that is not an ``Exception``: ``KeyboardInterrupt``,
      ``SystemExit``, ...) as itself, the first one, whatever the status;
    - on success, the first exception carried: one that a signal handler raised after a
      callback had answered;
    - otherwise the error of ``result``, with the message the library left for this thread;
      for ``AGENT_ERR_REJECTED`` with the validator's exception as ``__cause__``, for
      ``AGENT_ERR_MIGRATION`` with the exception of the schema step that raised; for
      ``AGENT_ERR_HOOK`` and ``AGENT_ERR_GAP`` (of ``agent_poll``, whose deliveries happened all
      the same) with the exceptions its hooks raised.
    """
    raw = _lib_last_error() if result else None
    raise error_of(result, name, raw.decode("utf-8", "replace") if raw else "", carried)


def error_of(result: int, name: str, message: str, carried: List[Any]) -> BaseException:
    """What :func:`_raise_status` raises, for a call that ended with status ``result``, the
    library's ``message`` for it (read by the caller: ``agent_last_error``, or a completion's
    message) and the frame ``carried``: an exception with its ``__cause__`` set."""
    for entry in carried:
        exc = entry[1] if type(entry) is tuple else entry
        if not isinstance(exc, Exception):
            return exc  # type: ignore[no-any-return]
    if not result:
        entry = carried[0]
        return entry[1] if type(entry) is tuple else entry  # type: ignore[no-any-return]
    if not message:
        message = f"{name} failed"
    err = error_for_status(result, message)
    cause: Optional[BaseException] = None
    if not carried:
        return err
    if result == AGENT_ERR_REJECTED or result == AGENT_ERR_MIGRATION:
        marker = REJECTED if result == AGENT_ERR_REJECTED else STEP_FAILED
        reasons = [e[1] for e in carried if type(e) is tuple and e[0] is marker]
        if reasons:
            cause = reasons[-1]
    elif result == AGENT_ERR_HOOK or result == AGENT_ERR_GAP:
        raised = [e for e in carried if type(e) is not tuple]
        if result == AGENT_ERR_HOOK and raised:
            message = hook_message(message, raised)
        err = (HookError if result == AGENT_ERR_HOOK else GapError)(message, result, raised)
        if raised:
            cause = raised[0]
    if cause is not None:
        err.__cause__ = cause
    return err


#: What the library says of a callback that failed: its status code, as the C ABI has no room for
#: more (``on_state_changed hook 1: returned 1``).
_RETURNED = re.compile(r": returned -?[0-9]+")


def describe(exc: BaseException) -> str:
    """``"RuntimeError: websocket send failed"``: an exception's type and message (its type
    alone when the message is empty or cannot be made)."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__
        text = ""
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def hook_message(message: str, raised: List[BaseException]) -> str:
    """The message of a :class:`~agent_state.HookError` whose hooks raised ``raised``: the
    library's, with the Python exception in place of the status code it reports
    (``on_state_changed hook 1 raised RuntimeError: websocket send failed``)."""
    first = describe(raised[0])
    text, found = _RETURNED.subn(lambda _: " raised " + first, message, count=1)
    if not found:
        text = f"{message}: {first}"
    if len(raised) > 1:
        text += f" (and {len(raised) - 1} more: see .exceptions)"
    return text


def last_error_text() -> str:
    """``agent_last_error()`` of this thread, decoded ("" when none)."""
    raw = _lib_last_error()
    return raw.decode("utf-8", "replace") if raw else ""


def _errcheck(result: int, func: Any, args: Any) -> int:
    if result != 0:
        _raise_status(result, func.__name__, _current_frame())
    return result


_lib_last_error: Any = None


def _declare(lib: ctypes.CDLL) -> None:
    global _lib_last_error

    def status_fn(name: str, *argtypes: Any) -> None:
        fn = getattr(lib, name)
        fn.argtypes = list(argtypes)
        fn.restype = _c_status
        fn.errcheck = _errcheck

    buf_p = ctypes.POINTER(AgentBuffer)
    # const uint8_t * inputs are declared c_char_p: the same pointer ABI, and bytes pass as is.
    status_fn("agent_open", ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_c_handle))
    status_fn("agent_close", _c_handle)
    status_fn("agent_get_state", _c_handle, buf_p)
    status_fn("agent_set_state", _c_handle, ctypes.c_char_p, ctypes.c_size_t, buf_p)
    status_fn("agent_replace_state", _c_handle, ctypes.c_char_p, ctypes.c_size_t, buf_p)
    status_fn("agent_buffer_copy", ctypes.c_char_p, ctypes.c_size_t, buf_p)
    status_fn(
        "agent_on_state_changed",
        _c_handle,
        STATE_CHANGED_FN,
        ctypes.c_void_p,
        FREE_FN,
        ctypes.POINTER(ctypes.c_uint64),
    )
    status_fn("agent_remove_hook", _c_handle, ctypes.c_uint64)
    status_fn("agent_set_initial_state_hook", _c_handle, INITIAL_STATE_FN, ctypes.c_void_p, FREE_FN)
    u64_p = ctypes.POINTER(ctypes.c_uint64)
    status_fn("agent_get_state_versioned", _c_handle, buf_p, u64_p)
    status_fn(
        "agent_set_state_if", _c_handle, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, buf_p, u64_p
    )
    status_fn(
        "agent_replace_state_if", _c_handle, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, buf_p, u64_p
    )
    status_fn("agent_poll", _c_handle, ctypes.POINTER(ctypes.c_size_t))
    status_fn("agent_changes_since", _c_handle, ctypes.c_uint64, buf_p)
    status_fn("agent_get_state_at", _c_handle, ctypes.c_uint64, buf_p)
    status_fn("agent_restore_state", _c_handle, ctypes.c_uint64, buf_p, u64_p)
    status_fn("agent_set_validator", _c_handle, VALIDATE_FN, ctypes.c_void_p, FREE_FN)
    # JSON Patch (RFC 6902) and reads of one place (RFC 6901 pointers, const char * and length).
    status_fn("agent_patch_state", _c_handle, ctypes.c_char_p, ctypes.c_size_t, buf_p)
    status_fn(
        "agent_patch_state_if", _c_handle, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, buf_p, u64_p
    )
    status_fn("agent_get_path", _c_handle, ctypes.c_char_p, ctypes.c_size_t, buf_p)
    status_fn("agent_get_tail", _c_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, buf_p)
    # Schema evolution.
    status_fn("agent_set_schema_step", _c_handle, ctypes.c_uint32, SCHEMA_STEP_FN, ctypes.c_void_p, FREE_FN)
    status_fn("agent_schema_version", _c_handle, ctypes.POINTER(ctypes.c_uint32))
    status_fn("agent_get_state_at_stored", _c_handle, ctypes.c_uint64, buf_p, ctypes.POINTER(ctypes.c_uint32))
    status_fn("agent_upgrade_state", _c_handle, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, buf_p)
    # Awaited calls: submission, completion queues (AgentQueue is a uint64_t id).
    call_p = ctypes.POINTER(AgentCall)
    completion_p = ctypes.POINTER(AgentCompletion)
    status_fn("agent_submit", _c_handle, call_p, DONE_FN, ctypes.c_void_p)
    status_fn("agent_queue_new", u64_p, ctypes.POINTER(ctypes.c_int32))
    status_fn("agent_queue_submit", ctypes.c_uint64, _c_handle, call_p, completion_p, ctypes.POINTER(ctypes.c_int32))
    status_fn("agent_queue_take", ctypes.c_uint64, completion_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))
    status_fn("agent_queue_free", ctypes.c_uint64)
    # Cancel tokens (AgentCancel is a uint64_t id, like AgentHandle).
    status_fn("agent_cancel_new", ctypes.c_int64, u64_p)
    status_fn("agent_cancel_bind", ctypes.c_uint64)
    status_fn("agent_cancel_fire", ctypes.c_uint64)
    status_fn("agent_cancel_free", ctypes.c_uint64)

    # A store's agents (no handle: each call opens a connection of its own).
    status_fn(
        "agent_store_list",
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_uint32,
        buf_p,
    )
    status_fn("agent_store_delete", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, u64_p)
    status_fn(
        "agent_store_expire",
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_uint64,
        ctypes.c_uint32,
        ctypes.c_int,
        buf_p,
    )

    # Watches (AgentWatch is a uint64_t id); the binding reads their queues (no callback).
    event_p = ctypes.POINTER(AgentWatchEvent)
    status_fn(
        "agent_watch_open",
        ctypes.c_char_p,
        ctypes.c_char_p,
        WATCH_FN,
        ctypes.c_void_p,
        u64_p,
        ctypes.POINTER(ctypes.c_int32),
    )
    status_fn("agent_watch_next", ctypes.c_uint64, ctypes.c_int64, ctypes.POINTER(event_p))
    status_fn("agent_watch_add", ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int64)
    status_fn("agent_watch_remove", ctypes.c_uint64, ctypes.c_char_p)
    status_fn("agent_watch_close", ctypes.c_uint64)
    lib.agent_watch_event_free.argtypes = [event_p]
    lib.agent_watch_event_free.restype = None

    lib.agent_buffer_free.argtypes = [buf_p]
    lib.agent_buffer_free.restype = None
    lib.agent_last_error.argtypes = []
    lib.agent_last_error.restype = ctypes.c_char_p
    lib.agent_version.argtypes = []
    lib.agent_version.restype = ctypes.c_char_p
    lib.agent_status_name.argtypes = [_c_status]
    lib.agent_status_name.restype = ctypes.c_char_p
    _lib_last_error = lib.agent_last_error

    # The hot path (see call_text): second function objects of the functions declared above,
    # with the same argtypes and restype and no errcheck, so a successful call runs no Python
    # code besides ctypes' own (errcheck is per function object, hence two).
    global _hot_get_state, _hot_set_state, _hot_replace_state, _buffer_free
    global _hot_get_state_versioned, _hot_set_state_if, _hot_replace_state_if, _hot_poll
    global _hot_changes_since, _hot_get_state_at, _hot_restore_state, _hot_close
    global _hot_patch_state, _hot_patch_state_if, _hot_get_path, _hot_get_tail
    global _hot_submit, _hot_queue_submit, _hot_queue_take

    def hot_fn(name: str) -> Any:
        # ``lib[name]`` makes a new function object; it takes the declaration made above.
        declared = getattr(lib, name)
        fn = lib[name]
        fn.argtypes = declared.argtypes
        fn.restype = declared.restype
        return fn

    _hot_get_state = hot_fn("agent_get_state")
    _hot_set_state = hot_fn("agent_set_state")
    _hot_replace_state = hot_fn("agent_replace_state")
    _hot_get_state_versioned = hot_fn("agent_get_state_versioned")
    _hot_set_state_if = hot_fn("agent_set_state_if")
    _hot_replace_state_if = hot_fn("agent_replace_state_if")
    _hot_poll = hot_fn("agent_poll")
    _hot_changes_since = hot_fn("agent_changes_since")
    _hot_get_state_at = hot_fn("agent_get_state_at")
    _hot_restore_state = hot_fn("agent_restore_state")
    _hot_close = hot_fn("agent_close")
    _hot_patch_state = hot_fn("agent_patch_state")
    _hot_patch_state_if = hot_fn("agent_patch_state_if")
    _hot_get_path = hot_fn("agent_get_path")
    _hot_get_tail = hot_fn("agent_get_tail")
    _hot_submit = hot_fn("agent_submit")
    _hot_queue_submit = hot_fn("agent_queue_submit")
    _hot_queue_take = hot_fn("agent_queue_take")
    _buffer_free = lib.agent_buffer_free


_hot_get_state: Any = None
_hot_set_state: Any = None
_hot_replace_state: Any = None
_hot_get_state_versioned: Any = None
_hot_set_state_if: Any = None
_hot_replace_state_if: Any = None
_hot_poll: Any = None
_hot_changes_since: Any = None
_hot_get_state_at: Any = None
_hot_restore_state: Any = None
_hot_close: Any = None
_hot_patch_state: Any = None
_hot_patch_state_if: Any = None
_hot_get_path: Any = None
_hot_get_tail: Any = None
_hot_submit: Any = None
_hot_queue_submit: Any = None
_hot_queue_take: Any = None
_buffer_free: Any = None


_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """The loaded shared library, with every function declared (loaded on first use)."""
    global _lib
    lib = _lib
    if lib is not None:
        return lib
    with _lib_lock:
        if _lib is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise OSError(f"agent_state: cannot load the library at {path}: {e}") from e
            _declare(lib)
            _lib = lib
        return _lib


def _make_utf8_at() -> Callable[[Any, int, Any], str]:
    """``utf8_at(address, length, None)``: the UTF-8 bytes at ``address`` as a ``str``, decoded
    straight from C memory (CPython's PyUnicode_DecodeUTF8: one copy, no intermediate bytes)."""
    try:
        fn = ctypes.pythonapi["PyUnicode_DecodeUTF8"]
        fn.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_char_p]
        fn.restype = ctypes.py_object
        if fn(ctypes.c_char_p(b"ok\xc3\xa9"), 4, None) == "ok\u00e9":
            return fn
    except Exception:  # pragma: no cover - not CPython
        pass

    def utf8_at(address: Any, length: int, errors: Any) -> str:  # pragma: no cover - not CPython
        return ctypes.string_at(address, length).decode("utf-8")

    return utf8_at  # pragma: no cover


_utf8_at = _make_utf8_at()


def text_at(address: Any, length: int) -> str:
    """The ``length`` UTF-8 bytes at ``address`` (a C pointer) as a ``str``."""
    if not address:
        return ""
    return _utf8_at(address, length, None)


def read_buffer(buf: AgentBuffer) -> bytes:
    """Copies the bytes of a library buffer (empty buffer: ``b""``)."""
    if not buf.data:
        return b""
    return ctypes.string_at(buf.data, buf.len)


# The calls below push their frame with `stack += (frame,)` rather than append(): between the
# push and the try, no instruction handles signals (CPython 3.11+), so a KeyboardInterrupt
# cannot leave a frame behind (which would make the thread look inside the library forever).

_starmap = itertools.starmap


def call(fn: Any, *args: Any, answer: Optional[List[int]] = None) -> int:
    """Calls ``fn(*args)``, a library function that may run Python callbacks, in its own frame,
    past the exit gate; returns its status. With an errcheck'd function, a failure raises from
    inside the call with the frame's exceptions; with a hot one, :func:`_raise_status` does.
    ``answer``, a list, gets the status appended the moment the library returns, before any
    instruction that handles signals, so that a caller interrupted right afterwards still knows
    what the library did."""
    if answer is None:
        answer = []
    stack = _frames()
    frame: List[Any] = []
    stack += (frame,)
    try:
        if _inflight.exiting:
            _inflight.gate(stack)
        answer += _starmap(fn, (args,))
    finally:
        _pop_frame(stack, frame)
    status: int = answer[-1]
    if status or frame:
        _raise_status(status, fn.__name__, frame)
    return status


def call_text(fn: Any, *args: Any) -> str:
    """Calls one of the hot functions (``_hot_*``), ``fn(*args, &buffer)``, and returns the
    output buffer as text. Same contract as :func:`call`; the buffer is freed."""
    buf = AgentBuffer()
    try:
        stack = _frames()
        frame: List[Any] = []
        stack += (frame,)
        try:
            if _inflight.exiting:
                _inflight.gate(stack)
            status = fn(*args, buf)
        finally:
            if stack and stack[-1] is frame:
                stack.pop()
            else:  # pragma: no cover - defensive
                _pop_frame(stack, frame)
        if status or frame:
            _raise_status(status, fn.__name__, frame)
        data = buf.data
        return _utf8_at(data, buf.len, None) if data else ""
    finally:
        _buffer_free(buf)


def call_text_versioned(fn: Any, *args: Any) -> Tuple[str, int]:
    """:func:`call_text` for the functions that also report a version:
    ``fn(*args, &buffer, &version)``; returns the output buffer as text, and the version."""
    buf = AgentBuffer()
    version = ctypes.c_uint64(0)
    try:
        stack = _frames()
        frame: List[Any] = []
        stack += (frame,)
        try:
            if _inflight.exiting:
                _inflight.gate(stack)
            status = fn(*args, buf, ctypes.byref(version))
        finally:
            if stack and stack[-1] is frame:
                stack.pop()
            else:  # pragma: no cover - defensive
                _pop_frame(stack, frame)
        if status or frame:
            _raise_status(status, fn.__name__, frame)
        data = buf.data
        text: str = _utf8_at(data, buf.len, None) if data else ""
        return text, version.value
    finally:
        _buffer_free(buf)


def call_poll(handle: int) -> int:
    """``agent_poll(handle, &delivered)``: returns how many changes were delivered. On failure
    the error raised carries that count as ``.delivered`` (the deliveries of a
    :class:`~agent_state.GapError` or :class:`~agent_state.HookError` happened all the same)."""
    delivered = ctypes.c_size_t(0)
    stack = _frames()
    frame: List[Any] = []
    stack += (frame,)
    try:
        if _inflight.exiting:
            _inflight.gate(stack)
        status = _hot_poll(handle, ctypes.byref(delivered))
    finally:
        _pop_frame(stack, frame)
    if status or frame:
        try:
            _raise_status(status, "agent_poll", frame)
        except AgentError as err:
            err.delivered = delivered.value
            raise
    return delivered.value
