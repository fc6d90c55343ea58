"""Schema evolution through the binding: the open options ``schema_version`` and
``schema_steps``, steps of code (``Agent.set_schema_step``), ``NewerSchemaError`` and
``MigrationError``, the migration as hooks and the change log see it, and the history as stored
or upgraded. Every test runs on SQLite and on PostgreSQL (the open_agent fixture)."""

from __future__ import annotations

import asyncio
import copy
import pickle
from typing import Any, Callable, Dict, List

import pytest

from agent_state import (
    AGENT_ERR_MIGRATION,
    AGENT_ERR_NEWER_SCHEMA,
    Agent,
    AsyncAgent,
    BusyError,
    Change,
    ConflictError,
    InvalidArgumentError,
    MigrationError,
    NewerSchemaError,
    RejectedError,
    StorageError,
)

#: The version 1 -> 2 of the tests' program: nick renamed to name, and a message list.
STEPS: List[Dict[str, Any]] = [
    {"from": 0, "ops": [{"op": "rename", "path": "/user/nick", "to": "name"}]},
    {"from": 1, "ops": [{"op": "default", "path": "/messages", "value": []}]},
]
V2_STATE = {"user": {"name": "ada"}, "messages": []}

OpenAgent = Callable[..., Agent]


def _stored_v0(open_agent: OpenAgent) -> Agent:
    """The store written once by a program of schema version 0 (with a change log), and that
    agent, still open."""
    v0 = open_agent(change_log={"keep_last": 100})
    v0.set_state({"user": {"nick": "ada"}})
    return v0


def test_a_newer_program_reads_the_upgraded_state_once(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS)
    assert v2.schema_version == 2
    assert v2.get_state_versioned() == (V2_STATE, 2)  # the migration is a change of its own
    assert v2.get_state_versioned() == (V2_STATE, 2)  # once
    again = open_agent(schema_version=2, schema_steps=STEPS)
    assert again.get_state_versioned() == (V2_STATE, 2)


def test_a_write_to_an_older_state_migrates_it_first(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS)
    # Written without a read first: the patch is of the new shape, and lands on it.
    assert v2.set_state({"messages": ["hi"]}) == {"user": {"name": "ada"}, "messages": ["hi"]}
    assert v2.get_state_versioned().version == 3
    # A compare-and-set at the version read before the migration conflicts: the state changed
    # shape under it.
    with pytest.raises(ConflictError):
        v2.set_state_if(1, {"x": 1})


def test_the_older_program_is_refused_the_newer_state_and_writes_nothing(open_agent: OpenAgent) -> None:
    v0 = _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS)
    v2.get_state()
    v1 = open_agent(schema_version=1, schema_steps=STEPS[:1])
    calls: List[Callable[[], Any]] = [
        v0.get_state,
        v0.get_state_versioned,
        lambda: v0.set_state({"user": {"nick": "bob"}}),
        lambda: v0.replace_state({"user": {"nick": "bob"}}),
        lambda: v1.get_state(),
        lambda: v1.set_state({"x": 1}),
    ]
    for call in calls:
        with pytest.raises(NewerSchemaError) as e:
            call()
        assert e.value.status == AGENT_ERR_NEWER_SCHEMA
        assert e.value.stored == 2
        assert e.value.declared in (0, 1)
        assert "newer" in e.value.message
    assert v2.get_state_versioned() == (V2_STATE, 2), "nothing written"
    assert v0.schema_version == 0


def test_read_only_reads_every_state_as_stored(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    older = open_agent(read_only=True, schema_version=1, schema_steps=STEPS[:1])
    assert older.get_state_versioned() == ({"user": {"nick": "ada"}}, 1), "not upgraded"
    v2 = open_agent(schema_version=2, schema_steps=STEPS)
    v2.get_state()
    stale = open_agent(read_only=True)
    assert stale.get_state() == V2_STATE, "a newer state, read as stored"
    with pytest.raises(StorageError):
        stale.set_state({"x": 1})


def test_a_python_step_runs_in_either_form(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    seen: List[Any] = []

    def rename(state: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(("rename", copy.deepcopy(state)))
        return {"user": {"name": state["user"].pop("nick")}}

    def messages(state: Dict[str, Any], from_version: int) -> None:
        seen.append(("messages", from_version))
        state["messages"] = []  # in place: None returns the dict as changed

    v2 = open_agent(schema_version=2)
    v2.set_schema_step(0, rename)
    v2.set_schema_step(1, messages)
    assert v2.get_state_versioned() == (V2_STATE, 2)
    assert seen == [("rename", {"user": {"nick": "ada"}}), ("messages", 1)]


def test_a_code_step_fills_what_the_declarative_ones_leave_out(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS[:1])
    v2.set_schema_step(1, lambda state: {**state, "messages": []})
    assert v2.get_state() == V2_STATE


def test_a_raising_step_fails_the_migration_and_leaves_the_state(open_agent: OpenAgent) -> None:
    v0 = _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS[:1])
    problem = ValueError("no messages for ada")

    def step(state: Dict[str, Any]) -> Dict[str, Any]:
        raise problem

    v2.set_schema_step(1, step)
    for call in (v2.get_state, lambda: v2.set_state({"x": 1}), lambda: v2.replace_state({"x": 1})):
        with pytest.raises(MigrationError) as e:
            call()
        assert e.value.status == AGENT_ERR_MIGRATION
        assert "schema step 1 -> 2: the step failed: ValueError: no messages for ada" in e.value.message
        assert e.value.from_version == 1
        assert e.value.__cause__ is problem
    # Nothing written, by any of them: the program of version 0 reads its state as it was.
    assert v0.get_state_versioned() == ({"user": {"nick": "ada"}}, 1)
    # Fixed, the same agent migrates.
    v2.set_schema_step(1, lambda state: {**state, "messages": []})
    assert v2.get_state_versioned() == (V2_STATE, 2)


def test_a_missing_step_and_a_refused_result_fail_the_migration(open_agent: OpenAgent) -> None:
    v0 = _stored_v0(open_agent)
    missing = open_agent(schema_version=2, schema_steps=STEPS[:1])
    with pytest.raises(MigrationError, match="no step is given") as e:
        missing.get_state()
    assert e.value.from_version == 1

    not_a_state = open_agent(schema_version=1)
    not_a_state.set_schema_step(0, lambda state: {"when": object()})
    with pytest.raises(MigrationError, match="schema step 0 -> 1") as e:
        not_a_state.get_state()
    assert e.value.__cause__ is not None  # the codec's refusal, raised in the step's trampoline

    gated = open_agent(schema_version=2, schema_steps=STEPS)

    @gated.set_validator
    def needs_messages(change: Change) -> None:
        assert change.kind == "migration" and change.migrated_from == 0 and change.schema == 2
        if not change.next.get("messages"):
            raise ValueError("messages must not be empty")

    with pytest.raises(MigrationError, match="messages must not be empty"):
        gated.get_state()
    assert v0.get_state_versioned() == ({"user": {"nick": "ada"}}, 1), "nothing written"


def test_hooks_see_the_migration(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS)
    changes: List[Change] = []
    v2.on_change(changes.append)
    plain: List[Any] = []
    v2.on_state_changed(lambda next, prev, patch: plain.append((next, prev, patch)))
    v2.set_state({"messages": ["hi"]})
    assert [(c.kind, c.version, c.schema, c.migrated_from) for c in changes] == [
        ("migration", 2, 2, 0),
        ("merge", 3, 2, None),
    ]
    migration = changes[0]
    assert migration.prev == {"user": {"nick": "ada"}} and migration.next == V2_STATE
    assert migration.patch is None
    assert plain[0] == (V2_STATE, {"user": {"nick": "ada"}}, None)
    # The attributes besides the tuple survive a copy and pickling.
    restored = pickle.loads(pickle.dumps(migration))
    assert (restored.kind, restored.schema, restored.migrated_from) == ("migration", 2, 0)
    assert migration._replace(version=9).kind == "migration"
    # A Change built by hand: its kind from its patch.
    assert Change({"a": 1}, {}, {"a": 1}, 1).kind == "merge"
    assert Change({"a": 1}, {}, None, 1).kind == "replace"


def test_a_replacement_is_seen_as_one(open_agent: OpenAgent) -> None:
    agent = open_agent(schema_version=3)
    kinds: List[Any] = []
    agent.on_change(lambda c: kinds.append((c.kind, c.schema, c.migrated_from)))
    agent.replace_state({"a": 1})
    agent.set_state({"b": 2})
    assert kinds == [("replace", 3, None), ("merge", 3, None)]


def test_the_history_as_stored_or_upgraded(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v2 = open_agent(schema_version=2, schema_steps=STEPS)
    v2.set_state({"messages": ["hi"]})
    log = v2.changes_since(0)
    assert [(c.version, c.schema, c.migrated_from, c.patch) for c in log] == [
        (1, 0, None, {"user": {"nick": "ada"}}),
        (2, 2, 0, None),
        (3, 2, None, {"messages": ["hi"]}),
    ]
    assert log[0].next == {"user": {"nick": "ada"}}, "as stored"
    assert '"migrated_from":0' in v2.changes_since_json(1)

    old, schema = v2.state_at_stored(1)
    assert (old, schema) == ({"user": {"nick": "ada"}}, 0)
    assert v2.state_at_stored(3) == ({"user": {"name": "ada"}, "messages": ["hi"]}, 2)
    assert v2.upgrade_state(old, schema) == V2_STATE
    assert v2.upgrade_state(V2_STATE, 2) == V2_STATE, "the agent's own version: as it is"
    assert v2.get_state_versioned().version == 3, "upgrade_state writes nothing"
    with pytest.raises(NewerSchemaError):
        v2.upgrade_state(V2_STATE, 3)

    restored = v2.restore(1)
    assert restored == (V2_STATE, 4), "written back upgraded"
    assert v2.state_at_stored(4)[1] == 2


def test_a_program_without_a_schema_version_is_unchanged(open_agent: OpenAgent) -> None:
    agent = open_agent(change_log={"keep_last": 10})
    assert agent.schema_version == 0
    agent.set_state({"a": 1})
    assert agent.state_at_stored(1) == ({"a": 1}, 0)
    entry = agent.changes_since(0)[0]
    assert (entry.schema, entry.migrated_from) == (0, None)
    assert agent.upgrade_state({"a": 2}, 0) == {"a": 2}


def test_set_schema_step_argument_errors(open_agent: OpenAgent) -> None:
    agent = open_agent(schema_version=2, schema_steps=STEPS[:1])
    with pytest.raises(InvalidArgumentError, match="past this handle's schema_version"):
        agent.set_schema_step(2, lambda state: state)
    with pytest.raises(InvalidArgumentError, match="already give a declarative step"):
        agent.set_schema_step(0, lambda state: state)
    with pytest.raises(InvalidArgumentError):
        agent.set_schema_step(-1, lambda state: state)
    with pytest.raises(InvalidArgumentError):
        agent.set_schema_step(2**32, lambda state: state)
    with pytest.raises(TypeError):
        agent.set_schema_step(True, lambda state: state)
    with pytest.raises(TypeError):
        agent.set_schema_step("1", lambda state: state)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callable"):
        agent.set_schema_step(1, {"op": "merge"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"fn\(state\) or fn\(state, from_version\)"):
        agent.set_schema_step(1, lambda a, b, c: a)  # type: ignore[arg-type]
    agent.set_schema_step(1, lambda state: state)
    agent.set_schema_step(1, None)  # removed
    agent.set_schema_step(1, None)  # and again: nothing to remove
    with pytest.raises(InvalidArgumentError):
        open_agent(schema_version=-1)
    with pytest.raises(InvalidArgumentError):
        open_agent(schema_version=1, schema_steps=[{"from": 0, "ops": [{"op": "explode"}]}])
    agent.close()
    with pytest.raises(Exception) as e:
        agent.set_schema_step(1, lambda state: state)
    assert type(e.value).__name__ == "BadHandleError"


def test_a_step_may_not_use_its_own_agent(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v1 = open_agent(schema_version=1)
    v1.set_schema_step(0, lambda state: v1.get_state())
    with pytest.raises(MigrationError, match="BusyError") as e:
        v1.get_state()
    assert isinstance(e.value.__cause__, BusyError)


def test_the_step_is_kept_alive_by_its_agent(open_agent: OpenAgent) -> None:
    _stored_v0(open_agent)
    v1 = open_agent(schema_version=1)

    def make() -> None:
        marker = {"added": True}
        v1.set_schema_step(0, lambda state: {**state, **marker})

    make()  # nothing but the agent refers to the step now
    import gc

    gc.collect()
    assert v1.get_state() == {"user": {"nick": "ada"}, "added": True}


def test_the_errors_pickle() -> None:
    err = NewerSchemaError(
        "agent_get_state: newer schema: the state is stored under schema version 4, newer than "
        "this handle's schema_version 3: ..."
    )
    again = pickle.loads(pickle.dumps(err))
    assert (again.stored, again.declared, again.status) == (4, 3, AGENT_ERR_NEWER_SCHEMA)
    failed = pickle.loads(pickle.dumps(MigrationError("schema step 7 -> 8: the step failed: x")))
    assert failed.from_version == 7 and failed.status == AGENT_ERR_MIGRATION
    assert NewerSchemaError("something else").stored is None
    assert not issubclass(MigrationError, RejectedError)


@pytest.mark.any_backend
def test_the_async_agent(open_async: Callable[..., AsyncAgent]) -> None:
    async def main() -> None:
        v0 = open_async(change_log={"keep_last": 10})
        await v0.set_state({"user": {"nick": "ada"}})
        v2 = open_async(schema_version=2, schema_steps=STEPS[:1])
        assert v2.schema_version == 2
        v2.set_schema_step(1, lambda state: {**state, "messages": []})
        assert await v2.get_state() == V2_STATE
        assert await v2.state_at_stored(1) == ({"user": {"nick": "ada"}}, 0)
        assert await v2.upgrade_state({"user": {"nick": "bob"}}, 0) == {"user": {"name": "bob"}, "messages": []}
        with pytest.raises(NewerSchemaError):
            await v0.get_state()

        async def coroutine_step(state: Dict[str, Any]) -> Dict[str, Any]:
            return state

        with pytest.raises(TypeError, match="plain function"):
            v2.set_schema_step(1, coroutine_step)  # type: ignore[arg-type]

    asyncio.run(main())
