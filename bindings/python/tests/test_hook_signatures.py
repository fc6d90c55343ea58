"""Hooks and validators of the forms a user writes: the reference's ``onStateChanged(next,
prev)`` as well as ``(next, prev, patch)`` and ``(change)``, sync and ``async def``; a callable
that cannot be called any accepted way refused at registration with a TypeError naming the
forms; and a failing hook's HookError saying what it raised."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from agent_state import Agent, AsyncAgent, Change, HookError, RejectedError

State = Dict[str, Any]


def test_on_state_changed_takes_the_reference_signature(mem: Agent) -> None:
    seen: List[Tuple[State, State]] = []

    @mem.on_state_changed
    def changed(next: State, prev: State) -> None:  # onStateChanged(next, prev)
        seen.append((next, prev))

    assert mem.set_state({"status": "processing"}) == {"status": "processing"}
    mem.replace_state({"status": "idle"})
    assert seen == [({"status": "processing"}, {}), ({"status": "idle"}, {"status": "processing"})]


def test_every_accepted_form_gets_its_arguments(mem: Agent) -> None:
    seen: List[Tuple[str, Tuple[Any, ...]]] = []

    class Receiver:
        def two(self, next: State, prev: State) -> None:
            seen.append(("method", (next, prev)))

        def __call__(self, next: State, prev: State, patch: Optional[State]) -> None:
            seen.append(("instance", (next, prev, patch)))

    def tagged(tag: str, *args: Any) -> None:
        seen.append((tag, args))

    def with_default(next: State, prev: State, patch: Optional[State] = None, extra: int = 0) -> None:
        seen.append(("default", (next, prev, patch)))

    mem.on_state_changed(Receiver().two)
    mem.on_state_changed(Receiver())
    mem.on_state_changed(functools.partial(tagged, "partial"))  # *args: the three of today
    mem.on_state_changed(with_default)
    mem.on_state_changed(lambda next, prev: seen.append(("lambda", (next, prev))))
    mem.on_change(lambda change: seen.append(("change", (change,))))
    mem.on_change(lambda next, prev: seen.append(("on_change 2", (next, prev))))
    mem.on_change(lambda next, prev, patch: seen.append(("on_change 3", (next, prev, patch))))
    mem.set_state({"a": 1})
    n, p, d = {"a": 1}, {}, {"a": 1}
    assert seen == [
        ("method", (n, p)),
        ("instance", (n, p, d)),
        ("partial", (n, p, d)),
        ("default", (n, p, d)),
        ("lambda", (n, p)),
        ("change", (Change(n, p, d, 1),)),
        ("on_change 2", (n, p)),
        ("on_change 3", (n, p, d)),
    ]


class _NoSignature:
    """A callable whose signature cannot be read (as some builtins): called the documented
    default way."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Any, ...]] = []

    @property
    def __signature__(self) -> inspect.Signature:
        raise ValueError("no signature found")

    def __call__(self, *args: Any) -> None:
        self.calls.append(args)


def test_a_callable_without_a_signature_is_called_the_default_way(mem: Agent) -> None:
    with pytest.raises(ValueError):
        inspect.signature(_NoSignature())
    hook, change_hook, validator = _NoSignature(), _NoSignature(), _NoSignature()
    mem.on_state_changed(hook)
    mem.on_change(change_hook)
    mem.set_validator(validator)
    mem.on_state_changed(print)  # a builtin, whether or not this Python gives it a signature
    mem.set_state({"a": 1})
    assert hook.calls == [({"a": 1}, {}, {"a": 1})]
    assert change_hook.calls == [(Change({"a": 1}, {}, {"a": 1}, 1),)]
    assert validator.calls == [(Change({"a": 1}, {}, {"a": 1}, 1),)]


def _hook_count(agent: Agent) -> int:
    return len(agent._callbacks)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: None,
        lambda next: None,
        lambda a, b, c, d: None,
        lambda next, prev, *, patch: None,
    ],
    ids=["none", "one", "four", "keyword-only"],
)
def test_a_hook_of_another_signature_is_refused_at_registration(mem: Agent, bad: Callable[..., Any]) -> None:
    before = _hook_count(mem)
    with pytest.raises(TypeError) as info:
        mem.on_state_changed(bad)
    message = str(info.value)
    assert "on_state_changed takes a callable of the form fn(next, prev, patch) or fn(next, prev)" in message
    assert "<lambda>(" in message
    assert _hook_count(mem) == before  # nothing registered
    mem.set_state({"ok": True})  # and writes go on without a HookError


def test_a_one_argument_hook_is_pointed_at_on_change(mem: Agent) -> None:
    def changed(change: Change) -> None: ...

    with pytest.raises(TypeError, match=r"; changed\(change: 'Change'\) -> 'None' cannot be called that way \(a callable of the Change alone goes to on_change\)"):
        mem.on_state_changed(changed)


def test_on_change_and_the_validator_refuse_what_they_cannot_call(mem: Agent) -> None:
    with pytest.raises(TypeError, match=r"on_change takes a callable of the form fn\(change\) or fn\(next, prev, patch\) or fn\(next, prev\)"):
        mem.on_change(lambda: None)
    with pytest.raises(TypeError, match=r"validator takes a callable of the form fn\(change\)"):
        mem.set_validator(lambda a, b, c, d: None)
    mem.set_state({"ok": True})


def test_a_validator_of_next_and_prev_rejects_by_raising(mem: Agent) -> None:
    @mem.set_validator
    def no_overdraft(next: State, prev: State) -> None:
        if next.get("balance", 0) < 0:
            raise ValueError(f"balance would be {next['balance']}")

    mem.set_state({"balance": 5})
    with pytest.raises(RejectedError, match="balance would be -1"):
        mem.set_state({"balance": -1})
    assert mem.get_state() == {"balance": 5}


def test_a_failing_hook_says_what_it_raised(mem: Agent) -> None:
    @mem.on_state_changed
    def broadcast(next: State, prev: State) -> None:
        raise RuntimeError("websocket send failed")

    with pytest.raises(HookError) as info:
        mem.set_state({"n": 1})
    text = str(info.value)
    assert "on_state_changed hook" in text and "raised RuntimeError: websocket send failed" in text
    assert "returned 1" not in text
    assert isinstance(info.value.__cause__, RuntimeError) and info.value.exceptions == [info.value.__cause__]
    assert mem.get_state() == {"n": 1}  # committed all the same

    @mem.on_change
    def second(change: Change) -> None:
        raise KeyError("k")

    with pytest.raises(HookError) as info:
        mem.set_state({"n": 2})
    assert "raised RuntimeError: websocket send failed (and 1 more: see .exceptions)" in str(info.value)
    assert [type(e) for e in info.value.exceptions] == [RuntimeError, KeyError]


def test_a_hook_raising_an_exception_without_a_message_is_named(mem: Agent) -> None:
    def empty(next: State, prev: State) -> None:
        raise TimeoutError

    mem.on_state_changed(empty)
    with pytest.raises(HookError, match=r"raised TimeoutError \[AGENT_ERR_HOOK\]"):
        mem.set_state({"n": 1})


def test_an_initial_state_hook_failure_says_what_it_raised(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent(initial_state=lambda: {"n": 1 // 0})
    with pytest.raises(HookError, match="raised ZeroDivisionError: integer division or modulo by zero") as info:
        agent.get_state()
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.any_backend
def test_async_agent_hooks_of_every_form(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()
    seen: List[Tuple[str, Tuple[Any, ...]]] = []

    async def coroutine_two(next: State, prev: State) -> None:
        seen.append(("async 2", (next, prev)))

    async def coroutine_three(next: State, prev: State, patch: Optional[State]) -> None:
        seen.append(("async 3", (next, prev, patch)))

    async def coroutine_change_two(next: State, prev: State) -> None:
        seen.append(("async on_change 2", (next, prev)))

    def plain_two(next: State, prev: State) -> None:
        seen.append(("plain 2", (next, prev)))

    async def one(next: State) -> None: ...

    async def main() -> None:
        a.on_state_changed(plain_two)
        a.on_state_changed(coroutine_two)
        a.on_state_changed(coroutine_three)
        a.on_change(coroutine_change_two)
        with pytest.raises(TypeError, match=r"on_state_changed takes a callable of the form"):
            a.on_state_changed(one)
        with pytest.raises(TypeError, match=r"on_change takes a callable of the form"):
            a.on_change(lambda: None)
        await a.set_state({"a": 1})

    asyncio.run(main())
    n, p = {"a": 1}, {}
    assert seen == [
        ("plain 2", (n, p)),
        ("async 2", (n, p)),
        ("async 3", (n, p, {"a": 1})),
        ("async on_change 2", (n, p)),
    ]


@pytest.mark.any_backend
def test_async_agent_hook_errors_say_what_was_raised(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()

    async def broadcast(next: State, prev: State) -> None:
        raise RuntimeError("websocket send failed")

    def plain(next: State, prev: State) -> None:
        raise RuntimeError("plain send failed")

    async def main() -> None:
        with a.on_state_changed(broadcast):
            with pytest.raises(HookError, match="RuntimeError: websocket send failed") as info:
                await a.set_state({"n": 1})
            assert isinstance(info.value.__cause__, RuntimeError)
        with a.on_state_changed(plain):
            with pytest.raises(HookError, match="raised RuntimeError: plain send failed") as info:
                await a.set_state({"n": 2})
            assert "returned 1" not in str(info.value)

    asyncio.run(main())
