"""Agents and multiprocessing: no acknowledged write is lost across fork().

With the ``fork`` start method, workers inherit an ``Agent`` opened before the pool started and
write through it while the parent closes its copy first (it then believes it holds the last
connection) or keeps writing. With ``forkserver`` and ``spawn`` (the documented way), workers
are given the path and open their own ``Agent``. Either way, every write a worker was
acknowledged must be in the final state.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from agent_state import Agent

WORKERS = 3
WRITES = 60

# The agent a `fork` worker inherits (set in the parent before the workers start).
_inherited: Optional[Agent] = None


def _write_series(agent: Agent, name: str) -> int:
    last = 0
    for i in range(1, WRITES + 1):
        agent.set_state({name: i})  # raises on failure: nothing after it is acknowledged
        last = i
    return last


def _inherited_worker(index: int, go: Any, results: Any) -> None:
    try:
        go.wait()
        assert _inherited is not None
        calls: List[int] = []
        _inherited.on_state_changed(lambda *change: calls.append(1))
        # The inherited read cache is not trusted: this read goes to the store.
        seen_parent = _inherited.get_state().get("p", 0) >= 1
        last = _write_series(_inherited, f"w{index}")
        results.put((index, last, len(calls), seen_parent))
    except BaseException as e:  # reported, not lost in a child's stderr
        results.put((index, None, repr(e), False))


def _path_worker(index: int, path: str, results: Any) -> None:
    try:
        with Agent(path, synchronous="normal") as agent:
            results.put((index, _write_series(agent, f"w{index}"), WRITES, True))
    except BaseException as e:
        results.put((index, None, repr(e), False))


def _collect(results: Any, procs: List[Any]) -> Dict[int, int]:
    acked: Dict[int, int] = {}
    for _ in procs:
        index, last, hook_calls, seen_parent = results.get(timeout=120)
        assert last is not None, f"worker {index} failed: {hook_calls}"
        assert hook_calls == last, f"worker {index}: hooks saw {hook_calls} of {last} writes"
        assert seen_parent, f"worker {index} did not read the parent's write"
        acked[index] = last
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    return acked


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is POSIX-only")
@pytest.mark.parametrize("synchronous", ["full", "normal"])
@pytest.mark.parametrize("parent", ["closes", "writes"])
def test_fork_workers_share_an_agent_opened_before_the_pool(
    tmp_path: Path, synchronous: str, parent: str
) -> None:
    global _inherited
    path = tmp_path / "fork.db"
    ctx = multiprocessing.get_context("fork")
    # Lost updates are the point, not lock waits (SQLite's busy handler is not fair).
    _inherited = Agent(path, synchronous=synchronous, busy_timeout_ms=60_000)
    try:
        _inherited.set_state({"p": 1})
        go = ctx.Event()
        results = ctx.Queue()
        procs = [ctx.Process(target=_inherited_worker, args=(i, go, results)) for i in range(WORKERS)]
        for p in procs:
            p.start()
        parent_last = 1
        if parent == "closes":
            _inherited.close()  # before the workers write
            go.set()
        else:
            go.set()
            for i in range(2, WRITES + 1):
                _inherited.set_state({"p": i})
                parent_last = i
            _inherited.close()
        acked = _collect(results, procs)
    finally:
        _inherited.close()
        _inherited = None
    with Agent(path) as fresh:
        state = fresh.get_state()
    assert state["p"] == parent_last
    for index, last in acked.items():
        assert state[f"w{index}"] == last, f"worker {index}: {state.get(f'w{index}')} != {last}"


def _pool_task(index: int) -> Tuple[int, int]:
    assert _inherited is not None
    return index, _write_series(_inherited, f"w{index}")


@pytest.mark.skipif(sys.platform != "linux", reason="the fork start method is POSIX-only")
def test_a_fork_pool_writes_through_an_agent_opened_before_it(tmp_path: Path) -> None:
    global _inherited
    path = tmp_path / "pool.db"
    _inherited = Agent(path, synchronous="normal")
    try:
        _inherited.set_state({"p": 1})
        with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
            acked = dict(pool.map(_pool_task, range(2 * WORKERS)))
        _inherited.set_state({"p": 2})  # the parent's handle is unaffected
    finally:
        _inherited.close()
        _inherited = None
    with Agent(path) as fresh:
        state = fresh.get_state()
    assert state["p"] == 2
    for index, last in acked.items():
        assert last == WRITES and state[f"w{index}"] == last


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_workers_given_the_path_open_their_own_agent(tmp_path: Path, method: str) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"{method} is not available here")
    path = tmp_path / "own.db"
    ctx = multiprocessing.get_context(method)
    with Agent(path, synchronous="normal") as agent:
        agent.set_state({"p": 1})
        results = ctx.Queue()
        procs = [ctx.Process(target=_path_worker, args=(i, os.fspath(path), results)) for i in range(WORKERS)]
        for p in procs:
            p.start()
        acked = _collect(results, procs)
        state = agent.get_state()
    assert state["p"] == 1
    for index, last in acked.items():
        assert state[f"w{index}"] == last
