"""State semantics: initial state, merge, replace, persistence, options, lifetime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agent_state
from agent_state import Agent, BadHandleError, StorageError


def test_issue_example(db_path: Path) -> None:
    seen = []
    with Agent(str(db_path), initial_state={"status": "idle", "lastReply": "", "at": 0}) as agent:
        merged = agent.set_state({"status": "processing"})
        assert merged == {"status": "processing", "lastReply": "", "at": 0}
        assert type(merged) is dict

        @agent.on_state_changed
        def changed(next, prev, patch):  # noqa: A002 - the issue's names
            seen.append((next, prev, patch))

        assert agent.replace_state({"status": "idle"}) == {"status": "idle"}
        assert agent.get_state() == {"status": "idle"}
    assert seen == [({"status": "idle"}, {"status": "processing", "lastReply": "", "at": 0}, None)]


@pytest.mark.any_backend  # its files are opened through open_agent only
def test_initial_state_is_read_but_not_stored(open_agent, db_path: Path) -> None:
    a = open_agent(initial_state={"v": 1})
    assert a.get_state() == {"v": 1}
    a.close()
    # Nothing was stored: another initial state shows through.
    b = open_agent(initial_state={"v": 2})
    assert b.get_state() == {"v": 2}
    assert b.set_state({"w": 3}) == {"v": 2, "w": 3}
    b.close()
    c = open_agent(initial_state={"v": 99})
    assert c.get_state() == {"v": 2, "w": 3}


def test_default_initial_state_is_empty(mem: Agent) -> None:
    assert mem.get_state() == {}
    assert mem.get_state_json() == "{}"


def test_merge_is_rfc7396(mem: Agent) -> None:
    mem.replace_state({"status": "processing", "job": {"id": "j1", "step": 2, "note": "retrying"}})
    out = mem.set_state({"job": {"step": 3, "note": None}})
    assert out == {"status": "processing", "job": {"id": "j1", "step": 3}}
    assert mem.get_state_json() == '{"status":"processing","job":{"id":"j1","step":3}}'
    # Arrays and scalars replace; null deletes; a dict merges into a non-dict by replacing it.
    out = mem.set_state({"status": None, "job": [1, 2], "x": {"a": {"b": None, "c": 1}}})
    assert out == {"job": [1, 2], "x": {"a": {"c": 1}}}
    out = mem.set_state({"job": {"k": 1}})
    assert out == {"job": {"k": 1}, "x": {"a": {"c": 1}}}


def test_merge_keeps_member_order(mem: Agent) -> None:
    mem.replace_state({"z": 1, "a": 2, "m": 3})
    out = mem.set_state({"a": None, "q": 4, "z": 5, "b": 6})
    assert list(out) == ["z", "m", "q", "b"]
    assert mem.get_state_json() == '{"z":5,"m":3,"q":4,"b":6}'


def test_replace_drops_everything(agent: Agent) -> None:
    agent.set_state({"extra": [1, 2, 3]})
    assert agent.replace_state({"only": True}) == {"only": True}
    assert agent.get_state() == {"only": True}
    assert agent.replace_state({}) == {}
    # replace_state stores None as null (no merge semantics).
    assert agent.replace_state({"n": None}) == {"n": None}
    assert agent.get_state_json() == '{"n":null}'


@pytest.mark.any_backend  # its files are opened through open_agent only
def test_persistence_across_reopen(open_agent, db_path: Path) -> None:
    a = open_agent(initial_state={"status": "idle"}, synchronous="full")
    a.set_state({"status": "processing", "nested": {"k": [1, "two", None, 3.5]}})
    a.close()
    b = open_agent()
    assert b.get_state() == {"status": "processing", "nested": {"k": [1, "two", None, 3.5]}}
    b.replace_state({"r": 1})
    b.close()
    assert open_agent().get_state() == {"r": 1}


def test_two_handles_on_one_file_see_each_other(open_agent) -> None:
    a = open_agent()
    b = open_agent()
    a.set_state({"from_a": 1})
    assert b.get_state() == {"from_a": 1}
    b.set_state({"from_b": 2})
    assert a.get_state() == {"from_a": 1, "from_b": 2}


def test_get_state_returns_a_fresh_copy(mem: Agent) -> None:
    mem.set_state({"list": [1]})
    s = mem.get_state()
    s["list"].append(2)
    s["new"] = 1
    assert mem.get_state() == {"list": [1]}


def test_json_methods_keep_exact_text(mem: Agent) -> None:
    text = '{"z":1.0,"a":1.50,"m":123456789012345678901234567890,"b":-0,"s":"\\u00e9\\n"}'
    out = mem.set_state_json(text)
    assert out == '{"z":1.0,"a":1.50,"m":123456789012345678901234567890,"b":-0,"s":"é\\n"}'
    assert mem.get_state_json() == out
    assert mem.replace_state_json(b'{"k":[]}') == '{"k":[]}'


def test_paths_of_every_kind(tmp_path: Path) -> None:
    for p in (tmp_path / "p.db", str(tmp_path / "s.db"), bytes(tmp_path / "b.db")):
        with Agent(p, synchronous="normal") as a:
            a.set_state({"ok": True})
            assert Path(a.path).exists()
    with pytest.raises(agent_state.InvalidArgumentError):
        Agent(str(tmp_path / "nul\0.db"))
    with pytest.raises(agent_state.InvalidArgumentError):
        Agent("")


def test_store_file_is_private(db_path: Path, open_agent) -> None:
    open_agent().set_state({"secret": 1})
    assert db_path.stat().st_mode & 0o777 == 0o600


@pytest.mark.any_backend  # its files are opened through open_agent only
def test_options(open_agent, db_path: Path) -> None:
    a = open_agent(max_value_bytes=4096, busy_timeout_ms=100, synchronous="full")
    a.set_state({"x": 1})
    a.close()
    ro = open_agent(read_only=True)
    assert ro.get_state() == {"x": 1}
    with pytest.raises(StorageError) as e:
        ro.set_state({"x": 2})
    assert "read_only" in e.value.message
    assert ro.get_state() == {"x": 1}


def test_read_only_on_missing_file_fails(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        Agent(tmp_path / "absent.db", read_only=True)


def test_close_is_idempotent_and_use_after_close_raises(open_agent) -> None:
    a = open_agent()
    assert not a.closed
    a.close()
    a.close()
    assert a.closed
    for call in (
        a.get_state,
        a.get_state_json,
        lambda: a.set_state({"x": 1}),
        lambda: a.replace_state({}),
        lambda: a.set_state_json("{}"),
        lambda: a.replace_state_json("{}"),
        lambda: a.on_state_changed(lambda n, p, d: None),
        lambda: a.set_initial_state_hook(lambda: {}),
    ):
        with pytest.raises(BadHandleError) as e:
            call()
        assert e.value.status == agent_state.AGENT_ERR_BAD_HANDLE
    with pytest.raises(BadHandleError):
        with a:
            pass


def test_context_manager_closes_on_error(db_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with Agent(db_path) as a:
            raise RuntimeError("boom")
    assert a.closed
    assert "closed" in repr(a)


def test_garbage_collected_agent_is_closed(db_path: Path) -> None:
    import gc

    a = Agent(db_path, synchronous="normal")
    a.set_state({"x": 1})
    handle = a._handle
    del a
    gc.collect()
    lib = agent_state._native.library()
    with pytest.raises(BadHandleError):
        lib.agent_close(handle)


def test_library_version() -> None:
    # The package and the library it bundles are released together, with one version.
    assert agent_state.library_version() == agent_state.__version__


def test_returned_state_equals_stored_json(mem: Agent) -> None:
    out = mem.set_state({"a": [1, 2.5, "x", None, True, {"b": {}}]})
    assert json.loads(mem.get_state_json()) == out


def test_merge_into_a_tag_shaped_leftover(mem: Agent) -> None:
    """A plain object with a tag name and other members is data; deleting the others leaves a
    tagged value, which the library validates (and then reads back as that type)."""
    mem.replace_state({"x": {"$bigint": "12", "y": 1}, "z": {"$set": 5, "y": 1}})
    assert mem.set_state({"x": {"y": None}}) == {"x": agent_state.BigInt(12), "z": {"$set": 5, "y": 1}}
    with pytest.raises(agent_state.CodecError):
        mem.set_state({"z": {"y": None}})  # {"$set": 5} is a malformed tagged value
    assert mem.get_state()["z"] == {"$set": 5, "y": 1}
    # A tagged value in the target is a leaf: a dict patch replaces it.
    assert mem.set_state({"x": {"k": 1}})["x"] == {"k": 1}


_WRITER = """
import sys
from agent_state import Agent
path, start, count, agent_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with Agent(path, synchronous="normal", **({"agent_id": agent_id} if agent_id else {})) as a:
    for i in range(start, start + count):
        a.set_state({"child": i, "pad": "x" * (i % 200)})
"""


@pytest.mark.any_backend  # the children open the store store_of gives
def test_changes_from_another_process_are_seen(open_agent, store_of, db_path: Path) -> None:
    import subprocess
    import sys

    path, extra = store_of(db_path)
    a = open_agent()
    a.set_state({"parent": 0})
    assert a.get_state() == {"parent": 0}  # cached
    start = 0
    for round_, count in enumerate((1, 5, 1200)):  # the last round passes a WAL checkpoint
        subprocess.run(
            [sys.executable, "-c", _WRITER, str(path), str(start), str(count), extra.get("agent_id", "")],
            check=True,
            timeout=60,
        )
        start += count
        state = a.get_state()
        assert state["child"] == start - 1 and state["parent"] == round_, state
        a.set_state({"parent": round_ + 1})
        assert a.get_state()["parent"] == round_ + 1


def test_unclosed_agent_with_hooks_at_interpreter_exit(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "from agent_state import Agent\n"
        "a = Agent('x.db', synchronous='normal', initial_state=lambda: {'i': 1})\n"
        "a.on_state_changed(lambda n, p, d: None)\n"
        "a.set_state({'x': 1})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == ""
    with Agent(tmp_path / "x.db") as a:
        assert a.get_state() == {"i": 1, "x": 1}
