"""Versions, compare-and-set writes (threads and processes), and the change log: poll,
changes_since, state_at, restore, gaps, and the change_log option."""

from __future__ import annotations

import datetime as dt
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

import agent_state
from agent_state import (
    Agent,
    Change,
    ClosedError,
    CodecError,
    ConflictError,
    GapError,
    HookError,
    InvalidArgumentError,
    JSSet,
    LoggedChange,
    StorageError,
    Versioned,
)
from agent_state import _callbacks as callbacks_module
from agent_state import _options as options_module


class Recorder:
    """An on_change hook that records every Change it is given (from any thread)."""

    def __init__(self) -> None:
        self.seen: List[Change] = []
        self._lock = threading.Lock()

    def __call__(self, change: Change) -> None:
        with self._lock:
            self.seen.append(change)

    def lines(self) -> List[Tuple[int, Any, Any, Any]]:
        """(version, prev, next, patch) of each delivery."""
        with self._lock:
            return [(c.version, c.prev, c.next, c.patch) for c in self.seen]


def logged(keep_last: int) -> dict:
    return {"change_log": {"keep_last": keep_last}}


def assert_chained(seen: List[Change], first_version: int = 1) -> None:
    """Versions increase by one from first_version, and each prev is the previous next."""
    for i, c in enumerate(seen):
        assert c.version == first_version + i, f"delivery {i} has version {c.version}"
        if i:
            assert c.prev == seen[i - 1].next, f"delivery {i} does not follow the one before"


# -- versions ----------------------------------------------------------------------------------


@pytest.mark.any_backend  # its files are opened through open_agent or store_of only
def test_versions_increase_and_persist_across_reopen(open_agent, db_path: Path) -> None:
    a = open_agent(initial_state={"n": 0})
    assert a.get_state_versioned() == Versioned({"n": 0}, 0)
    rec = Recorder()
    a.on_change(rec)
    assert a.set_state({"n": 1}) == {"n": 1}
    v = a.replace_state_if(1, {"m": 2})
    assert isinstance(v, Versioned) and v == ({"m": 2}, 2) and (v.state, v.version) == ({"m": 2}, 2)
    state, version = a.set_state_if(2, {"m": 3})
    assert (state, version) == ({"m": 3}, 3)
    assert rec.lines() == [
        (1, {"n": 0}, {"n": 1}, {"n": 1}),
        (2, {"n": 1}, {"m": 2}, None),
        (3, {"m": 2}, {"m": 3}, {"m": 3}),
    ]
    a.close()
    # The version is stored with the state.
    b = open_agent()
    assert b.get_state_versioned() == ({"m": 3}, 3)
    # Another agent's writes move it, and reads see that at once.
    c = open_agent()
    c.set_state({"x": 1})
    assert b.get_state_versioned() == ({"m": 3, "x": 1}, 4)
    # Versions survive a read-only reopen too.
    c.close()
    b.close()
    ro = open_agent(read_only=True)
    assert ro.get_state_versioned().version == 4
    with pytest.raises(StorageError):
        ro.set_state_if(4, {"y": 1})


def test_versioned_values_are_decoded_like_get_state(mem: Agent) -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc)
    v = mem.set_state_if(0, {"when": when, "tags": {"a", "b"}, "big": 2**70})
    assert v.state == mem.get_state() == {"when": when, "tags": JSSet(["a", "b"]), "big": 2**70}
    assert mem.get_state_versioned().state == v.state


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


# -- poll --------------------------------------------------------------------------------------


def test_poll_delivers_other_agents_changes_once_in_commit_order(open_agent) -> None:
    a = open_agent(**logged(100))
    b = open_agent()  # logs too: the store says so
    rec, b_rec = Recorder(), Recorder()
    a.on_change(rec)
    b.on_change(b_rec)
    old: List[Any] = []
    a.on_state_changed(lambda n, p, d: old.append((n, p, d)))  # the 3-argument form still works
    b.set_state({"x": 1})
    b.replace_state({"y": 2})
    assert a.poll() == 2
    assert a.poll() == 0  # each change once
    # A write through `a` first delivers what `b` committed before it.
    b.set_state({"z": 3})
    a.set_state({"w": 4})
    assert len(rec.seen) == 4
    b.set_state_json('{"y":null}')
    assert a.poll() == 1
    want = [
        (1, {}, {"x": 1}, {"x": 1}),
        (2, {"x": 1}, {"y": 2}, None),
        (3, {"y": 2}, {"y": 2, "z": 3}, {"z": 3}),
        (4, {"y": 2, "z": 3}, {"y": 2, "z": 3, "w": 4}, {"w": 4}),
        (5, {"y": 2, "z": 3, "w": 4}, {"z": 3, "w": 4}, {"y": None}),
    ]
    assert rec.lines() == want
    assert_chained(rec.seen)
    assert old == [(n, p, d) for _, p, n, d in want]
    # b's hooks saw the same history: its own changes, and a's delivered ahead of b's write.
    assert b_rec.lines() == want
    assert b.poll() == 0


def test_poll_delivers_the_first_change_with_the_writers_initial_state(open_agent) -> None:
    a = open_agent(initial_state={"mine": 1}, **logged(10))
    b = open_agent(initial_state={"theirs": 1})
    rec = Recorder()
    a.on_change(rec)
    b.set_state({"x": 1})
    assert a.poll() == 1
    assert rec.lines() == [(1, {"theirs": 1}, {"theirs": 1, "x": 1}, {"x": 1})]


def test_poll_starts_at_open(open_agent) -> None:
    w = open_agent(**logged(100))
    w.set_state({"before": 1})
    a = open_agent()
    rec = Recorder()
    a.on_change(rec)
    w.set_state({"after": 1})
    assert a.poll() == 1
    assert rec.lines() == [(2, {"before": 1}, {"before": 1, "after": 1}, {"after": 1})]


def test_poll_from_several_threads_delivers_each_change_once(open_agent) -> None:
    a = open_agent(**logged(100000))
    rec = Recorder()
    a.on_change(rec)
    writers = [open_agent(), open_agent()]
    threads_, writes = 4, 30
    stop = threading.Event()
    delivered: List[int] = []
    errors: List[BaseException] = []

    def poller() -> None:
        try:
            while not stop.is_set():
                n = a.poll()
                delivered.append(n)
        except BaseException as e:  # reported below
            errors.append(e)

    def writer(t: int) -> None:
        try:
            for i in range(writes):
                writers[t % 2].set_state({f"t{t}": i})
        except BaseException as e:  # reported below
            errors.append(e)

    pollers = [threading.Thread(target=poller) for _ in range(3)]
    writing = [threading.Thread(target=writer, args=(t,)) for t in range(threads_)]
    for t in pollers + writing:
        t.start()
    for t in writing:
        t.join(timeout=60)
    stop.set()
    for t in pollers:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    delivered.append(a.poll())
    assert sum(delivered) == len(rec.seen) == threads_ * writes
    assert_chained(rec.seen)


@pytest.mark.any_backend  # its files are opened through open_agent or store_of only
def test_a_polling_agent_stays_current(open_agent, tmp_path: Path) -> None:
    """Poll, changes_since and state_at read inside read transactions while others commit: the
    agent must never take what they saw for the newest state (and then overwrite newer
    commits with a stale compare-and-set)."""
    for round_ in range(5):
        path = tmp_path / f"current{round_}.db"
        a = open_agent(path, **logged(1000))
        w = open_agent(path)
        stop = threading.Event()
        errors: List[BaseException] = []

        def poller() -> None:
            try:
                while not stop.is_set():
                    a.poll()
                    version = a.get_state_versioned().version
                    a.changes_since(max(version - 1, 0))
                    a.state_at(0)
            except BaseException as e:  # reported below
                errors.append(e)

        def writer(t: int) -> None:
            try:
                for i in range(25):
                    w.set_state({f"t{t}": i})
            except BaseException as e:  # reported below
                errors.append(e)

        polling = threading.Thread(target=poller)
        polling.start()
        writing = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in writing:
            t.start()
        for t in writing:
            t.join(timeout=60)
        stop.set()
        polling.join(timeout=60)
        if errors:
            raise errors[0]
        assert a.get_state_versioned().version == 100
        with pytest.raises(ConflictError):
            a.set_state_if(99, {"stale": True})


def test_poll_hook_errors_are_raised_after_every_delivery(open_agent) -> None:
    a = open_agent(**logged(100))
    b = open_agent()
    calls: List[int] = []

    @a.on_change
    def mirror(change: Change) -> None:
        calls.append(change.version)
        if change.version == 1:
            raise ConnectionError("mirror down")

    b.set_state({"x": 1})
    b.set_state({"x": 2})
    with pytest.raises(HookError) as e:
        a.poll()
    assert e.value.message.startswith("agent_poll: ")
    assert isinstance(e.value.__cause__, ConnectionError) and len(e.value.exceptions) == 1
    assert e.value.delivered == 2 and calls == [1, 2]
    assert a.poll() == 0  # the deliveries were all made


def test_gap_after_pruning(open_agent) -> None:
    a = open_agent(change_log={"keep_last": 2})
    b = open_agent()
    rec = Recorder()
    a.on_change(rec)
    for n in range(1, 6):
        b.set_state({"n": n})
    # Retained: 4 and 5; 4's predecessor is gone, so only 5 can be delivered with its prev.
    with pytest.raises(GapError) as e:
        a.poll()
    assert e.value.status == agent_state.AGENT_ERR_GAP
    assert e.value.message.startswith("agent_poll: ") and "changes 1 to 4" in e.value.message
    assert e.value.delivered == 1
    assert rec.lines() == [(5, {"n": 4}, {"n": 5}, {"n": 5})]
    assert a.poll() == 0  # once
    with pytest.raises(GapError) as e:
        a.changes_since(1)
    assert e.value.message.startswith("agent_changes_since: ") and e.value.delivered is None
    with pytest.raises(GapError) as e:
        a.state_at(3)
    assert "version 3" in e.value.message
    with pytest.raises(GapError):
        a.restore(2)
    assert a.get_state_versioned() == ({"n": 5}, 5)


def test_a_gap_also_carries_the_exceptions_of_failing_hooks(open_agent) -> None:
    """When a poll both skips pruned changes and has a hook raise, the library reports the gap;
    the binding still hands over the hook's exception."""
    a = open_agent(change_log={"keep_last": 2})
    b = open_agent()

    @a.on_change
    def failing(change: Change) -> None:
        raise RuntimeError(f"failed at {change.version}")

    for n in range(1, 6):
        b.set_state({"n": n})
    with pytest.raises(GapError) as e:
        a.poll()
    assert e.value.delivered == 1
    assert [str(x) for x in e.value.exceptions] == ["failed at 5"]
    assert e.value.__cause__ is e.value.exceptions[0]


def test_poll_counts_deliveries_also_on_gap_and_hook_errors(open_agent) -> None:
    a = open_agent(change_log={"keep_last": 2})
    b = open_agent()
    rec = Recorder()
    a.on_change(rec)
    for n in range(1, 6):
        b.set_state({"n": n})
    with pytest.raises(GapError) as gap:
        a.poll()
    assert gap.value.delivered == 1 == len(rec.seen)
    a.on_state_changed(lambda n, p, d: 1 / 0)
    b.set_state({"n": 6})
    b.set_state({"n": 7})
    with pytest.raises(HookError) as hook:
        a.poll()
    assert hook.value.delivered == 2 and len(rec.seen) == 3
    assert [type(x) for x in hook.value.exceptions] == [ZeroDivisionError] * 2


def test_poll_from_inside_a_hook_delivers_after_it(open_agent) -> None:
    a = open_agent(**logged(100))
    b = open_agent()
    rec = Recorder()
    inner: List[int] = []

    @a.on_change
    def hook(change: Change) -> None:
        rec(change)
        if change.version == 1:
            b.set_state({"from": "hook"})
            inner.append(a.poll())  # delivered after this hook returns

    b.set_state({"x": 1})
    assert a.poll() == 1
    assert [c.version for c in rec.seen] == [1, 2] and inner == [1]
    assert_chained(rec.seen)


def test_base_exceptions_in_polled_hooks_propagate_as_themselves(open_agent) -> None:
    class Stop(BaseException):
        pass

    a = open_agent(**logged(100))
    b = open_agent()
    a.on_change(lambda c: (_ for _ in ()).throw(Stop()))
    b.set_state({"x": 1})
    with pytest.raises(Stop):
        a.poll()
    assert a.poll() == 0


# -- changes_since, state_at, restore ----------------------------------------------------------


def test_changes_since_state_at_and_restore(open_agent) -> None:
    a = open_agent(initial_state={"n": 0}, change_log={"keep_last": 3})
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    for n in range(1, 6):
        a.set_state({"n": n})
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    # Versions 3, 4 and 5 are retained.
    changes = a.changes_since(3)
    assert [(c.version, c.patch, c.next) for c in changes] == [(4, {"n": 4}, {"n": 4}), (5, {"n": 5}, {"n": 5})]
    for c in changes:
        assert isinstance(c, LoggedChange)
        assert c.at.tzinfo is dt.timezone.utc and before <= c.at <= after
        assert c.at.microsecond % 1000 == 0
    assert a.changes_since(5) == []
    assert [c.version for c in a.changes_since(2)] == [3, 4, 5]
    text = a.changes_since_json(4)
    assert text.startswith('[{"version":5,"at":') and text.endswith('"patch":{"n":5},"next":{"n":5}}]')
    assert json.loads(text)[0]["at"] == int(changes[1].at.timestamp() * 1000)
    with pytest.raises(GapError) as e:
        a.changes_since(1)
    assert "after version 1" in e.value.message
    with pytest.raises(InvalidArgumentError) as e:
        a.changes_since(9)
    assert "in the future" in e.value.message
    with pytest.raises(InvalidArgumentError):
        a.changes_since(-1)

    assert a.state_at(0) == {"n": 0}
    assert a.state_at(3) == {"n": 3}
    assert a.state_at(4) == {"n": 4}
    assert a.state_at(5) == {"n": 5} == a.get_state()
    with pytest.raises(GapError):
        a.state_at(2)
    with pytest.raises(InvalidArgumentError) as e:
        a.state_at(6)
    assert "in the future" in e.value.message

    rec = Recorder()
    a.on_change(rec)
    restored = a.restore(3)
    assert restored == Versioned({"n": 3}, 6)
    assert rec.lines() == [(6, {"n": 5}, {"n": 3}, None)]  # delivered as a replacement
    (last,) = a.changes_since(5)
    assert (last.version, last.patch, last.next) == (6, None, {"n": 3})  # logged as one
    assert a.restore(0) == ({"n": 0}, 7)
    assert a.get_state_versioned() == ({"n": 0}, 7)


def test_the_log_keeps_tagged_values(open_agent) -> None:
    a = open_agent(**logged(10))
    when = dt.datetime(2026, 3, 4, tzinfo=dt.timezone.utc)
    a.set_state({"when": when, "tags": {1, 2}, "blob": b"\x01", "big": 2**64})
    a.set_state({"tags": None})
    first, second = a.changes_since(0)
    assert first.patch == first.next == {"when": when, "tags": JSSet([1, 2]), "blob": b"\x01", "big": 2**64}
    assert second.patch == {"tags": None} and second.next == {"when": when, "blob": b"\x01", "big": 2**64}
    assert a.state_at(1) == first.next
    assert a.restore(1).state == first.next


_CORRUPT = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("UPDATE agent_state SET value = ? WHERE agent = ''", (b'{"a":',))
conn.commit()
conn.close()
"""


def test_a_replacement_repairing_a_corrupt_state_is_logged(open_agent, db_path: Path) -> None:
    a = open_agent(**logged(100))
    a.set_state({"x": 1})
    a.set_state({"x": 2})
    b = open_agent()
    rec = Recorder()
    b.on_change(rec)
    # Another process corrupts the stored state (see test_errors.py for why not this one).
    subprocess.run([sys.executable, "-c", _CORRUPT, str(db_path)], check=True, timeout=60)
    with pytest.raises(StorageError, match="corrupt"):
        a.get_state()
    assert a.replace_state({"fixed": True}) == {"fixed": True}
    assert a.get_state_versioned() == ({"fixed": True}, 3)
    assert [(c.version, c.patch, c.next) for c in a.changes_since(2)] == [(3, None, {"fixed": True})]
    assert b.poll() == 1
    assert [(c.version, c.patch, c.next) for c in rec.seen] == [(3, None, {"fixed": True})]


def test_change_log_keep_seconds(open_agent) -> None:
    a = open_agent(change_log={"keep_seconds": dt.timedelta(milliseconds=500)})  # 1 s, rounded up
    started = time.monotonic()
    for n in range(1, 4):
        a.set_state({"n": n})
    # All within the second, unless a loaded machine stalled between the writes (then the
    # oldest may already be hidden: the check would say nothing about the library).
    within = time.monotonic() - started < 0.9
    if within:
        assert len(a.changes_since(0)) == 3
    time.sleep(1.1)
    if within:
        assert len(a.changes_since(0)) == 3  # pruned by writes, not by time alone
    a.set_state({"n": 4})
    with pytest.raises(GapError):
        a.changes_since(0)
    assert [c.version for c in a.changes_since(3)] == [4]  # the newest change is always kept


@pytest.mark.any_backend  # its files are opened through open_agent or store_of only
def test_change_log_off_and_options(open_agent, tmp_path: Path) -> None:
    # Never switched on: poll and changes_since say so; state_at still knows the current
    # version and 0.
    a = open_agent()
    a.set_state({"n": 1})
    a.set_state({"n": 2})
    with pytest.raises(InvalidArgumentError) as e:
        a.poll()
    assert e.value.message.startswith("agent_poll: ") and "change log is off" in e.value.message
    assert e.value.delivered == 0
    with pytest.raises(InvalidArgumentError) as e:
        a.changes_since(0)
    assert "change log is off" in e.value.message
    assert a.state_at(2) == {"n": 2} and a.state_at(0) == {}
    with pytest.raises(GapError):
        a.state_at(1)

    # Switched on by one agent, off by another: the setting belongs to the store.
    path = tmp_path / "switch.db"
    on = open_agent(path, change_log={"keep_last": 10, "keep_seconds": dt.timedelta(hours=1)})
    on.set_state({"n": 1})
    assert len(on.changes_since(0)) == 1
    open_agent(path, change_log=False)
    with pytest.raises(InvalidArgumentError):
        on.changes_since(0)
    with pytest.raises(InvalidArgumentError):
        on.poll()
    # None leaves the store's setting; switching on again starts a fresh log.
    open_agent(path, change_log=None)
    with pytest.raises(InvalidArgumentError):
        on.poll()
    open_agent(path, change_log={"keep_last": 5})
    on.set_state({"n": 2})
    assert [c.version for c in on.changes_since(1)] == [2]

    # Bad settings are refused by the library, naming the option.
    for bad in ({}, {"keep_last": 0}, {"keep_last": -1}, {"keep_seconds": dt.timedelta(seconds=-1)},
                {"keep_last": 1.5}, {"keep_lots": 3}, True, "yes", 5):
        with pytest.raises(InvalidArgumentError) as e:
            Agent(":memory:", change_log=bad)  # type: ignore[arg-type]
        assert e.value.message.startswith("agent_open: ") and "change_log" in e.value.message, bad


def test_change_log_option_json() -> None:
    to_json = options_module.change_log_json
    assert to_json(False) == "false"
    assert to_json({"keep_last": 5}) == '{"keep_last":5}'
    assert to_json({"keep_seconds": 90}) == '{"keep_seconds":90}'
    assert to_json({"keep_seconds": dt.timedelta(milliseconds=1500)}) == '{"keep_seconds":2}'
    assert to_json({"keep_seconds": dt.timedelta(microseconds=1)}) == '{"keep_seconds":1}'
    assert to_json({"keep_last": 1, "keep_seconds": dt.timedelta(hours=1)}) == '{"keep_last":1,"keep_seconds":3600}'


def test_new_calls_on_a_closed_agent_raise_closed_error(open_agent) -> None:
    a = open_agent(**logged(10))
    a.close()
    calls: List[Callable[[], Any]] = [
        a.get_state_versioned,
        lambda: a.set_state_if(0, {}),
        lambda: a.replace_state_if(0, {}),
        a.poll,
        lambda: a.changes_since(0),
        lambda: a.changes_since_json(0),
        lambda: a.state_at(0),
        lambda: a.restore(0),
        lambda: a.on_change(lambda c: None),
        lambda: a.set_validator(lambda c: None),
        lambda: a.set_validator(None),
    ]
    for call in calls:
        with pytest.raises(ClosedError):
            call()


def test_on_change_registrations_are_released(open_agent) -> None:
    table = callbacks_module.tables
    before = set(table)
    a = open_agent(":memory:")
    with pytest.raises(TypeError):
        a.on_change(None)  # type: ignore[arg-type]
    hooks = [a.on_change(lambda c: None) for _ in range(3)]
    assert set(table) - before == {h._key for h in hooks}
    assert hooks[0](Change({}, {}, None, 0)) is None  # the handle calls the callback
    assert hooks[0].remove() is True and hooks[0]._key not in table
    with hooks[1]:
        pass
    assert not hooks[1].active
    a.close()
    assert set(table) == before
    with pytest.raises(ClosedError):
        a.on_change(lambda c: None)
    assert set(table) == before
