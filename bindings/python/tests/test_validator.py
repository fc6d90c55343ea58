"""The validation gate: accept, reject (message, cause, nothing written, no hook), every kind
of write, calls into its own agent (BusyError), threads, and the lifetime of its callable."""

from __future__ import annotations

import threading
from typing import Any, List

import pytest

import agent_state
from agent_state import (
    Agent,
    BusyError,
    Change,
    BadHandleError,
    CodecError,
    ConflictError,
    HookError,
    RejectedError,
)
from agent_state import _callbacks as callbacks_module


class NegativeBalance(ValueError):
    pass


def no_negative_balance(change: Change) -> None:
    balance = change.next.get("balance", 0)
    if balance < 0:
        raise NegativeBalance(f"balance would be {balance} at version {change.version}")


def test_validator_accepts_and_rejects(open_agent) -> None:
    a = open_agent(change_log={"keep_last": 100})
    delivered: List[Change] = []
    a.on_change(delivered.append)
    old: List[Any] = []
    a.on_state_changed(lambda n, p, d: old.append(n))
    gated: List[Change] = []

    @a.set_validator
    def gate(change: Change) -> bool:
        gated.append(change)
        no_negative_balance(change)
        return False  # the return value does not matter: only raising rejects

    assert gate.__name__ == "gate"  # the decorator gives the function back
    assert a.set_state({"balance": 10}) == {"balance": 10}
    with pytest.raises(RejectedError) as e:
        a.set_state({"balance": -5})
    err = e.value
    assert err.status == agent_state.AGENT_ERR_REJECTED
    assert err.message.startswith("agent_set_state: ")
    assert "balance would be -5 at version 2" in err.message
    assert err.message.count("balance would be") == 1
    assert isinstance(err.__cause__, NegativeBalance)
    assert str(err.__cause__) in str(err)
    # The validator saw the change as it would commit.
    assert gated[1] == Change({"balance": -5}, {"balance": 10}, {"balance": -5}, 2)
    # Every kind of write is gated.
    with pytest.raises(RejectedError) as e:
        a.set_state_if(1, {"balance": -1})
    assert e.value.message.startswith("agent_set_state_if: ") and "balance would be -1" in e.value.message
    with pytest.raises(RejectedError) as e:
        a.replace_state({"balance": -2})
    assert "balance would be -2" in e.value.message and gated[-1].patch is None
    with pytest.raises(RejectedError):
        a.replace_state_if(1, {"balance": -3})
    with pytest.raises(RejectedError):
        a.set_state_json('{"balance":-4}')
    with pytest.raises(RejectedError):
        a.replace_state_json('{"balance":-6}')
    # A conflict is found before the validator runs.
    calls = len(gated)
    with pytest.raises(ConflictError):
        a.set_state_if(0, {"balance": -7})
    assert len(gated) == calls
    # Nothing of it was written, delivered or logged.
    assert a.get_state_versioned() == ({"balance": 10}, 1)
    assert [c.version for c in delivered] == [1] and old == [{"balance": 10}]
    assert [c.version for c in a.changes_since(0)] == [1]
    # Codec and size checks come first: a malformed value never reaches the gate.
    with pytest.raises(CodecError):
        a.set_state_json('{"d":{"$date":"x"}}')
    assert len(gated) == calls
    # Other agents are not gated by it.
    b = open_agent()
    assert b.set_state({"balance": -7}) == {"balance": -7}
    # Removed, it gates nothing.
    assert a.set_validator(None) is None
    assert a.set_state({"balance": -8}) == {"balance": -8}


def test_rejection_messages(mem: Agent) -> None:
    def reject_with(exc: BaseException) -> RejectedError:
        def gate(change: Change) -> None:
            raise exc

        mem.set_validator(gate)
        with pytest.raises(RejectedError) as e:
            mem.set_state({"x": 1})
        assert e.value.__cause__ is exc
        return e.value

    # An exception with no text still rejects, with its type name as the reason.
    assert reject_with(PermissionError()).message.endswith(": PermissionError")
    assert "'missing'" in reject_with(KeyError("missing")).message
    assert "caf\u00e9 \u2603" in reject_with(ValueError("caf\u00e9 \u2603")).message
    assert "\\ud800" in reject_with(ValueError("lone \ud800")).message  # not valid UTF-8: escaped

    class BadStr(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    assert reject_with(BadStr()).message.endswith(": BadStr")
    # A validator that fails by accident (a bug in it) rejects too.
    mem.set_validator(lambda change: change.next["absent"])
    with pytest.raises(RejectedError) as e:
        mem.set_state({"x": 1})
    assert isinstance(e.value.__cause__, KeyError)
    mem.set_validator(None)
    assert mem.get_state_versioned() == ({}, 0)


def test_base_exceptions_reject_and_propagate_as_themselves(mem: Agent) -> None:
    class Stop(BaseException):
        pass

    def gate(change: Change) -> None:
        raise Stop()

    mem.set_validator(gate)
    with pytest.raises(Stop):
        mem.set_state({"x": 1})
    assert mem.get_state_versioned() == ({}, 0)  # rejected: nothing written


def test_calls_into_its_own_agent_from_the_validator_are_busy(open_agent) -> None:
    a = open_agent(change_log={"keep_last": 10})
    other = open_agent(":memory:", initial_state={"other": True})
    for i in range(1, 4):
        a.set_state({"i": i})
    inner: List[BaseException] = []
    seen_other: List[Any] = []

    def gate(change: Change) -> None:
        for call in (
            a.get_state,
            lambda: a.get_state_versioned(),
            lambda: a.set_state({"nested": 1}),
            a.poll,
            lambda: a.set_validator(None),
            a.close,
        ):
            try:
                call()
            except BusyError as e:
                inner.append(e)
        seen_other.append(other.get_state())  # another agent may be used
        if change.patch is None:
            raise RuntimeError("no restores today")

    a.set_validator(gate)
    with pytest.raises(RejectedError) as e:
        a.restore(1)
    assert e.value.message.startswith("agent_restore_state: ") and "no restores today" in e.value.message
    assert len(inner) == 6 and all(isinstance(x, BusyError) for x in inner)
    assert seen_other == [{"other": True}]
    assert not a.closed
    assert a.get_state_versioned() == ({"i": 3}, 3)
    # An uncaught BusyError from inside rejects the change, as any exception does.
    a.set_validator(lambda change: a.get_state())
    with pytest.raises(RejectedError) as e:
        a.set_state({"i": 4})
    assert isinstance(e.value.__cause__, BusyError)
    a.set_validator(None)
    assert a.set_state({"i": 4}) == {"i": 4}


def test_rejection_runs_no_hook_and_hook_errors_stay_hook_errors(mem: Agent) -> None:
    calls: List[int] = []

    @mem.on_change
    def hook(change: Change) -> None:
        calls.append(change.version)
        if change.next.get("fail"):
            raise LookupError("hook failed")

    mem.set_validator(no_negative_balance)
    with pytest.raises(RejectedError):
        mem.set_state({"balance": -1})
    assert calls == []
    with pytest.raises(HookError) as e:  # accepted, committed, then the hook fails
        mem.set_state({"balance": 1, "fail": True})
    assert isinstance(e.value.__cause__, LookupError) and e.value.exceptions == [e.value.__cause__]
    assert calls == [1] and mem.get_state() == {"balance": 1, "fail": True}


def test_a_hook_whose_nested_write_is_rejected(mem: Agent) -> None:
    """A rejection inside a hook belongs to the nested write, not to the outer call."""
    mem.set_validator(no_negative_balance)
    caught: List[RejectedError] = []

    @mem.on_change
    def hook(change: Change) -> None:
        if change.next.get("balance") == 1:
            try:
                mem.set_state({"balance": -1})
            except RejectedError as e:
                caught.append(e)

    assert mem.set_state({"balance": 1}) == {"balance": 1}
    assert len(caught) == 1 and isinstance(caught[0].__cause__, NegativeBalance)


def test_rejections_go_to_their_own_call_across_threads(mem: Agent) -> None:
    def gate(change: Change) -> None:
        assert change.patch is not None
        for key, value in change.patch.items():
            if value % 3 == 0:
                raise ValueError(f"refused {key}={value}")

    mem.set_validator(gate)
    threads_, writes = 8, 30
    problems: List[str] = []
    start = threading.Barrier(threads_)

    def writer(t: int) -> None:
        start.wait()
        key = f"t{t}"
        for i in range(1, writes + 1):
            try:
                mem.set_state({key: i})
                if i % 3 == 0:
                    problems.append(f"{key}={i} was accepted")
            except RejectedError as e:
                want = f"refused {key}={i}"
                if i % 3 or want not in e.message or str(e.__cause__) != want:
                    problems.append(f"{key}={i}: {e!r} caused by {e.__cause__!r}")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(threads_)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert problems == []
    assert mem.get_state_versioned().version == threads_ * (writes - writes // 3)


def test_validator_callables_are_released(open_agent) -> None:
    table = callbacks_module.tables
    before = set(table)
    a = open_agent(":memory:")
    for _ in range(20):
        a.set_validator(lambda change: None)
    assert len(set(table) - before) == 1  # each replaced one was freed
    a.set_validator(None)
    assert set(table) == before
    with pytest.raises(TypeError):
        a.set_validator("not callable")  # type: ignore[arg-type]
    assert set(table) == before
    a.set_validator(lambda change: None)
    a.close()
    assert set(table) == before
    with pytest.raises(BadHandleError):
        a.set_validator(lambda change: None)
    assert set(table) == before
    # A failed registration through the C API frees the key it was given.
    callables = callbacks_module.CallbackTable()
    key = callbacks_module.register(callables, lambda change: None)
    with pytest.raises(BadHandleError):
        agent_state._native.library().agent_set_validator(
            0xDEAD, callbacks_module.VALIDATE_TRAMPOLINE, key, callbacks_module.FREE_TRAMPOLINE
        )
    assert key not in table and key not in callables
