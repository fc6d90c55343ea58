"""Compare-and-set writes: a conflict leaves the state alone, and counters incremented from
threads and from processes (with a polling watcher) lose no update."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import agent_state
from agent_state import (
    Agent,
    CodecError,
    ConflictError,
    InvalidArgumentError,
)
from history_support import Recorder, assert_chained, logged


# -- compare-and-set -----------------------------------------------------------------------------


def test_compare_and_set_conflict_leaves_the_state_unchanged(open_agent) -> None:
    a = open_agent()
    rec = Recorder()
    a.on_change(rec)
    with pytest.raises(ConflictError) as e:
        a.set_state_if(5, {"x": 1})
    assert e.value.status == agent_state.AGENT_ERR_CONFLICT
    assert e.value.message.startswith("agent_set_state_if: ")
    assert "expected version 5" in e.value.message and "version 0" in e.value.message
    assert a.get_state_versioned() == ({}, 0)
    assert a.set_state_if(0, {"x": 1}) == ({"x": 1}, 1)
    # Every form, at a stale version: nothing is written, no hook runs.
    with pytest.raises(ConflictError) as e:
        a.replace_state_if(0, {"y": 1})
    assert e.value.message.startswith("agent_replace_state_if: ")
    with pytest.raises(ConflictError):
        a.set_state_if(2, {"y": 1})
    assert a.get_state_versioned() == ({"x": 1}, 1)
    assert len(rec.seen) == 1
    # Another agent's write makes the version we read stale.
    b = open_agent()
    state, version = a.get_state_versioned()
    b.set_state({"by": "b"})
    with pytest.raises(ConflictError):
        a.set_state_if(version, {"x": state["x"] + 1})
    assert a.get_state() == {"x": 1, "by": "b"}
    # Input errors are raised before any call: values the codec refuses, non-objects, bad
    # versions.
    with pytest.raises(CodecError):
        a.set_state_if(2, {"f": lambda: None})
    with pytest.raises(TypeError):
        a.replace_state_if(2, [1])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        a.set_state_if(-1, {"x": 1})
    with pytest.raises(InvalidArgumentError):
        a.set_state_if(2**64, {"x": 1})
    with pytest.raises(TypeError):
        a.set_state_if(True, {"x": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        a.set_state_if("2", {"x": 1})  # type: ignore[arg-type]
    assert a.get_state_versioned() == ({"x": 1, "by": "b"}, 2)
    # Anything with __index__ is a version.
    class Two:
        def __index__(self) -> int:
            return 2

    assert a.set_state_if(Two(), {"x": 2}).version == 3  # type: ignore[arg-type]


def cas_increment(agent: Agent, pause: bool) -> bool:
    """One read-modify-write of the counter: True if it committed, False on a conflict. With
    pause it waits a little between the read and the write, widening the window for others."""
    state, version = agent.get_state_versioned()
    if pause:
        time.sleep(0.0002)
    try:
        agent.set_state_if(version, {"count": state.get("count", 0) + 1})
        return True
    except ConflictError:
        return False


def check_counter(where: Tuple[Any, Dict[str, Any]], successes: int) -> None:
    """The counter and the version both equal the number of successful set_state_if calls
    (``where``: the store, as the store_of fixture gives it)."""
    path, extra = where
    with Agent(path, **extra) as fresh:
        state, version = fresh.get_state_versioned()
    assert state.get("count", 0) == successes == version


@pytest.mark.any_backend  # its store is opened through store_of and open_agent only
def test_compare_and_set_counter_from_threads_each_with_its_own_agent(store_of, db_path: Path) -> None:
    workers, attempts = 6, 50
    path, extra = store_of(db_path)
    results: List[Tuple[int, int]] = []
    errors: List[BaseException] = []
    start = threading.Barrier(workers)

    def worker() -> None:
        try:
            with Agent(path, synchronous="normal", **extra) as own:
                start.wait()
                ok = sum(cas_increment(own, i % 2 == 0) for i in range(attempts))
                results.append((ok, attempts - ok))
        except BaseException as e:  # reported below
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a worker hung"
    if errors:
        raise errors[0]
    successes = sum(ok for ok, _ in results)
    assert len(results) == workers and successes > 0
    assert sum(ok + conflicts for ok, conflicts in results) == workers * attempts
    check_counter((path, extra), successes)


CHILD = textwrap.dedent(
    """
    import os, sys, time
    from agent_state import Agent, ConflictError
    path, start_file, attempts, agent_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with Agent(path, synchronous="normal", **({"agent_id": agent_id} if agent_id else {})) as agent:
        deadline = time.monotonic() + 10
        while not os.path.exists(start_file) and time.monotonic() < deadline:
            time.sleep(0.001)
        ok = conflicts = 0
        for i in range(attempts):
            state, version = agent.get_state_versioned()
            if i % 2 == 0:
                time.sleep(0.0002)
            try:
                agent.set_state_if(version, {"count": state.get("count", 0) + 1})
                ok += 1
            except ConflictError:
                conflicts += 1
    print(ok, conflicts)
    """
)


@pytest.mark.any_backend  # its store is opened through store_of and open_agent only
def test_compare_and_set_counter_from_processes_with_a_polling_watcher(open_agent, store_of, db_path: Path) -> None:
    children, attempts = 4, 60
    path, extra = store_of(db_path)  # the children's store: the watcher's
    # This process watches with poll(): it must receive every child's change once, in order.
    watcher = open_agent(**logged(100000))
    rec = Recorder()
    watcher.on_change(rec)
    stop = threading.Event()
    poll_errors: List[BaseException] = []

    def poller() -> None:
        try:
            while not stop.is_set():
                watcher.poll()
                time.sleep(0.001)
        except BaseException as e:  # reported below
            poll_errors.append(e)

    polling = threading.Thread(target=poller)
    polling.start()
    start_file = db_path.parent / "start"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(start_file), str(attempts), extra.get("agent_id", "")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(children)
    ]
    try:
        time.sleep(0.3)  # the children open the store, then wait for the start file
        start_file.touch()
        successes = total = 0
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            ok, conflicts = map(int, out.split())
            successes += ok
            total += ok + conflicts
    finally:
        for proc in procs:
            if proc.poll() is None:  # pragma: no cover - only after a failure above
                proc.kill()
                proc.wait()
        stop.set()
        polling.join(timeout=60)
    if poll_errors:
        raise poll_errors[0]
    assert total == children * attempts and successes > 0
    check_counter((path, extra), successes)
    watcher.poll()
    seen = rec.seen
    assert len(seen) == successes
    assert_chained(seen)
    assert [c.next["count"] for c in seen] == list(range(1, successes + 1))
