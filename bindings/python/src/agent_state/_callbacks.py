"""The callbacks the C library calls: module-level ``CFUNCTYPE`` trampolines (one per way of
calling a hook or a validator, one for the initial-state hook, one to free), and the tables of
the Python callables they run.

**Tables.** The library holds plain function pointers (the module-level trampolines below,
alive as long as the module) and, as ``user_data``, an integer key. The callable of a key lives
in its agent's :class:`CallbackTable`, owned by the agent: a callable that refers back to its
agent (a bound method of the agent's owner, the commonest hook) then forms a cycle that the
garbage collector frees, and the agent's finalizer closes it. The module-level :data:`tables`
maps each key to a weak proxy of its agent's table. The library calls ``free`` exactly once
per key (on removal, on close, on replacement of the initial-state hook or validator, or right
away when registering fails), which drops the key from both.

**Signals.** CPython runs a signal's Python handler (KeyboardInterrupt for SIGINT) at the next
"check" of the bytecode running on the main thread. A signal that arrives while the library
runs C code is handled at the first check of the next Python code, often a trampoline's first
instruction. An exception raised there, before the trampoline's ``try``, escapes to ctypes,
which prints it ("Exception ignored on calling ctypes callback function") and hands the library
an *uninitialised* return value: a hook then fails with a random number and, worse, a validator
accepts or rejects at random, while the interrupt is lost. So:

- each trampoline starts inside its ``try`` (:func:`_enter_inside_try`);
- its answer is decided by whether the Python callable *returned*: its call is an in-place
  list extension (``done += starmap(fn, ...)``), after which no instruction handles signals
  before the ``return``, so a signal that arrives once it has returned is handled after the
  library call instead, in the binding, and re-raised from it (the validator's acceptance
  stands; the change commits);
- its ``except`` clause records the exception in the call's frame (``frames[-1] += (exc,)``,
  which handles no signal either) and returns the failure code, before anything that could be
  interrupted.

From CPython 3.11 on, only the start of a function (``RESUME``), backward jumps and the return
of a call handle signals; the trampolines' code is laid out around that. On 3.9 and 3.10 more
instructions do: the ``done`` tests and ``_free``'s last ``except`` clause are for them. The
frame then makes the triggering call raise the exception as itself (``_native``).
"""

from __future__ import annotations

import dis
import inspect
import itertools
import sys
import warnings
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from . import _inflight, _native
from ._async_hooks import AsyncHook
from ._hook import Hook
from ._inflight import REJECTED, STEP_FAILED, tls
from ._records import CHANGE, CHANGE_KINDS, NEXT_PREV, NEXT_PREV_PATCH, STATE, STATE_FROM, Change, new_change
from .codec import encode_state, json_text
from .decoding import decode, decode_state


class CallbackTable(Dict[int, Callable[..., Any]]):
    """An agent's registered callables by key (a dict that can be weakly referenced), and its
    ``default`` encoder, which the initial-state hook's answer is encoded with."""

    __slots__ = ("proxy", "default", "__weakref__")

    def __init__(self, default: Optional[Callable[[Any], Any]] = None) -> None:
        super().__init__()
        self.proxy = weakref.proxy(self)
        self.default = default


#: Every registered key -> a weak proxy of the table holding its callable.
tables: Dict[int, Any] = {}
_keys = itertools.count(1)
_starmap = itertools.starmap


def register(table: CallbackTable, fn: Callable[..., Any]) -> int:
    """Adds ``fn`` to ``table`` under a new key, and returns the key (the ``user_data`` to give
    the library with :data:`FREE_TRAMPOLINE`)."""
    key = next(_keys)
    table[key] = fn
    tables[key] = table.proxy
    return key


def _enter_inside_try(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Makes the first instruction of ``fn`` (whose body is one ``try``) one that handles no
    signal, so that the first one that does is inside the ``try``.

    CPython 3.9 and 3.10 handle no signal before a ``SETUP_FINALLY`` (the start of a ``try``),
    so a function that starts with ``try`` is already right. From 3.11 on, a function starts
    with ``RESUME 0``, which handles signals; ``RESUME`` with the "after yield from" location (2)
    does not (so that a chain of generators is interrupted in the innermost one only). The code
    object is rewritten with that operand: same instructions, same size, same exception table.
    """
    if sys.implementation.name != "cpython":  # pragma: no cover
        return fn
    code = fn.__code__
    raw = bytearray(code.co_code)
    if sys.version_info < (3, 11):
        if raw[0] != dis.opmap["SETUP_FINALLY"]:  # pragma: no cover - a code layout bug
            raise RuntimeError(f"agent_state: {fn.__name__} must start with try")
        return fn
    resume = dis.opmap.get("RESUME")
    if raw[0] != resume or raw[1] & 3:  # pragma: no cover - an interpreter we do not know
        warnings.warn(
            f"agent_state: unknown bytecode layout on Python {sys.version.split()[0]}: a signal "
            "arriving during a library call may be lost in a callback",
            RuntimeWarning,
        )
        return fn
    raw[1] |= 2
    fn.__code__ = code.replace(co_code=bytes(raw))
    return fn


# How a hook or validator is called, chosen once, at registration, from its signature
# (call_form). The trampolines below pass the arguments of their form themselves: a wrapper
# function adapting one form to another would be Python code between the callable's return and
# the trampoline's, where a signal could turn a validator's acceptance into a rejection.

#: The forms each registration accepts, in the order they are tried; the first is the one
#: used for a callable whose signature cannot be read (some builtins).
_FORMS: Dict[str, Tuple[Tuple[str, int], ...]] = {
    "on_state_changed": ((NEXT_PREV_PATCH, 3), (NEXT_PREV, 2)),
    "on_change": ((CHANGE, 1), (NEXT_PREV_PATCH, 3), (NEXT_PREV, 2)),
    "validator": ((CHANGE, 1), (NEXT_PREV_PATCH, 3), (NEXT_PREV, 2)),
    "schema step": ((STATE, 1), (STATE_FROM, 2)),
}


def call_form(callback: Callable[..., Any], what: str) -> str:
    """How ``callback``, registered as ``what`` (``"on_state_changed"``, ``"on_change"``,
    ``"validator"`` or ``"schema step"``), is called: the first of its accepted forms its signature can be called
    with positionally. Raises :class:`TypeError` naming the accepted forms when none fits (a
    callable of one parameter given to ``on_state_changed``, say), so that the mistake shows at
    registration instead of as a failure of every write."""
    forms = _FORMS[what]
    target: Any = callback
    while isinstance(target, (Hook, AsyncHook)):  # a decorated function registered again
        target = target.callback
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # no signature to read: the documented default form
        return forms[0][0]
    for form, count in forms:
        if _binds(signature, count):
            return form
    accepted = " or ".join(f"fn({form})" for form, _ in forms)
    name = getattr(target, "__qualname__", None) or type(target).__name__
    name = name.rsplit("<locals>.", 1)[-1]  # Bot.changed, not make_bot.<locals>.Bot.changed
    hint = ""
    if what == "on_state_changed" and _binds(signature, 1):
        hint = " (a callable of the Change alone goes to on_change)"
    raise TypeError(
        f"{what} takes a callable of the form {accepted}; {name}{signature} cannot be called "
        f"that way{hint}"
    )


def _binds(signature: inspect.Signature, count: int) -> bool:
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True


def _arguments(form: str, c: Any) -> Tuple[Any, ...]:
    """The arguments of a callable of ``form`` for the borrowed ``AgentStateChange`` ``c``,
    decoded (fresh values for each callable)."""
    if form == CHANGE:
        return (_change_of(c),)
    next_state = decode_state(_native.text_at(c.next, c.next_len))
    prev_state = decode_state(_native.text_at(c.prev, c.prev_len))
    if form == NEXT_PREV:
        return (next_state, prev_state)
    # A merge patch is an object; a JSON Patch's operations are an array.
    patch = decode(_native.text_at(c.patch, c.patch_len)) if c.patch else None
    return (next_state, prev_state, patch)


def _change_of(c: Any) -> Change:
    """The :class:`~agent_state.Change` of a borrowed ``AgentStateChange``, decoded."""
    kind = CHANGE_KINDS.get(c.kind)
    return new_change(
        decode_state(_native.text_at(c.next, c.next_len)),
        decode_state(_native.text_at(c.prev, c.prev_len)),
        decode(_native.text_at(c.patch, c.patch_len)) if c.patch else None,
        c.version,
        kind,
        c.schema,
        c.migrated_from if kind == "migration" else None,
    )


# Each trampoline takes its result holders (and its form) as parameters with defaults, so they
# are bound before the first instruction (a closure would start with an instruction of its
# own before RESUME); the first statement of the try gives the call its own.


def _make_hook(form: str) -> Callable[..., int]:
    def _hook(user_data: int, change: Any, done: Any = (), form: str = form) -> int:
        try:
            done = []
            fn = tables[user_data][user_data]
            args = _arguments(form, change.contents)
            done += _starmap(fn, (args,))
            return 0
        except BaseException as exc:
            try:
                tls.frames[-1] += (exc,)
            except BaseException:  # no frame: a library worker thread (a submitted call)
                _inflight.carry(exc)
            # `done`: the hook returned before the exception (possible on 3.9 and 3.10 only).
            return 0 if done else 1

    return _hook


def _reason(exc: BaseException) -> str:
    """The text a rejection carries back to the library: ``str(exc)``, or the exception's type
    name when that is empty."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__ (an interrupt propagates: the caller carries it)
        text = ""
    return text or type(exc).__name__


def _copy(data: bytes, out: Any) -> None:
    """Hands ``data`` to the library in the buffer ``out`` (``agent_buffer_copy``)."""
    _native.library().agent_buffer_copy(data, len(data), out)


def _make_validate(form: str) -> Callable[..., int]:
    def _validate(user_data: int, change: Any, message: Any, done: Any = (), form: str = form) -> int:
        try:
            done = []
            fn = tables[user_data][user_data]
            args = _arguments(form, change.contents)
            done += _starmap(fn, (args,))
            return 0
        except BaseException as exc:
            if done:  # it returned, so it accepted; exc came after (possible on 3.9 and 3.10 only)
                try:
                    tls.frames[-1] += (exc,)
                except BaseException:  # no frame: a library worker thread (a submitted call)
                    _inflight.carry(exc)
                return 0
            try:
                tls.frames[-1] += ((REJECTED, exc),)  # the RejectedError's cause
            except BaseException:  # no frame: a library worker thread (a submitted call)
                _inflight.carry((REJECTED, exc))
            try:
                # The reason for the library's message; if this is interrupted, the library says
                # "returned 1" and the interrupt is raised all the same.
                _copy(_reason(exc).encode("utf-8", "backslashreplace"), message)
            except BaseException as late:
                try:
                    tls.frames[-1] += (late,)
                except BaseException:  # no frame: a library worker thread (a submitted call)
                    _inflight.carry(late)
            return 1

    return _validate


def _initial_state(user_data: int, out: Any, handed: Any = ()) -> int:
    # The answer counts once handed over: an interrupt before that fails the call.
    try:
        handed = []
        table = tables[user_data]
        fn = table[user_data]
        returned: Any = []
        returned += _starmap(fn, ((),))
        value = returned[0]
        if isinstance(value, (str, bytes, bytearray, memoryview)):
            data = json_text(value, "initial state")
        else:
            data = encode_state(value, "initial state", table.default)
        handed += _starmap(_copy, ((data, out),))
        return 0
    except BaseException as exc:
        try:
            tls.frames[-1] += (exc,)
        except BaseException:  # no frame: a library worker thread (a submitted call)
            _inflight.carry(exc)
        return 0 if handed else 1


def _make_schema_step(form: str) -> Callable[..., int]:
    def _schema_step(
        user_data: int,
        from_version: int,
        state: Any,
        state_len: int,
        out: Any,
        message: Any,
        handed: Any = (),
        form: str = form,
    ) -> int:
        # The upgraded state counts once handed over: an exception before that fails the step
        # (its message, "ValueError: ...", becomes the library's reason), one after it is
        # carried to the call.
        try:
            handed = []
            table = tables[user_data]
            fn = table[user_data]
            current = decode_state(_native.text_at(state, state_len))
            args = (current,) if form == STATE else (current, from_version)
            returned: Any = []
            returned += _starmap(fn, (args,))
            value = returned[0]
            data = encode_state(current if value is None else value, "the schema step's result", table.default)
            handed += _starmap(_copy, ((data, out),))
            return 0
        except BaseException as exc:
            if handed:  # possible on 3.9 and 3.10 only
                try:
                    tls.frames[-1] += (exc,)
                except BaseException:  # no frame: a library worker thread (a submitted call)
                    _inflight.carry(exc)
                return 0
            try:
                tls.frames[-1] += ((STEP_FAILED, exc),)  # the MigrationError's cause
            except BaseException:  # no frame: a library worker thread (a submitted call)
                _inflight.carry((STEP_FAILED, exc))
            try:
                _copy(_native.describe(exc).encode("utf-8", "backslashreplace"), message)
            except BaseException as late:
                try:
                    tls.frames[-1] += (late,)
                except BaseException:  # no frame: a library worker thread (a submitted call)
                    _inflight.carry(late)
            return 1

    return _schema_step


def _free(user_data: int, table: Any = None) -> None:
    # From 3.11 on, no instruction here handles signals: the release always completes.
    try:
        table = tables[user_data]
        del tables[user_data]
        del table[user_data]
    except (KeyError, ReferenceError):  # the table went with its garbage-collected agent
        pass
    except BaseException as exc:  # 3.9: an interrupt came first; finish the release, carry it
        try:
            proxy = tables.pop(user_data, None)
            owner = table if proxy is None else proxy
            if owner is not None:
                owner.pop(user_data, None)
        except ReferenceError:
            pass
        finally:
            try:
                tls.frames[-1] += (exc,)
            except BaseException:  # no frame: a library worker thread (a submitted call)
                _inflight.carry(exc)


#: The hook trampoline of each call form.
HOOK_TRAMPOLINES = {
    form: _native.STATE_CHANGED_FN(_enter_inside_try(_make_hook(form))) for form, _ in _FORMS["on_change"]
}
STATE_CHANGED_TRAMPOLINE = HOOK_TRAMPOLINES[NEXT_PREV_PATCH]
CHANGE_TRAMPOLINE = HOOK_TRAMPOLINES[CHANGE]
#: The validator trampoline of each call form.
VALIDATE_TRAMPOLINES = {
    form: _native.VALIDATE_FN(_enter_inside_try(_make_validate(form))) for form, _ in _FORMS["validator"]
}
VALIDATE_TRAMPOLINE = VALIDATE_TRAMPOLINES[CHANGE]
#: The schema step trampoline of each call form.
SCHEMA_STEP_TRAMPOLINES = {
    form: _native.SCHEMA_STEP_FN(_enter_inside_try(_make_schema_step(form))) for form, _ in _FORMS["schema step"]
}
INITIAL_STATE_TRAMPOLINE = _native.INITIAL_STATE_FN(_enter_inside_try(_initial_state))
FREE_TRAMPOLINE = _native.FREE_FN(_enter_inside_try(_free))
# NULL function pointers (a CFUNCTYPE argument does not take None).
NULL_INITIAL_STATE = _native.INITIAL_STATE_FN()
NULL_VALIDATE = _native.VALIDATE_FN()
NULL_SCHEMA_STEP = _native.SCHEMA_STEP_FN()
NULL_FREE = _native.FREE_FN()
