"""AsyncAgent: the coroutine API over the sync Agent, on one bounded thread pool, with asyncio
cancellation mapped to the library's cancel tokens (issue 22)."""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from agent_state import Agent, AsyncAgent, AsyncHook, ConflictError, RejectedError
from agent_state import _native
from agent_state.async_agent import POOL_SIZE

Where = Callable[[Any], Tuple[Any, Dict[str, Any]]]


@pytest.fixture
def open_async(tmp_path: Path, store_of: Where) -> Iterator[Callable[..., AsyncAgent]]:
    """Opens AsyncAgents on the store ``name`` names (in tmp_path, or on the server) and closes
    them afterwards."""
    opened: List[AsyncAgent] = []

    def _open(name: str = "agent.db", **options: Any) -> AsyncAgent:
        target, extra = store_of(tmp_path / name)
        options.setdefault("synchronous", "normal")
        agent = AsyncAgent(target, **{**extra, **options})
        opened.append(agent)
        return agent

    yield _open
    for agent in opened:
        agent.sync.close()


def _sync_twin(store_of: Where, tmp_path: Path, name: str = "agent.db", **options: Any) -> Agent:
    target, extra = store_of(tmp_path / name)
    return Agent(target, synchronous="normal", **{**extra, **options})


@pytest.mark.any_backend
def test_the_methods_round_trip(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async(initial_state={"status": "idle"}, change_log={"keep_last": 100})
    seen: List[Any] = []
    a.on_state_changed(lambda n, p, d: seen.append((threading.current_thread().name, n)))

    async def main() -> None:
        async with a:
            assert await a.get_state() == {"status": "idle"}
            assert await a.set_state({"turn": 1}) == {"status": "idle", "turn": 1}
            assert await a.replace_state({"status": "done"}) == {"status": "done"}
            assert await a.get_state_json() == '{"status":"done"}'
            assert await a.set_state_json('{"x":1}') == '{"status":"done","x":1}'
            assert await a.replace_state_json('{"y":2}') == '{"y":2}'
            state, version = await a.get_state_versioned()
            assert (state, version) == ({"y": 2}, 4)
            assert tuple(await a.set_state_if(4, {"z": 3})) == ({"y": 2, "z": 3}, 5)
            with pytest.raises(ConflictError):
                await a.set_state_if(4, {"z": 4})
            assert tuple(await a.replace_state_if(5, {"w": 0})) == ({"w": 0}, 6)
            assert [c.version for c in await a.changes_since(4)] == [5, 6]
            assert (await a.changes_since_json(6)) == "[]"
            assert await a.state_at(5) == {"y": 2, "z": 3}
            assert tuple(await a.restore(5)) == ({"y": 2, "z": 3}, 7)
            assert await a.poll() == 0
        assert a.closed
        await a.aclose()  # idempotent

    asyncio.run(main())
    assert len(seen) == 7
    # Hooks run on the pool's worker threads.
    assert all(name.startswith("agent_state-async") for name, _ in seen)
    assert "AsyncAgent" in repr(a) and "closed" in repr(a)


@pytest.mark.any_backend
def test_validator_rejects_and_coroutine_hooks_are_taken(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()

    def no_negative(change: Any) -> None:
        if change.next.get("n", 0) < 0:
            raise ValueError("negative")

    a.set_validator(no_negative)

    async def hook(n: Any, p: Any, d: Any) -> None:
        pass

    # Coroutine hooks are taken since issue 22 (test_async_hooks.py); only the validator and
    # the initial-state hook refuse coroutine functions (TypeError, also tested there).
    assert isinstance(a.on_state_changed(hook), AsyncHook)

    async def change_hook(change: Any) -> None:
        pass

    assert isinstance(a.on_change(change_hook), AsyncHook)
    with pytest.raises(TypeError):
        a.set_validator(hook)

    async def main() -> None:
        with pytest.raises(RejectedError):
            await a.set_state({"n": -1})
        assert await a.set_state({"n": 1}) == {"n": 1}

    asyncio.run(main())


@pytest.mark.any_backend
def test_a_thousand_coroutines_on_a_hundred_agents_use_a_bounded_pool(open_async: Callable[..., AsyncAgent]) -> None:
    agents = [open_async(f"a{i}.db") for i in range(100)]
    threads_before = threading.active_count()
    peak = [0]

    async def one(i: int) -> None:
        a = agents[i % len(agents)]
        await a.set_state({f"k{i}": i})
        assert (await a.get_state())[f"k{i}"] == i
        peak[0] = max(peak[0], threading.active_count())

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(1000)))

    asyncio.run(main())
    print(f"threads: {threads_before} before, peak {peak[0]}, pool size {POOL_SIZE}")
    assert peak[0] <= threads_before + POOL_SIZE + 2
    for i, a in enumerate(agents):
        assert len(a.sync.get_state()) == 10, i


class Holder:
    """A second sync handle on the same store whose write holds the store's lock (its
    validator blocks on an event) until release(). On PostgreSQL a write takes the row lock
    before its transaction's work only under a cancel token, so the holder's write runs under
    one."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.inside = threading.Event()
        self.go = threading.Event()

        def block(change: Any) -> None:
            self.inside.set()
            self.go.wait(30)

        agent.set_validator(block)
        self.thread = threading.Thread(target=self._write)
        self.thread.start()
        assert self.inside.wait(30), "the holder's write did not start"

    def _write(self) -> None:
        lib = _native.library()
        token = ctypes.c_uint64(0)
        lib.agent_cancel_new(-1, ctypes.byref(token))
        lib.agent_cancel_bind(token.value)
        try:
            self.agent.set_state({"holder": True})
        finally:
            lib.agent_cancel_bind(0)
            lib.agent_cancel_free(token.value)

    def release(self) -> None:
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


@pytest.mark.any_backend
def test_a_waiting_write_is_cancelled_by_wait_for_and_by_task_cancel(
    open_async: Callable[..., AsyncAgent], store_of: Where, tmp_path: Path
) -> None:
    a = open_async(busy_timeout_ms=30_000)
    other = _sync_twin(store_of, tmp_path)
    try:
        holder = Holder(other)
        try:

            async def main() -> None:
                start = time.monotonic()
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(a.set_state({"w": 1}), timeout=0.2)
                took = time.monotonic() - start
                print(f"wait_for: cancelled after {took * 1000:.0f} ms")
                assert took < 5

                task = asyncio.ensure_future(a.set_state({"w": 2}))
                await asyncio.sleep(0.2)
                assert not task.done()
                start = time.monotonic()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                print(f"task.cancel: ended {(time.monotonic() - start) * 1000:.0f} ms after the cancel")
                assert time.monotonic() - start < 5

            asyncio.run(main())
        finally:
            holder.release()

        async def after() -> None:
            state = await a.get_state()
            assert state == {"holder": True}, "a cancelled write wrote"
            assert await a.set_state({"w": 3}) == {"holder": True, "w": 3}
            assert (await a.get_state_versioned()).version == 2

        asyncio.run(after())
    finally:
        other.close()


@pytest.mark.any_backend
def test_the_loop_is_not_blocked_while_writes_wait_for_a_lock(
    open_async: Callable[..., AsyncAgent], store_of: Where, tmp_path: Path
) -> None:
    a = open_async(busy_timeout_ms=30_000)
    other = _sync_twin(store_of, tmp_path)
    holder = Holder(other)
    try:

        async def main() -> float:
            stop = asyncio.Event()
            largest = [0.0]

            async def heartbeat() -> None:
                last = time.monotonic()
                while not stop.is_set():
                    await asyncio.sleep(0.005)
                    now = time.monotonic()
                    largest[0] = max(largest[0], now - last)
                    last = now

            beat = asyncio.ensure_future(heartbeat())
            writes = [asyncio.ensure_future(a.set_state({f"w{i}": i})) for i in range(50)]
            await asyncio.sleep(1.0)  # the lock is held all this time
            assert not any(w.done() for w in writes)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, holder.release)
            await asyncio.gather(*writes)
            stop.set()
            await beat
            return largest[0]

        gap = asyncio.run(main())
        print(f"largest gap between heartbeats while 50 writes waited ~1 s for the lock: {gap * 1000:.1f} ms")
        assert gap < 0.2
        assert len(a.sync.get_state()) == 51
    finally:
        holder.release()
        other.close()


@pytest.mark.any_backend
def test_cancelling_running_and_queued_calls_writes_nothing(
    open_async: Callable[..., AsyncAgent], store_of: Where, tmp_path: Path
) -> None:
    # More writes than the pool has workers: some wait for the lock on a worker (their token
    # is fired), the rest wait in the pool's queue (they never run).
    a = open_async(busy_timeout_ms=30_000)
    other = _sync_twin(store_of, tmp_path)
    holder = Holder(other)
    try:

        async def main() -> None:
            writes = [asyncio.ensure_future(a.set_state({f"w{i}": i})) for i in range(POOL_SIZE + 4)]
            await asyncio.sleep(0.3)
            for w in writes:
                w.cancel()
            results = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), timeout=10)
            assert all(isinstance(r, asyncio.CancelledError) for r in results), results

        asyncio.run(main())
        holder.release()

        async def after() -> None:
            assert await a.get_state_versioned() == ({"holder": True}, 1)
            assert await a.set_state({"after": 1}) == {"holder": True, "after": 1}

        asyncio.run(after())
    finally:
        holder.release()
        other.close()
