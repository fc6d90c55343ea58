"""Many threads sharing one Agent: no lost update, hooks in commit order, GIL released."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List

import pytest

from agent_state import Agent, BusyError, BadHandleError, HookError

THREADS = 8
WRITES = 150


def run_threads(n: int, target: Callable[[int], None]) -> None:
    errors: List[BaseException] = []
    start = threading.Barrier(n)

    def wrapped(i: int) -> None:
        try:
            start.wait()
            target(i)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_no_lost_update_with_many_threads_on_one_agent(open_agent) -> None:
    agent = open_agent(initial_state={"counters": {}})

    def writer(i: int) -> None:
        for j in range(WRITES):
            merged = agent.set_state({"counters": {f"t{i}": j + 1}, f"last{i}": j})
            assert merged["counters"][f"t{i}"] == j + 1

    run_threads(THREADS, writer)
    state = agent.get_state()
    assert state["counters"] == {f"t{i}": WRITES for i in range(THREADS)}
    assert all(state[f"last{i}"] == WRITES - 1 for i in range(THREADS))


def test_hook_deliveries_are_in_commit_order_across_threads(mem: Agent) -> None:
    deliveries: List[Any] = []
    lock = threading.Lock()

    @mem.on_state_changed
    def record(n, p, d):
        with lock:
            deliveries.append((p, n, threading.get_ident()))

    def writer(i: int) -> None:
        for j in range(60):
            if j % 10 == 9:
                mem.replace_state({**mem.get_state(), f"r{i}": j})
            else:
                mem.set_state({f"t{i}": j})

    run_threads(THREADS, writer)
    assert len(deliveries) == THREADS * 60
    # Each delivery's prev is the previous delivery's next: one unbroken chain.
    for (_, n1, _), (p2, _, _) in zip(deliveries, deliveries[1:]):
        assert p2 == n1
    assert deliveries[-1][1] == mem.get_state()
    assert len({tid for _, _, tid in deliveries}) > 1  # delivered on the writing threads


def test_hooks_run_on_the_writing_thread(mem: Agent) -> None:
    where = []
    mem.on_state_changed(lambda n, p, d: where.append((n["by"], threading.get_ident())))
    idents = {}

    def writer(i: int) -> None:
        idents[i] = threading.get_ident()
        mem.set_state({"by": i})

    run_threads(4, writer)
    assert sorted(where) == sorted((i, idents[i]) for i in range(4))


def test_hook_exceptions_go_to_their_own_thread(mem: Agent) -> None:
    @mem.on_state_changed
    def fail_for_odd(n, p, d):
        if d and d.get("who", 0) % 2:
            raise ValueError(f"odd {d['who']}")

    outcomes = {}

    def writer(i: int) -> None:
        got = []
        for k in range(30):
            try:
                # Each write changes the state (one that changes nothing commits nothing and
                # runs no hook).
                mem.set_state({"who": i, "k": k})
                got.append("ok")
            except HookError as e:
                assert str(e.__cause__) == f"odd {i}"
                got.append("hook")
        outcomes[i] = set(got)

    run_threads(6, writer)
    assert outcomes == {i: ({"hook"} if i % 2 else {"ok"}) for i in range(6)}


def test_readers_and_writers_together(mem: Agent) -> None:
    mem.replace_state({"n": 0, "pad": "x" * 1000})
    stop = threading.Event()

    def work(i: int) -> None:
        if i == 0:
            for j in range(1, 300):
                mem.set_state({"n": j})
            stop.set()
        else:
            last = -1
            while not stop.is_set():
                n = mem.get_state()["n"]
                assert n >= last  # reads never go back in time
                last = n

    run_threads(4, work)
    assert mem.get_state()["n"] == 299


def test_close_while_other_threads_write(open_agent) -> None:
    agent = open_agent()
    closed_errors = []

    def work(i: int) -> None:
        if i == 0:
            time.sleep(0.02)
            agent.close()
            return
        for j in range(10_000):
            try:
                agent.set_state({f"t{i}": j})
            except BadHandleError:
                closed_errors.append(i)
                return

    run_threads(4, work)
    assert sorted(closed_errors) == [1, 2, 3]


def test_calls_release_the_gil(mem: Agent) -> None:
    """A hook that blocks its writer thread does not block other threads' Python code."""
    entered = threading.Event()
    release = threading.Event()

    @mem.on_state_changed
    def slow(n, p, d):
        if n.get("slow"):
            entered.set()
            assert release.wait(10)

    t = threading.Thread(target=lambda: mem.set_state({"slow": True}))
    t.start()
    assert entered.wait(10)
    # While that hook waits, this thread still runs Python and calls the library.
    assert mem.get_state() == {"slow": True}
    release.set()
    t.join(10)
    assert not t.is_alive()


@pytest.mark.parametrize("handles", [2])
def test_several_handles_on_one_file_lose_no_update(open_agent, handles: int) -> None:
    # This test is about lost updates, not lock waits: SQLite's busy handler is not fair, and
    # on a loaded machine one handle's threads may keep the lock for longer than the default.
    agents = [open_agent(busy_timeout_ms=60_000) for _ in range(handles)]

    def writer(i: int) -> None:
        a = agents[i % handles]
        for j in range(100):
            a.set_state({f"t{i}": j + 1})

    run_threads(4, writer)
    assert agents[0].get_state() == {f"t{i}": 100 for i in range(4)}


@pytest.mark.sqlite_only("SQLite's write lock: on PostgreSQL a write is optimistic, so a validator holds no lock")
def test_writers_on_other_handles_wait_for_the_write_lock(open_agent) -> None:
    """A write holds the store's write lock while it computes the initial state (from a hook
    that blocks here): another handle fails fast with busy_timeout_ms=0, or waits and then
    merges into the committed state without losing it."""
    entered = threading.Event()
    release = threading.Event()

    def initial():
        entered.set()
        assert release.wait(10)
        return {"from": "initial"}

    a = open_agent(initial_state=initial)
    impatient = open_agent(busy_timeout_ms=0)
    patient = open_agent(busy_timeout_ms=10_000)
    # One slot per writer: which thread appends first to a shared list is up to the scheduler.
    results: Dict[str, Any] = {}
    first = threading.Thread(target=lambda: results.__setitem__("first", a.set_state({"a": 1})))
    first.start()
    assert entered.wait(10)
    with pytest.raises(BusyError):
        impatient.set_state({"b": 1})
    second = threading.Thread(target=lambda: results.__setitem__("second", patient.set_state({"c": 1})))
    second.start()
    # A hint only: whether the second writer is already waiting for the lock or starts after
    # the first commit, it cannot commit before the first, and merges into its state.
    time.sleep(0.05)
    release.set()
    first.join(30)
    second.join(30)
    assert results == {"first": {"from": "initial", "a": 1}, "second": {"from": "initial", "a": 1, "c": 1}}
