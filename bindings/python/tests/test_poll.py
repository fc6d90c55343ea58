"""poll: the changes of other handles delivered once each, in commit order; gaps after pruning;
hook errors and deliveries counted."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, List

import pytest

import agent_state
from agent_state import (
    Change,
    ConflictError,
    GapError,
    HookError,
)
from history_support import Recorder, assert_chained, logged


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
