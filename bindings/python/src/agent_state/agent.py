"""The :class:`Agent`: one persistent, transactional JSON state value in one store file."""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
import traceback
import weakref
from typing import Any, Callable, Dict, Mapping, Optional, Union

from . import _native
from .codec import decode_state, encode_state, encode_value, json_text
from .errors import ClosedError, InvalidArgumentError
from ._native import call_text, record_hook_exception, text_at

__all__ = ["Agent", "Hook", "StateChangedCallback", "InitialStateCallback", "library_version"]

State = Dict[str, Any]
#: ``callback(next, prev, patch)``; ``patch`` is ``None`` for a ``replace_state`` change.
StateChangedCallback = Callable[[State, State, Optional[State]], Any]
#: ``callback()`` returning the initial state (a dict), or its raw JSON text (str or bytes).
InitialStateCallback = Callable[[], Union[Mapping[str, Any], str, bytes]]
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# --------------------------------------------------------------------------------------------
# Hook trampolines.
#
# The C library holds plain function pointers and a user_data word. The function pointers are
# the three module-level CFUNCTYPE objects below, alive as long as the module (never garbage
# collected while C may call them). user_data is an integer key into _callbacks, which holds
# the user's callable; the library calls _free exactly once per registration (on removal, on
# close, or right away if registering failed), which drops the entry.
# --------------------------------------------------------------------------------------------

_callbacks: Dict[int, Callable[..., Any]] = {}
_keys = itertools.count(1)


def _carry(exc: BaseException) -> None:
    """Hands a hook's exception to the call that triggered the hook (same thread)."""
    if not record_hook_exception(exc):  # pragma: no cover - every triggering call has a frame
        try:
            sys.stderr.write("agent_state: exception in a hook with no caller to report it to:\n")
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        except BaseException:
            pass


def _state_changed(user_data: Optional[int], change: Any) -> int:
    try:
        fn = _callbacks.get(user_data or 0)
        if fn is None:
            return 0
        c = change.contents
        next_state = decode_state(text_at(c.next, c.next_len))
        prev_state = decode_state(text_at(c.prev, c.prev_len))
        patch = decode_state(text_at(c.patch, c.patch_len)) if c.patch else None
        fn(next_state, prev_state, patch)
        return 0
    except BaseException as exc:  # never let an exception reach ctypes (it would be ignored)
        _carry(exc)
        return 1


def _initial_state(user_data: Optional[int], out: Any) -> int:
    try:
        fn = _callbacks.get(user_data or 0)
        if fn is None:  # pragma: no cover - the library frees user_data only after the last call
            raise RuntimeError("initial-state hook called after it was released")
        value = fn()
        if isinstance(value, (str, bytes, bytearray, memoryview)):
            data = json_text(value, "initial state")
        else:
            data = encode_state(value, "initial state")
        _native.library().agent_buffer_copy(data, len(data), out)
        return 0
    except BaseException as exc:
        _carry(exc)
        return 1


def _free(user_data: Optional[int]) -> None:
    try:
        _callbacks.pop(user_data or 0, None)
    except BaseException:  # pragma: no cover
        pass


_STATE_CHANGED_TRAMPOLINE = _native.STATE_CHANGED_FN(_state_changed)
_INITIAL_STATE_TRAMPOLINE = _native.INITIAL_STATE_FN(_initial_state)
_FREE_TRAMPOLINE = _native.FREE_FN(_free)
# NULL function pointers (a CFUNCTYPE argument does not take None).
_NULL_INITIAL_STATE = _native.INITIAL_STATE_FN()
_NULL_FREE = _native.FREE_FN()


def _register(fn: Callable[..., Any]) -> int:
    key = next(_keys)
    _callbacks[key] = fn
    return key


def _close_handle(handle: int) -> None:
    """Finalizer of an agent that was garbage-collected (or alive at exit) without close()."""
    try:
        _native.library().agent_close(handle)
    except Exception:
        pass


def library_version() -> str:
    """The version of the loaded C library, e.g. ``"0.1.0"``."""
    version: bytes = _native.library().agent_version()
    return version.decode("ascii")


class Hook:
    """The handle of an ``on_state_changed`` registration, returned by
    :meth:`Agent.on_state_changed`.

    Calling the handle calls the callback (so decorating a function keeps it callable);
    :meth:`remove` unregisters it; as a context manager it removes the hook on exit.

    Attributes:
        id: the library's id of the hook.
        callback: the registered callable.
    """

    __slots__ = ("_agent", "id", "callback", "_key", "__weakref__")

    def __init__(self, agent: "Agent", hook_id: int, callback: StateChangedCallback, key: int) -> None:
        self._agent = agent
        self.id = hook_id
        self.callback = callback
        self._key = key

    @property
    def active(self) -> bool:
        """True while the library still holds the hook (False after removal or close)."""
        return self._key in _callbacks

    def remove(self) -> bool:
        """Unregisters the hook: it is not called for changes delivered later (a delivery
        already running on another thread may still be inside it). Idempotent; returns True
        if this call removed it, False if it was already gone (removed, or the agent closed)."""
        handle = self._agent._handle
        if not handle:
            return False
        try:
            _native.library().agent_remove_hook(handle, self.id)
        except (InvalidArgumentError, ClosedError):
            return False
        return True

    def __call__(self, next_state: State, prev_state: State, patch: Optional[State]) -> Any:
        return self.callback(next_state, prev_state, patch)

    def __enter__(self) -> "Hook":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"<agent_state.Hook id={self.id} {state} callback={self.callback!r}>"


class Agent:
    """An open agent store: one persistent JSON-object state, merged by RFC 7396.

    >>> with Agent("conv.db", initial_state={"status": "idle", "at": 0}) as agent:
    ...     agent.set_state({"status": "processing"})
    {'status': 'processing', 'at': 0}

    Args:
        path: the store file (created when absent, mode 0600), or ``":memory:"`` for a private
            in-memory store.
        initial_state: the state shown while nothing is stored: a dict, or a callable returning
            one (called every time a default state is needed; it must not use this agent).
        max_value_bytes: the largest encoded state accepted (library default 2 MiB).
        synchronous: ``"full"`` (default: an acknowledged write survives power loss) or
            ``"normal"`` (survives a process crash).
        busy_timeout_ms: how long a write waits for another connection's lock (default 5000).
        read_only: open the store read-only (writes raise :class:`~agent_state.StorageError`).

    Every method may be called from any thread, on one shared ``Agent``; calls release the GIL
    while the library works. ``close()`` is idempotent; any other call after it raises
    :class:`~agent_state.ClosedError`. An agent that is garbage-collected unclosed is closed.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        initial_state: Union[Mapping[str, Any], InitialStateCallback, None] = None,
        max_value_bytes: Optional[int] = None,
        synchronous: Optional[str] = None,
        busy_timeout_ms: Optional[int] = None,
        read_only: Optional[bool] = None,
    ) -> None:
        self._handle = 0
        self._lock = threading.Lock()
        raw_path = os.fsencode(path)
        if b"\0" in raw_path:
            raise InvalidArgumentError("the path contains a NUL byte")
        self._path = os.fsdecode(raw_path)

        options = []
        hook: Optional[InitialStateCallback] = None
        if initial_state is not None:
            if callable(initial_state) and not isinstance(initial_state, Mapping):
                hook = initial_state
            else:
                options.append('"initial_state":' + encode_state(initial_state, "initial_state").decode("utf-8"))
        for name, value in (
            ("max_value_bytes", max_value_bytes),
            ("synchronous", synchronous),
            ("busy_timeout_ms", busy_timeout_ms),
            ("read_only", read_only),
        ):
            if value is not None:
                options.append(f'"{name}":' + encode_value(value))
        options_json = ("{" + ",".join(options) + "}").encode("utf-8") if options else None

        lib = _native.library()
        out = ctypes.c_uint64(0)
        lib.agent_open(raw_path, options_json, ctypes.byref(out))
        self._handle = out.value
        self._finalizer = weakref.finalize(self, _close_handle, self._handle)
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
        other threads finish or raise :class:`~agent_state.ClosedError`."""
        handle = self._handle
        if not handle:
            return
        try:
            _native.library().agent_close(handle)
        except ClosedError:
            pass  # closed by another thread at the same time
        with self._lock:
            if self._handle == handle:
                self._handle = 0
                self._finalizer.detach()

    def __enter__(self) -> "Agent":
        self._h()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<agent_state.Agent {self._path!r} {state}>"

    def _h(self) -> int:
        handle = self._handle
        if not handle:
            raise ClosedError("the agent is closed")
        return handle

    # -- state ---------------------------------------------------------------------------------

    # The state methods go through _native.call_text: the library call (GIL released), the
    # hook-exception frame and the buffer, with no Python code run for a successful status.

    def get_state_json(self) -> str:
        """The state as the library stores it: compact JSON text."""
        handle = self._handle
        if not handle:
            raise ClosedError("the agent is closed")
        return call_text(_native._hot_get_state, handle)

    def get_state(self) -> State:
        """The stored state, or the initial state while nothing is stored (reading never
        stores it). A fresh ``dict`` on every call."""
        handle = self._handle
        if not handle:
            raise ClosedError("the agent is closed")
        return decode_state(call_text(_native._hot_get_state, handle))

    def set_state(self, patch: Mapping[str, Any]) -> State:
        """Merges ``patch`` into the state by RFC 7396 (nested dicts merge, ``None`` deletes a
        key, anything else replaces) in one transaction, and returns the merged state.

        Hooks run after the commit, on this thread. If one raises, this call raises
        :class:`~agent_state.HookError` (the hook's exception as ``__cause__``) *after* the
        change committed. Values that cannot be stored raise
        :class:`~agent_state.CodecError` before anything is sent to the library.
        """
        data = encode_state(patch, "patch")
        handle = self._handle
        if not handle:
            raise ClosedError("the agent is closed")
        return decode_state(call_text(_native._hot_set_state, handle, data, len(data)))

    def replace_state(self, state: Mapping[str, Any]) -> State:
        """Replaces the whole state with ``state`` and returns it (as stored). Hooks see
        ``patch=None``. Same transaction, hook and error rules as :meth:`set_state`."""
        data = encode_state(state, "state")
        handle = self._handle
        if not handle:
            raise ClosedError("the agent is closed")
        return decode_state(call_text(_native._hot_replace_state, handle, data, len(data)))

    def set_state_json(self, patch: Union[str, bytes]) -> str:
        """:meth:`set_state` with raw JSON text in and out (malformed text raises
        :class:`~agent_state.JSONError`)."""
        data = json_text(patch, "patch")
        return call_text(_native._hot_set_state, self._h(), data, len(data))

    def replace_state_json(self, state: Union[str, bytes]) -> str:
        """:meth:`replace_state` with raw JSON text in and out."""
        data = json_text(state, "state")
        return call_text(_native._hot_replace_state, self._h(), data, len(data))

    # -- hooks ---------------------------------------------------------------------------------

    def on_state_changed(self, callback: StateChangedCallback) -> Hook:
        """Registers ``callback(next, prev, patch)`` to run after every committed change made
        through this agent, from any thread; usable as a decorator.

        Delivery is on the thread that made the change, after the commit, in commit order
        (each ``prev`` is the previous ``next``), hooks in registration order. ``patch`` is the
        merge patch, or ``None`` for :meth:`replace_state`. A hook may read and change the
        state (a nested change is delivered after the hook returns), register or remove hooks
        and close the agent. An exception it raises makes the triggering call raise
        :class:`~agent_state.HookError` after the commit.

        Returns a :class:`Hook`, whose ``remove()`` unregisters the callback.
        """
        if not callable(callback):
            raise TypeError(f"the hook must be callable, not {type(callback).__name__}")
        handle = self._h()
        key = _register(callback)
        hook_id = ctypes.c_uint64(0)
        # On failure the library has already called _FREE_TRAMPOLINE(key): nothing to undo.
        _native.library().agent_on_state_changed(
            handle, _STATE_CHANGED_TRAMPOLINE, key, _FREE_TRAMPOLINE, ctypes.byref(hook_id)
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
            lib.agent_set_initial_state_hook(handle, _NULL_INITIAL_STATE, None, _NULL_FREE)
            return
        if not callable(callback):
            raise TypeError(f"the initial-state hook must be callable, not {type(callback).__name__}")
        key = _register(callback)
        lib.agent_set_initial_state_hook(handle, _INITIAL_STATE_TRAMPOLINE, key, _FREE_TRAMPOLINE)
