"""on_state_changed and initial-state hooks: order, arguments, exceptions, removal, lifetime."""

from __future__ import annotations

import ctypes
import gc
import weakref
from typing import Any, List

import pytest

import agent_state
from agent_state import Agent, BusyError, BadHandleError, CodecError, Hook, HookError, JSSet
from agent_state import _callbacks as callbacks_module


def table() -> dict:
    """The binding's registered keys (user_data), each to its agent's table of callables."""
    return callbacks_module.tables


def test_hooks_run_in_registration_order_with_next_prev_patch(mem: Agent) -> None:
    calls: List[Any] = []
    mem.on_state_changed(lambda n, p, d: calls.append(("first", n, p, d)))
    mem.on_state_changed(lambda n, p, d: calls.append(("second", n, p, d)))
    mem.set_state({"a": 1})
    assert calls == [("first", {"a": 1}, {}, {"a": 1}), ("second", {"a": 1}, {}, {"a": 1})]
    calls.clear()
    mem.set_state({"a": None, "b": {"c": {1, 2}}})
    n = {"b": {"c": JSSet([1, 2])}}
    assert calls[0] == ("first", n, {"a": 1}, {"a": None, "b": {"c": JSSet([1, 2])}})
    calls.clear()
    mem.replace_state({"r": True})
    assert [c[0] for c in calls] == ["first", "second"]
    assert calls[0][1:] == ({"r": True}, n, None)  # patch is None for replace_state


def test_prev_is_the_initial_state_on_first_write(agent: Agent) -> None:
    seen = []
    agent.on_state_changed(lambda n, p, d: seen.append(p))
    agent.set_state({"at": 5})
    assert seen == [{"status": "idle", "lastReply": "", "at": 0}]


def test_decorator_returns_a_callable_handle(mem: Agent) -> None:
    seen = []

    @mem.on_state_changed
    def changed(next, prev, patch):  # noqa: A002
        seen.append(next)
        return "returned"

    assert isinstance(changed, Hook) and changed.active and changed.id > 0
    assert changed({"x": 1}, {}, None) == "returned"  # still callable as the function
    assert "active" in repr(changed)
    mem.set_state({"y": 2})
    assert seen == [{"x": 1}, {"y": 2}]


def test_removal_via_the_handle(mem: Agent) -> None:
    seen = []
    keep = mem.on_state_changed(lambda n, p, d: seen.append("keep"))
    gone = mem.on_state_changed(lambda n, p, d: seen.append("gone"))
    mem.set_state({"a": 1})
    assert gone.remove() is True
    assert gone.remove() is False  # idempotent
    assert not gone.active and gone._key not in table()
    mem.set_state({"a": 2})
    assert seen == ["keep", "gone", "keep"]
    assert mem.remove_hook(keep) is True
    mem.set_state({"a": 3})
    assert seen == ["keep", "gone", "keep"]
    with mem.on_state_changed(lambda n, p, d: seen.append("scoped")) as scoped:
        mem.set_state({"a": 4})
    assert not scoped.active
    mem.set_state({"a": 5})
    assert seen[-1] == "scoped" and seen.count("scoped") == 1
    with Agent(":memory:") as other:
        with pytest.raises(agent_state.InvalidArgumentError):
            other.remove_hook(keep)


def test_close_releases_every_hook(open_agent) -> None:
    a = open_agent()
    hooks = [a.on_state_changed(lambda n, p, d: None) for _ in range(5)]
    a.set_initial_state_hook(lambda: {})
    keys = {h._key for h in hooks}
    assert keys <= set(table())
    before = len(table())
    a.close()
    assert not keys & set(table())
    assert len(table()) == before - 6
    assert all(not h.active for h in hooks)
    assert hooks[0].remove() is False


def test_free_user_data_runs_exactly_once_per_registration(mem: Agent) -> None:
    """Registers through the C API with a counting finalizer: failed registration, removal and
    close each free user_data exactly once."""
    lib = agent_state._native.library()
    freed: List[int] = []
    free = agent_state._native.FREE_FN(lambda user_data: freed.append(user_data))
    noop = agent_state._native.STATE_CHANGED_FN(lambda user_data, change: 0)
    out = ctypes.c_uint64(99)
    with pytest.raises(BadHandleError):
        lib.agent_on_state_changed(0xDEAD, noop, 1, free, ctypes.byref(out))
    assert freed == [1] and out.value == 0
    lib.agent_on_state_changed(mem._handle, noop, 2, free, ctypes.byref(out))
    mem.set_state({"a": 1})
    lib.agent_remove_hook(mem._handle, out.value)
    assert freed == [1, 2]
    with pytest.raises(agent_state.InvalidArgumentError):
        lib.agent_remove_hook(mem._handle, out.value)
    lib.agent_on_state_changed(mem._handle, noop, 3, free, ctypes.byref(out))
    null_initial = agent_state._native.INITIAL_STATE_FN()
    lib.agent_set_initial_state_hook(mem._handle, null_initial, 4, free)  # NULL fn: freed at once
    assert freed == [1, 2, 4]
    with pytest.raises(agent_state.InvalidArgumentError):  # NULL fn
        lib.agent_on_state_changed(mem._handle, agent_state._native.STATE_CHANGED_FN(), 5, free, ctypes.byref(out))
    with pytest.raises(agent_state.InvalidArgumentError):  # NULL out_id
        lib.agent_on_state_changed(mem._handle, noop, 6, free, None)
    initial = agent_state._native.INITIAL_STATE_FN(lambda user_data, buf: 1)
    with pytest.raises(BadHandleError):
        lib.agent_set_initial_state_hook(0xDEAD, initial, 7, free)
    assert freed == [1, 2, 4, 5, 6, 7]
    lib.agent_set_initial_state_hook(mem._handle, initial, 8, free)
    lib.agent_set_initial_state_hook(mem._handle, initial, 9, free)  # replaces 8
    assert freed == [1, 2, 4, 5, 6, 7, 8]
    mem.close()
    assert sorted(freed[7:]) == [3, 9] and len(freed) == 9
    # And the binding's own table: a registration that fails leaves no entry behind.
    callables = callbacks_module.CallbackTable()
    key = callbacks_module.register(callables, lambda n, p, d: None)
    with pytest.raises(BadHandleError):
        lib.agent_on_state_changed(
            0xDEAD, callbacks_module.STATE_CHANGED_TRAMPOLINE, key, callbacks_module.FREE_TRAMPOLINE, ctypes.byref(out)
        )
    assert key not in table() and key not in callables


def test_hook_exception_is_raised_after_commit(mem: Agent) -> None:
    order = []

    @mem.on_state_changed
    def bad(n, p, d):
        order.append("bad")
        raise KeyError("boom")

    @mem.on_state_changed
    def good(n, p, d):
        order.append("good")

    with pytest.raises(HookError) as e:
        mem.set_state({"x": 1})
    assert order == ["bad", "good"]  # later hooks still run
    assert isinstance(e.value.__cause__, KeyError) and e.value.exceptions == [e.value.__cause__]
    assert mem.get_state() == {"x": 1}  # committed
    with pytest.raises(HookError):
        mem.replace_state({"y": 2})
    assert mem.get_state() == {"y": 2}
    bad.remove()
    assert mem.set_state({"z": 3}) == {"y": 2, "z": 3}


def test_every_failing_hook_is_reported(mem: Agent) -> None:
    errors = [ValueError("one"), TypeError("two")]
    for err in errors:
        mem.on_state_changed(lambda n, p, d, err=err: (_ for _ in ()).throw(err))
    with pytest.raises(HookError) as e:
        mem.set_state({"a": 1})
    assert e.value.exceptions == errors and e.value.__cause__ is errors[0]


def test_base_exceptions_propagate_as_themselves(mem: Agent) -> None:
    class Stop(BaseException):
        pass

    mem.on_state_changed(lambda n, p, d: (_ for _ in ()).throw(Stop()))
    with pytest.raises(Stop):
        mem.set_state({"a": 1})
    assert mem.get_state() == {"a": 1}


def test_nested_changes_from_a_hook(mem: Agent) -> None:
    deliveries = []

    @mem.on_state_changed
    def counter(n, p, d):
        deliveries.append((p, n))
        if n.get("count", 0) < 3:
            # Nested change: delivered after this hook returns, still in commit order.
            inner = mem.set_state({"count": n.get("count", 0) + 1})
            assert inner["count"] == n.get("count", 0) + 1
            assert len(deliveries) == n.get("count", 0) + 1  # not delivered yet

    assert mem.set_state({"count": 0}) == {"count": 0}
    assert mem.get_state() == {"count": 3}
    assert [n["count"] for _, n in deliveries] == [0, 1, 2, 3]
    for (_, n), (p, _) in zip(deliveries, deliveries[1:]):
        assert p == n


def test_exceptions_of_nested_deliveries_reach_the_outer_call(mem: Agent) -> None:
    @mem.on_state_changed
    def hook(n, p, d):
        if n.get("step") == 1:
            mem.set_state({"step": 2})  # succeeds: its delivery is deferred
        elif n.get("step") == 2:
            raise RuntimeError("in the nested delivery")

    with pytest.raises(HookError) as e:
        mem.set_state({"step": 1})
    assert isinstance(e.value.__cause__, RuntimeError)
    assert mem.get_state() == {"step": 2}


def test_a_hook_may_register_remove_read_and_close(open_agent) -> None:
    a = open_agent()
    seen = []

    @a.on_state_changed
    def first(n, p, d):
        seen.append(("first", a.get_state()))
        if n.get("phase") == "register":
            a.on_state_changed(lambda n, p, d: seen.append(("late", n)))
        if n.get("phase") == "remove":
            first.remove()
        if n.get("phase") == "close":
            a.close()

    a.set_state({"phase": "register"})
    a.set_state({"phase": "remove"})
    assert ("late", {"phase": "remove"}) in seen
    a.set_state({"phase": "after"})
    assert seen[-1] == ("late", {"phase": "after"})
    b = open_agent(":memory:")
    b.on_state_changed(lambda n, p, d: b.close())
    assert b.set_state({"x": 1}) == {"x": 1}  # committed; closed by its hook afterwards
    assert b.closed
    with pytest.raises(BadHandleError):
        b.get_state()


def test_callbacks_survive_gc_stress(mem: Agent) -> None:
    counts = [0] * 50
    refs = []
    for i in range(50):
        def make(i: int):
            def callback(n, p, d):
                counts[i] += 1

            return callback

        cb = make(i)
        refs.append(weakref.ref(cb))
        mem.on_state_changed(cb)  # the handle is dropped at once
        del cb
    for round_ in range(5):
        gc.collect()
        mem.set_state({"round": round_})
    assert counts == [5] * 50
    assert all(r() is not None for r in refs)
    mem.close()
    gc.collect()
    assert all(r() is None for r in refs)  # released once the library freed them


def test_hooks_see_tagged_values_decoded(mem: Agent) -> None:
    import datetime as dt

    seen = []
    mem.on_state_changed(lambda n, p, d: seen.append(d))
    when = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    mem.set_state({"when": when, "blob": b"\x00"})
    assert seen == [{"when": when, "blob": b"\x00"}]


# -- initial-state hook ------------------------------------------------------------------------


def test_initial_state_callable(open_agent) -> None:
    calls = []

    def initial():
        calls.append(1)
        return {"status": "idle", "n": len(calls)}

    a = open_agent(initial_state=initial)
    assert a.get_state() == {"status": "idle", "n": 1}
    assert a.get_state() == {"status": "idle", "n": 2}  # called every time a default is needed
    assert a.set_state({"x": True}) == {"status": "idle", "n": 3, "x": True}
    assert a.get_state() == {"status": "idle", "n": 3, "x": True}
    assert len(calls) == 3  # not called once something is stored


def test_initial_state_hook_replaced_and_removed(open_agent) -> None:
    a = open_agent(initial_state={"from": "option"})
    before = set(table())
    a.set_initial_state_hook(lambda: {"from": "hook 1"})
    assert a.get_state() == {"from": "hook 1"}
    (key1,) = set(table()) - before
    a.set_initial_state_hook(lambda: {"from": "hook 2"})
    assert a.get_state() == {"from": "hook 2"}
    (key2,) = set(table()) - before  # hook 1's entry was freed when it was replaced
    assert key2 != key1
    a.set_initial_state_hook(None)
    assert a.get_state() == {"from": "option"}
    assert set(table()) == before


def test_initial_state_hook_may_return_tagged_values_and_raw_json(mem: Agent) -> None:
    mem.set_initial_state_hook(lambda: {"tags": {"a"}, "big": 2**64})
    assert mem.get_state() == {"tags": JSSet(["a"]), "big": 2**64}
    mem.set_initial_state_hook(lambda: '{"raw":1.50}')
    assert mem.get_state_json() == '{"raw":1.50}'


def test_initial_state_hook_failures(mem: Agent) -> None:
    def boom():
        raise LookupError("no default")

    mem.set_initial_state_hook(boom)
    with pytest.raises(HookError) as e:
        mem.get_state()
    assert isinstance(e.value.__cause__, LookupError)
    assert e.value.message.startswith("agent_get_state: hook failed")
    with pytest.raises(HookError):
        mem.set_state({"x": 1})  # the first write needs the initial state too
    mem.set_initial_state_hook(lambda: {"bad": object()})
    with pytest.raises(HookError) as e:
        mem.get_state()
    assert isinstance(e.value.__cause__, CodecError)
    mem.set_initial_state_hook(lambda: [1, 2])
    with pytest.raises(HookError) as e:
        mem.get_state()
    assert isinstance(e.value.__cause__, TypeError)
    # The library's own checks of the answer: malformed JSON is a JSON error.
    mem.set_initial_state_hook(lambda: "{")
    with pytest.raises(agent_state.JSONError):
        mem.get_state()
    mem.set_initial_state_hook(lambda: {"ok": 1})
    assert mem.set_state({"x": 1}) == {"ok": 1, "x": 1}


def test_initial_state_hook_may_not_use_its_agent(mem: Agent) -> None:
    def initial():
        mem.set_state({"nested": True})
        return {}

    mem.set_initial_state_hook(initial)
    with pytest.raises(HookError) as e:
        mem.get_state()
    assert isinstance(e.value.__cause__, BusyError)
    # Another agent may be used from inside it.
    with Agent(":memory:") as other:
        mem.set_initial_state_hook(lambda: other.set_state({"via": "other"}))
        assert mem.get_state() == {"via": "other"}


def test_hook_errors_are_attributed_to_the_call_that_caused_them(mem: Agent) -> None:
    """A nested call inside a hook gets its own hook errors, not those of the outer call."""
    fresh = Agent(":memory:")
    fresh.set_initial_state_hook(lambda: (_ for _ in ()).throw(ZeroDivisionError()))
    inner_errors = []

    @mem.on_state_changed
    def first(n, p, d):
        raise ValueError("outer hook")

    @mem.on_state_changed
    def second(n, p, d):
        try:
            fresh.get_state()
        except HookError as e:
            inner_errors.append(e)

    try:
        with pytest.raises(HookError) as e:
            mem.set_state({"a": 1})
    finally:
        fresh.close()
    assert [type(x) for x in e.value.exceptions] == [ValueError]
    assert [type(x) for x in inner_errors[0].exceptions] == [ZeroDivisionError]


def test_close_from_inside_the_initial_state_hook_is_busy_and_keeps_the_agent_open(mem: Agent) -> None:
    def initial():
        mem.close()
        return {}

    mem.set_initial_state_hook(initial)
    with pytest.raises(HookError) as e:
        mem.get_state()
    assert isinstance(e.value.__cause__, BusyError)
    assert not mem.closed
    mem.set_initial_state_hook(None)
    assert mem.get_state() == {}
