"""AsyncAgent's coroutine hooks and its change feed, none blocking the event loop: ``async def``
hooks awaited on the loop in commit order before the writer's await returns, their exceptions
as HookError, mixed with plain hooks and with writes from threads; ``async for change in
a.changes()``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

from agent_state import AsyncAgent, Change, HookError, InvalidArgumentError
from agent_state._async_hooks import AsyncHook

Where = Callable[[Any], Tuple[Any, Dict[str, Any]]]


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Waits (on the loop) until ``condition()`` holds; fails after a generous ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


@pytest.mark.any_backend
def test_a_coroutine_hook_runs_on_the_loop_before_the_writer_returns(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async(initial_state={"status": "idle"})
    seen: List[Tuple[str, Any, Any, Any]] = []
    versions: List[int] = []

    async def hook(next: Any, prev: Any, patch: Any) -> None:
        await asyncio.sleep(0)  # it really is awaited
        seen.append((threading.current_thread().name, next, prev, patch))

    async def with_version(change: Change) -> None:
        versions.append(change.version)

    async def main() -> None:
        h = a.on_state_changed(hook)
        assert isinstance(h, AsyncHook) and h.active
        a.on_change(with_version)
        assert await a.set_state({"turn": 1}) == {"status": "idle", "turn": 1}
        # Delivered before the await returned.
        assert seen == [(threading.current_thread().name, {"status": "idle", "turn": 1}, {"status": "idle"}, {"turn": 1})]
        assert await a.replace_state({"status": "done"}) == {"status": "done"}
        assert seen[-1][1:] == ({"status": "done"}, {"status": "idle", "turn": 1}, None)
        assert versions == [1, 2]
        assert h.remove() and not h.active and not h.remove()
        await a.set_state({"after": True})
        assert len(seen) == 2 and versions == [1, 2, 3]

    asyncio.run(main())
    # On the loop's thread (asyncio.run's: this one), never on a pool worker.
    assert {name for name, *_ in seen} == {threading.current_thread().name}


@pytest.mark.any_backend
def test_hook_exceptions_reach_the_writer_as_hook_error_after_the_commit(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()

    async def failing(next: Any, prev: Any, patch: Any) -> None:
        raise ValueError(f"async hook saw {next}")

    def plain(next: Any, prev: Any, patch: Any) -> None:
        raise KeyError("plain hook")

    async def main() -> None:
        with a.on_state_changed(failing):
            with pytest.raises(HookError) as info:
                await a.set_state({"n": 1})
            assert [type(e) for e in info.value.exceptions] == [ValueError]
            assert isinstance(info.value.__cause__, ValueError)
            assert await a.get_state() == {"n": 1}, "the change stays"

            a.on_state_changed(plain)
            with pytest.raises(HookError) as info:
                await a.set_state({"n": 2})
            # The plain hook ran first (on the worker, at the commit), then the coroutine one.
            assert [type(e) for e in info.value.exceptions] == [KeyError, ValueError]
        with pytest.raises(HookError) as info:
            await a.set_state({"n": 3})
        assert [type(e) for e in info.value.exceptions] == [KeyError]
        assert (await a.get_state_versioned()).version == 3

    asyncio.run(main())


@pytest.mark.any_backend
def test_a_write_from_inside_a_coroutine_hook_is_delivered_after_it(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()
    order: List[Tuple[str, int]] = []

    async def hook(change: Change) -> None:
        order.append(("start", change.version))
        if change.version == 1:
            # Awaiting a write of the same agent from its own hook: no deadlock; its change
            # is delivered once this hook returns.
            assert await a.set_state({"nested": True}) == {"outer": True, "nested": True}
            assert ("start", 2) not in order
        if change.version == 2:
            raise RuntimeError("the nested change's hook")
        order.append(("end", change.version))

    async def main() -> None:
        a.on_change(hook)
        with pytest.raises(HookError) as info:
            await a.set_state({"outer": True})
        # The outer writer waited for the nested change's hook too, and got its error.
        assert order == [("start", 1), ("end", 1), ("start", 2)]
        assert [str(e) for e in info.value.exceptions] == ["the nested change's hook"]

    asyncio.run(main())


@pytest.mark.any_backend
def test_hooks_see_commit_order_with_threads_and_coroutines_mixed(
    open_async: Callable[..., AsyncAgent], store_of: Where, tmp_path: Path
) -> None:
    # Generous waits: what is checked is the order, not how fast a loaded machine answers.
    a = open_async(busy_timeout_ms=30_000, server_timeout_ms=60_000)
    plain_seen: List[Tuple[int, Any, Any]] = []
    async_seen: List[Tuple[int, Any, Any]] = []
    plain_lock = threading.Lock()

    def plain(change: Change) -> None:
        with plain_lock:
            plain_seen.append((change.version, change.prev, change.next))

    async def coroutine(change: Change) -> None:
        await asyncio.sleep(0)
        async_seen.append((change.version, change.prev, change.next))

    threads, per_thread, coroutines, per_coroutine = 3, 15, 20, 3
    total = threads * per_thread + coroutines * per_coroutine
    thread_errors: List[BaseException] = []

    def thread_writer(t: int) -> None:
        try:
            for i in range(per_thread):
                a.sync.set_state({f"t{t}": i})  # the sync API, from a plain thread
        except BaseException as e:  # noqa: BLE001 - reported below
            thread_errors.append(e)

    async def coroutine_writer(c: int) -> None:
        for i in range(per_coroutine):
            await a.set_state({f"c{c}": i})

    async def main() -> None:
        a.on_change(plain)
        a.on_change(coroutine)
        workers = [threading.Thread(target=thread_writer, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        await asyncio.gather(*(coroutine_writer(c) for c in range(coroutines)))
        loop = asyncio.get_running_loop()
        for w in workers:
            await loop.run_in_executor(None, w.join)
        # The threads' changes are delivered on the loop too, awaited by nobody.
        await _until(lambda: len(async_seen) == total, "the coroutine hook to see every change")

    asyncio.run(main())
    assert not thread_errors, thread_errors
    for seen in (plain_seen, async_seen):
        assert [v for v, _, _ in seen] == list(range(1, total + 1))
        for (_, _, before), (_, prev, _) in zip(seen, seen[1:]):
            assert prev == before  # each prev is the previous next
    assert async_seen == plain_seen


@pytest.mark.any_backend
def test_changes_unawaited_report_to_the_loops_exception_handler(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async(busy_timeout_ms=30_000)
    reported: List[Dict[str, Any]] = []

    async def failing(change: Change) -> None:
        raise ValueError(f"v{change.version}")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        a.on_change(failing)
        loop = asyncio.get_running_loop()
        # A sync write from a thread: nobody awaits its hooks; the loop runs them.
        await loop.run_in_executor(None, lambda: a.sync.set_state({"from": "thread"}))
        await _until(lambda: len(reported) == 1, "the thread's change to be reported")
        assert str(reported[0]["exception"]) == "v1"

    asyncio.run(main())

    # With no loop left to run the coroutine hook on, a sync write says so as a HookError.
    with pytest.raises(HookError) as info:
        a.sync.set_state({"no": "loop"})
    assert "no open event loop" in str(info.value.exceptions[0])
    assert a.sync.get_state() == {"from": "thread", "no": "loop"}


@pytest.mark.any_backend
def test_changes_yields_this_agents_and_other_processes_changes_in_order(
    open_async: Callable[..., AsyncAgent], store_of: Where, tmp_path: Path
) -> None:
    a = open_async(change_log={"keep_last": 1000})
    target, extra = store_of(tmp_path / "agent.db")
    child = textwrap.dedent(
        """
        import json, sys
        from agent_state import Agent
        target, extra = sys.argv[1], json.loads(sys.argv[2])
        with Agent(target, synchronous="normal", change_log={"keep_last": 1000}, **extra) as b:
            for i in range(5):
                b.set_state({"child": i})
        """
    )
    env = dict(os.environ, PYTHONFAULTHANDLER="1")

    async def main() -> List[Change]:
        got: List[Change] = []
        largest = [0.0]
        stop = asyncio.Event()

        async def heartbeat() -> None:
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.002)
                now = time.monotonic()
                largest[0] = max(largest[0], now - last)
                last = now

        feed = a.changes(interval=0.02)  # from here on

        async def consume() -> None:
            async with feed:
                async for change in feed:
                    got.append(change)
                    if len(got) == 6:
                        break

        beat = asyncio.ensure_future(heartbeat())
        consumer = asyncio.ensure_future(consume())
        await a.set_state({"own": 1})
        loop = asyncio.get_running_loop()
        done = await loop.run_in_executor(
            None,
            lambda: subprocess.run(
                [sys.executable, "-c", child, str(target), json.dumps(extra)],
                env=env, capture_output=True, text=True, timeout=120,
            ),
        )
        assert done.returncode == 0, done.stderr
        await asyncio.wait_for(consumer, 60)
        stop.set()
        await beat
        print(f"largest loop gap while following the feed: {largest[0] * 1000:.1f} ms")
        return got

    got = asyncio.run(main())
    assert [c.version for c in got] == [1, 2, 3, 4, 5, 6]
    assert got[0].patch == {"own": 1}
    assert [c.next for c in got[1:]] == [{"own": 1, "child": i} for i in range(5)]
    assert all(c.prev == p.next for p, c in zip(got, got[1:]))
    # The iterator's hook went with it.
    assert len(a.sync._callbacks) == 0


@pytest.mark.any_backend
def test_changes_without_the_change_log_raises(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()

    async def main() -> None:
        feed = a.changes()
        with pytest.raises(InvalidArgumentError) as info:
            async for _ in feed:
                pass
        assert "change log" in str(info.value) or "change_log" in str(info.value)
        assert len(a.sync._callbacks) == 0, "a failed feed unregisters its hook"
        with pytest.raises(StopAsyncIteration):
            await feed.__anext__()

    asyncio.run(main())


def test_only_plain_functions_for_the_validator_and_initial_state(tmp_path: Path) -> None:
    a = AsyncAgent(tmp_path / "a.db")

    async def coroutine(*args: Any) -> None:
        pass

    try:
        with pytest.raises(TypeError):
            a.set_validator(coroutine)
        with pytest.raises(TypeError):
            a.set_initial_state_hook(coroutine)
        other = AsyncAgent(tmp_path / "b.db")
        try:
            foreign = other.on_change(coroutine)
            with pytest.raises(InvalidArgumentError):
                a.remove_hook(foreign)
            assert other.remove_hook(foreign)
        finally:
            other.sync.close()
    finally:
        a.sync.close()

