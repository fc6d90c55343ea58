"""The change log: changes_since, state_at, restore, tagged values in it, keep_seconds and the
change_log option."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_state import (
    Agent,
    GapError,
    InvalidArgumentError,
    JSSet,
    LoggedChange,
    StorageError,
    Versioned,
)
from agent_state import _options as options_module
from history_support import Recorder, logged

#: The library's words for a log that is off (newer releases name the agent's log).
LOG_OFF = re.compile(r"change log (of this agent )?is off")


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
    assert e.value.message.startswith("agent_poll: ") and LOG_OFF.search(e.value.message)
    assert e.value.delivered == 0
    with pytest.raises(InvalidArgumentError) as e:
        a.changes_since(0)
    assert LOG_OFF.search(e.value.message)
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
