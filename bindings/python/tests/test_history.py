"""Versions and versioned reads, and what every history call does on a closed agent or with
its on_change registrations (compare-and-set: test_compare_and_set.py; poll:
test_poll.py; changes_since, state_at, restore and the change_log option: test_change_log.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Callable, List

import pytest

from agent_state import (
    Agent,
    Change,
    BadHandleError,
    JSSet,
    StorageError,
    Versioned,
)
from agent_state import _callbacks as callbacks_module
from history_support import Recorder, logged


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




# -- closed agents, on_change registrations ----------------------------------------------------


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
        with pytest.raises(BadHandleError):
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
    with pytest.raises(BadHandleError):
        a.on_change(lambda c: None)
    assert set(table) == before
