"""AsyncAgent: the coroutine API over the sync Agent, on one bounded thread pool, with asyncio
cancellation mapped to the library's cancel tokens, so that no call blocks the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import pytest

from agent_state import Agent, AsyncAgent, ConflictError, RejectedError
from agent_state import _native
from agent_state.async_agent import POOL_SIZE

import backends
from lock_holder import Holder
from loop_lag import LoopLag

ROOT = Path(__file__).resolve().parents[3]

Where = Callable[[Any], Tuple[Any, Dict[str, Any]]]


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

    loop_thread = threading.current_thread().name  # asyncio.run's loop runs on this thread
    asyncio.run(main())
    assert len(seen) == 7
    # Plain hooks run on the thread that made the change: never the loop's.
    assert all(name != loop_thread for name, _ in seen), seen
    assert "AsyncAgent" in repr(a) and "closed" in repr(a)


@pytest.mark.any_backend
def test_the_validator_rejects(open_async: Callable[..., AsyncAgent]) -> None:
    # (Coroutine hooks, and the refusal of a coroutine validator: test_async_hooks.py.)
    a = open_async()

    def no_negative(change: Any) -> None:
        if change.next.get("n", 0) < 0:
            raise ValueError("negative")

    a.set_validator(no_negative)

    async def main() -> None:
        with pytest.raises(RejectedError):
            await a.set_state({"n": -1})
        assert await a.set_state({"n": 1}) == {"n": 1}

    asyncio.run(main())


@pytest.mark.any_backend
def test_a_thousand_coroutines_on_a_hundred_agents_use_a_bounded_pool(open_async: Callable[..., AsyncAgent]) -> None:
    # Generous waits: what is checked is the pool's bound, not how fast a loaded machine is (on
    # PostgreSQL a thousand writes share this process's few connections).
    agents = [open_async(f"a{i}.db", busy_timeout_ms=60_000, server_timeout_ms=60_000) for i in range(100)]
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


# The child of ProcessHolder: opens the store named by argv[1] (JSON: [path, options]), starts a
# write whose validator says "inside" on stdout and then waits for a line on stdin (EOF: the
# parent is gone, the write is rejected), under a bound cancel token as Holder._write does.
_HOLDER_CHILD = textwrap.dedent(
    """
    import ctypes, json, sys
    from agent_state import Agent, _native

    target, options = json.loads(sys.argv[1])
    agent = Agent(target, synchronous="normal", **options)

    def block(change):
        print("inside", flush=True)
        if sys.stdin.readline() != "go\\n":
            raise RuntimeError("the parent went away")

    agent.set_validator(block)
    lib = _native.library()
    token = ctypes.c_uint64(0)
    lib.agent_cancel_new(-1, ctypes.byref(token))
    lib.agent_cancel_bind(token.value)
    try:
        agent.set_state({"holder": True})
    finally:
        lib.agent_cancel_bind(0)
        lib.agent_cancel_free(token.value)
    agent.close()
    print("done", flush=True)
    """
)


def _read_line(stream: "IO[str]", timeout: float) -> str:
    """A line of a child's stdout, or "" at EOF or when none came within ``timeout`` s."""
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline() if ready else ""


class ProcessHolder:
    """Holder's lock from another process: a child Python process opens the same store and
    holds its lock in a write (its validator waits for the parent's "go" on stdin) until
    release()."""

    def __init__(self, target: Any, options: Dict[str, Any], cwd: Path) -> None:
        env = dict(os.environ)
        env.pop("AGENT_STATE_LIBRARY", None)  # the installed package, as the tests use
        env["PYTHONFAULTHANDLER"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER_CHILD, json.dumps([os.fspath(target), options])],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.released = False
        assert self.proc.stdout is not None
        line = _read_line(self.proc.stdout, 60)
        if line != "inside\n":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"the holder process's write did not start: {line!r}\n{err}")

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        try:
            out, err = self.proc.communicate("go\n", timeout=60)
        except BaseException:
            self.proc.kill()
            self.proc.wait(30)
            raise
        assert self.proc.returncode == 0 and out == "done\n", (self.proc.returncode, out, err)


AnyHolder = Union[Holder, ProcessHolder]


@pytest.fixture
def hold_lock(store_of: Where, tmp_path: Path) -> Iterator[Callable[[str], AnyHolder]]:
    """``hold_lock(kind)``: holds the lock of the store ``open_async()`` opens (agent.db)
    until ``release()``, from another connection of this process (``"connection"``: Holder
    on a sync twin) or from a child process (``"process"``: ProcessHolder). Whatever is
    still held is released afterwards."""
    holders: List[AnyHolder] = []
    twins: List[Agent] = []

    def _hold(kind: str) -> AnyHolder:
        holder: AnyHolder
        if kind == "connection":
            if not twins:
                twins.append(_sync_twin(store_of, tmp_path))
            holder = Holder(twins[0])
        elif kind == "process":
            target, extra = store_of(tmp_path / "agent.db")
            holder = ProcessHolder(target, extra, tmp_path)
        else:
            raise ValueError(kind)
        holders.append(holder)
        return holder

    yield _hold
    try:
        for holder in holders:
            holder.release()
    finally:
        for twin in twins:
            twin.close()


@pytest.mark.any_backend
@pytest.mark.parametrize("holder", ["connection", "process"])
def test_a_waiting_write_is_cancelled_by_wait_for_and_by_task_cancel(
    open_async: Callable[..., AsyncAgent], hold_lock: Callable[[str], AnyHolder], holder: str
) -> None:
    a = open_async(busy_timeout_ms=30_000)
    held = hold_lock(holder)

    async def main() -> None:
        start = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a.set_state({"w": 1}), timeout=0.2)
        took = time.monotonic() - start
        print(f"{holder}: wait_for: cancelled after {took * 1000:.0f} ms")
        assert took < 5

        task = asyncio.ensure_future(a.set_state({"w": 2}))
        await asyncio.sleep(0.2)
        assert not task.done()
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        print(f"{holder}: task.cancel: ended {(time.monotonic() - start) * 1000:.0f} ms after the cancel")
        assert time.monotonic() - start < 5

    asyncio.run(main())
    held.release()

    async def after() -> None:
        state = await a.get_state()
        assert state == {"holder": True}, "a cancelled write wrote"
        assert await a.set_state({"w": 3}) == {"holder": True, "w": 3}
        assert (await a.get_state_versioned()).version == 2

    asyncio.run(after())


# The bound on the loop's largest gap while 50 coroutines wait for a lock, and how long
# the lock is held. A loop blocked by a waiting call would show a gap about as long as the hold
# in every attempt; a loaded machine's scheduler can delay one wake-up now and then, at random.
# So: every attempt's largest gap stays far below the hold (NOT_BLOCKED_S), and at least one
# of up to GAP_ATTEMPTS attempts meets the bound (GAP_BOUND_S).
GAP_BOUND_S = 0.020
NOT_BLOCKED_S = 0.250
HOLD_S = 1.0
GAP_ATTEMPTS = 3
WRITERS = 50


@pytest.mark.any_backend
@pytest.mark.parametrize("holder", ["connection", "process"])
def test_the_loop_is_not_blocked_while_writes_wait_for_a_lock(
    open_async: Callable[..., AsyncAgent], hold_lock: Callable[[str], AnyHolder], holder: str
) -> None:
    a = open_async(busy_timeout_ms=30_000)

    def attempt(n: int) -> float:
        # The holder's write ({"holder": True}) must be a change to take the lock: a write that
        # leaves the state as it is commits nothing, so the previous attempt's is undone first.
        if n:
            a.sync.set_state({"holder": None})
        held = hold_lock(holder)  # held before the loop starts: its start is not measured

        async def main() -> float:
            beat = LoopLag()
            beat.start()
            writes = [asyncio.ensure_future(a.set_state({f"w{n}_{i}": i})) for i in range(WRITERS)]
            await asyncio.sleep(HOLD_S)  # the lock is held all this time
            assert not any(w.done() for w in writes), "a write did not wait for the lock"
            await asyncio.get_running_loop().run_in_executor(None, held.release)
            await asyncio.gather(*writes)
            return await beat.stop()

        return asyncio.run(main())

    gaps: List[float] = []
    for n in range(GAP_ATTEMPTS):
        gaps.append(attempt(n))
        if gaps[-1] < GAP_BOUND_S:
            break
    shown = ", ".join(f"{g * 1000:.1f}" for g in gaps)
    print(
        f"{holder}: largest gap between heartbeats while {WRITERS} writes waited {HOLD_S:.0f} s "
        f"for the lock, per attempt: {shown} ms"
    )
    assert all(g < NOT_BLOCKED_S for g in gaps), f"the loop was blocked: gaps {shown} ms"
    assert min(gaps) < GAP_BOUND_S, f"no attempt's largest gap was under {GAP_BOUND_S * 1000:.0f} ms: {shown} ms"
    state = a.sync.get_state()
    assert len(state) == 1 + WRITERS * len(gaps) and state["holder"] is True


#: How long the lock is held while one call waits for it, and the most the loop may stall
#: meanwhile: a call that blocked the loop for its wait would stall it for the whole hold.
ONE_HOLD_S = 2.0
ONE_STALL_S = 1.0


@pytest.mark.any_backend
def test_one_waiting_call_does_not_stall_the_loop(
    open_async: Callable[..., AsyncAgent], hold_lock: Callable[[str], AnyHolder]
) -> None:
    a = open_async(busy_timeout_ms=60_000, server_timeout_ms=60_000)
    held = hold_lock("process")

    async def main() -> float:
        async with LoopLag() as lag:
            write = asyncio.ensure_future(a.set_state({"waited": True}))
            await asyncio.sleep(ONE_HOLD_S)
            assert not write.done(), "the write did not wait for the lock"
            await asyncio.get_running_loop().run_in_executor(None, held.release)
            assert await write == {"holder": True, "waited": True}
        return lag.largest

    stall = asyncio.run(main())
    print(f"one write waiting {ONE_HOLD_S:.0f} s for another process's lock: largest loop gap {stall * 1000:.1f} ms")
    assert stall < ONE_STALL_S, f"the loop stalled {stall * 1000:.0f} ms while one call waited"


def _threads() -> int:
    """The process's threads now (Python's and the library's alike)."""
    return len(os.listdir("/proc/self/task"))


#: The library's worker pool's cap (AGENT_STATE_WORKERS, default 8).
LIBRARY_WORKERS = int(os.environ.get("AGENT_STATE_WORKERS") or 8)
#: Threads the library may start besides its workers while calls wait (PostgreSQL's runtime).
SERVICE_THREADS = 4
WAITERS = 100


@pytest.mark.any_backend
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc/self/task")
def test_a_hundred_waiting_coroutines_use_the_librarys_workers_not_a_thread_each(
    open_async: Callable[..., AsyncAgent], hold_lock: Callable[[str], AnyHolder]
) -> None:
    a = open_async(busy_timeout_ms=60_000, server_timeout_ms=60_000)
    held = hold_lock("process")

    async def main() -> Tuple[int, int]:
        before = _threads()
        writes = [asyncio.ensure_future(a.set_state({f"w{i}": i})) for i in range(WAITERS)]
        peak = before
        # Until every worker is busy waiting (the rest queue in the library), and a while more.
        for _ in range(50):
            await asyncio.sleep(0.02)
            peak = max(peak, _threads())
        assert not any(w.done() for w in writes), "a write did not wait for the lock"
        await asyncio.get_running_loop().run_in_executor(None, held.release)
        await asyncio.wait_for(asyncio.gather(*writes), timeout=120)
        return before, peak

    before, peak = asyncio.run(main())
    print(f"{WAITERS} coroutines waiting for a lock: {before} threads before, peak {peak}")
    assert peak <= before + LIBRARY_WORKERS + SERVICE_THREADS, (before, peak)
    state = a.sync.get_state()
    assert len(state) == 1 + WAITERS and state["holder"] is True


def test_a_read_the_validated_copy_answers_completes_without_suspending(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()

    async def main() -> None:
        await a.set_state({"n": 1})
        # The sync read on the loop's thread leaves this thread's validated copy of the state.
        assert a.sync.get_state() == {"n": 1}
        for read, expected in (
            (a.get_state, {"n": 1}),
            (a.get_state_json, '{"n":1}'),
            (a.get_state_versioned, ({"n": 1}, 1)),
        ):
            coro: Any = read()
            try:
                coro.send(None)
            except StopIteration as done:
                assert done.value == expected
            else:
                coro.close()
                raise AssertionError(f"{read.__name__} suspended: it was handed to a worker")
        # A write moves the version: the next read waits for a worker, and is right.
        await a.set_state({"n": 2})
        assert await a.get_state() == {"n": 2}

    asyncio.run(main())


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


# ---- a server that does not answer (PostgreSQL) -----------------------------------------------


@pytest.fixture
def private_server() -> Iterator[Tuple[str, str]]:
    """A PostgreSQL server of this test's own (tests/pg/server.sh), as ``(its directory, its
    URI)``, stopped and removed afterwards: freezing the shared server would stall the tests
    running alongside. A server that cannot start fails the test under CI=true; elsewhere the
    test is skipped."""
    script = ROOT / "tests" / "pg" / "server.sh"
    server_dir = tempfile.mkdtemp(prefix="agent-state-pg-frozen.", dir="/tmp")
    started = subprocess.run(
        ["bash", str(script), "start", server_dir], capture_output=True, text=True, timeout=300
    )
    try:
        if started.returncode != 0:
            why = f"server.sh start {server_dir} failed ({started.returncode}): {started.stderr.strip()}"
            if os.environ.get("CI") == "true":
                pytest.fail(why)
            pytest.skip(why)
        yield server_dir, started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(script), "stop", server_dir], capture_output=True, timeout=120)


def _signal_server(postmaster: int, sig: signal.Signals) -> None:
    os.kill(postmaster, sig)
    # Its children (pkill exits 1 when there is none).
    subprocess.run(["pkill", f"-{sig.name[3:]}", "-P", str(postmaster)], check=False, timeout=30)


@contextlib.contextmanager
def _frozen(server_dir: str) -> Iterator[None]:
    """The server's processes stopped (SIGSTOP) inside the block, resumed (SIGCONT) after it,
    always, as crates/agent_state/tests/postgres/freeze.rs does."""
    text = (Path(server_dir) / "data" / "postmaster.pid").read_text()
    postmaster = int(text.split()[0])
    try:
        # The postmaster first, so that it starts no new process meanwhile.
        _signal_server(postmaster, signal.SIGSTOP)
        yield
    finally:
        _signal_server(postmaster, signal.SIGCONT)


@pytest.mark.any_backend  # it makes its own server, through no store fixture
@pytest.mark.skipif(not backends.POSTGRES, reason="a PostgreSQL server's freeze (runs in the PostgreSQL pass)")
def test_wait_for_and_cancel_end_calls_on_a_server_that_does_not_answer(private_server: Tuple[str, str]) -> None:
    server_dir, uri = private_server
    # Timeouts far beyond the test: only the cancellation can end a call.
    a = AsyncAgent(
        uri,
        agent_id=backends.new_agent_id(),
        synchronous="normal",
        busy_timeout_ms=30_000,
        server_timeout_ms=30_000,
    )
    bound = 10.0  # seconds: generous for a loaded machine, far below the 30 s timeouts

    # The calls below are the only ones in flight in the process: the library's worker pool has
    # idle workers, so each starts at once (none waits in its queue), and a cancellation ends a
    # call that is waiting for the server.

    async def frozen_calls() -> Tuple[List[float], float, float]:
        beat = LoopLag()
        beat.start()
        # A deadline: the write waits for a server that does not answer.
        deadlines: List[float] = []
        start = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a.set_state({"n": 2}), timeout=0.3)
        deadlines.append(time.monotonic() - start)

        # A cancel: the read waits for the server too (its connection was given up: a new
        # one gets no answer).
        task = asyncio.ensure_future(a.get_state())
        done, _ = await asyncio.wait({task}, timeout=0.3)
        assert not done, f"a frozen server answered: {task.result()!r}"
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled = time.monotonic() - start
        return deadlines, cancelled, await beat.stop()

    async def main() -> None:
        assert await a.set_state({"n": 1}) == {"n": 1}
        with _frozen(server_dir):
            deadlines, cancelled, gap = await frozen_calls()
        shown = ", ".join(f"{d * 1000:.0f}" for d in deadlines)
        print(
            f"frozen server: wait_for(set_state, 0.3) raised TimeoutError after {shown} ms; "
            f"get_state ended {cancelled * 1000:.0f} ms after task.cancel(); "
            f"largest loop gap meanwhile {gap * 1000:.1f} ms"
        )
        assert all(d < bound for d in deadlines), deadlines
        assert cancelled < bound, cancelled
        # A blocked loop would show a gap of the 30 s timeouts.
        assert gap < NOT_BLOCKED_S, f"the loop was blocked for {gap * 1000:.0f} ms"

        # The server runs again: the same AsyncAgent works, and the cancelled write wrote nothing.
        start = time.monotonic()
        assert await a.get_state_versioned() == ({"n": 1}, 1), "a cancelled write wrote"
        assert await a.set_state({"n": 3}) == {"n": 3}
        assert await a.get_state_versioned() == ({"n": 3}, 2)
        print(f"after SIGCONT: read, write and read in {(time.monotonic() - start) * 1000:.0f} ms")
        await a.aclose()

    try:
        asyncio.run(main())
    finally:
        a.sync.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork()")
def test_a_forked_child_awaits_calls_on_a_queue_of_its_own(open_async: Callable[..., AsyncAgent]) -> None:
    a = open_async()
    loop = asyncio.new_event_loop()
    try:
        # The parent's loop has its completion queue, and a write of the parent is in flight
        # (a worker's) at the fork.
        assert loop.run_until_complete(a.set_state({"parent": 1})) == {"parent": 1}
        in_flight = loop.create_task(a.set_state({"parent": 2}))
        pid = os.fork()
        if pid == 0:  # the child: its own loop, queue and workers
            code = 1
            try:

                async def child() -> None:
                    await a.set_state({"child": True})
                    state = await a.get_state()
                    assert state["child"] is True and state["parent"] in (1, 2), state

                asyncio.run(child())
                code = 0
            finally:
                os._exit(code)
        loop.run_until_complete(in_flight)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        # The parent's queue still works.
        state = loop.run_until_complete(a.get_state())
        assert state["parent"] == 2 and state["child"] is True
    finally:
        loop.close()


@pytest.mark.any_backend
def test_what_plain_callbacks_raise_on_the_librarys_workers_reaches_the_awaiting_coroutine(
    open_async: Callable[..., AsyncAgent]
) -> None:
    from agent_state import HookError

    a = open_async()
    ran_on: List[int] = []

    class Refused(Exception):
        pass

    def validator(change: Any) -> None:
        if change.next.get("n", 0) < 0:
            raise Refused("negative")

    def hook(next: Any, prev: Any) -> None:
        ran_on.append(threading.get_ident())
        if next.get("n") == 13:
            raise LookupError("unlucky")

    a.set_validator(validator)
    a.on_state_changed(hook)

    async def main() -> None:
        with pytest.raises(RejectedError) as rejected:
            await a.set_state({"n": -1})
        assert isinstance(rejected.value.__cause__, Refused)
        with pytest.raises(HookError) as failed:
            await a.set_state({"n": 13})
        assert isinstance(failed.value.__cause__, LookupError) and "unlucky" in str(failed.value)
        # The change committed all the same, and the next write is clean.
        assert await a.get_state() == {"n": 13}
        assert await a.set_state({"n": 14}) == {"n": 14}

    asyncio.run(main())
    assert ran_on and threading.get_ident() not in ran_on


class _LoopWithoutReaders(asyncio.SelectorEventLoop):
    """An event loop that cannot watch descriptors (as asyncio's ProactorEventLoop)."""

    def add_reader(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError


@pytest.mark.any_backend
def test_a_loop_that_cannot_watch_the_queue_runs_the_calls_on_the_thread_pool(
    open_async: Callable[..., AsyncAgent]
) -> None:
    a = open_async(initial_state={"n": 0})
    loop = _LoopWithoutReaders()
    pool_threads: List[str] = []
    a.on_state_changed(lambda next, prev: pool_threads.append(threading.current_thread().name))

    async def main() -> None:
        assert await a.set_state({"n": 1}) == {"n": 1}
        assert await a.get_state_versioned() == ({"n": 1}, 1)
        assert tuple(await a.set_state_if(1, {"n": 2})) == ({"n": 2}, 2)
        with pytest.raises(ConflictError):
            await a.replace_state_if(1, {"n": 3})
        assert await a.patch_state([{"op": "add", "path": "/m", "value": 1}]) == {"n": 2, "m": 1}
        assert await a.replace_state_json('{"r":1}') == '{"r":1}'

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    # Run on the binding's pool (Python threads), not the library's workers.
    assert pool_threads and all(name.startswith("agent_state-async") for name in pool_threads), pool_threads
