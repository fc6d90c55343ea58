"""Typed state, as a type checker sees it: run-tests.sh runs ``mypy --strict`` on this module
(never imported by the suite). ``assert_type`` fails the run when a type is not the one named;
each ``# type: ignore[code]`` marks a line that must be an error, since ``--strict`` reports
an ignore that silences nothing ("unused type: ignore") as an error itself."""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict, Union

import pydantic
from typing_extensions import assert_type

from agent_state import (
    Agent,
    AsyncAgent,
    Change,
    ConnectionOptions,
    LoggedChange,
    OpenOptions,
    Versioned,
    delete_agent,
    list_agents,
)
from agent_state.async_agent import Opening


class ConvState(TypedDict):
    status: str
    lastReply: str
    at: int


@dataclasses.dataclass
class ConvModel:
    status: str = "idle"
    lastReply: str = ""
    at: int = 0


class ConvPydantic(pydantic.BaseModel):
    status: str = "idle"
    at: int = 0


def typed_reads(agent: Agent[ConvState]) -> None:
    state = agent.get_state()
    assert_type(state, ConvState)
    assert_type(state["at"], int)
    state["nope"]  # type: ignore[typeddict-item]  # a key ConvState does not have
    state[1]  # type: ignore[literal-required]  # a key of the wrong type
    state["at"] = "soon"  # type: ignore[typeddict-item]  # a value of the wrong type
    when: str = state["at"]  # type: ignore[assignment]  # an int is no str
    del when
    versioned = agent.get_state_versioned()
    assert_type(versioned, Versioned[ConvState])
    current, version = versioned
    assert_type(current, ConvState)
    assert_type(version, int)
    assert_type(agent.state_at(0), ConvState)
    assert_type(agent.restore(0).state, ConvState)
    for logged in agent.changes_since(0):
        assert_type(logged, LoggedChange[ConvState])
        assert_type(logged.next, ConvState)


def typed_writes(agent: Agent[ConvState]) -> None:
    assert_type(agent.set_state({"status": "processing"}), ConvState)
    assert_type(agent.set_state(ConvModel(status="processing")), ConvState)
    assert_type(agent.set_state(ConvPydantic(at=1)), ConvState)
    assert_type(agent.set_state_if(1, {"at": 2}), Versioned[ConvState])
    assert_type(agent.replace_state({"status": "idle", "lastReply": "", "at": 0}), ConvState)
    agent.replace_state(ConvModel())
    agent.replace_state({"status": "idle"})  # type: ignore[arg-type]  # keys missing
    agent.replace_state_if(3, {"status": "idle", "lastReply": "", "at": "noon"})  # type: ignore[arg-type]
    agent.set_state(5)  # type: ignore[arg-type]  # not a mapping or a model
    assert_type(agent.get_state_as(ConvModel), ConvModel)
    assert_type(agent.get_state_as(ConvPydantic), ConvPydantic)


def typed_hooks(agent: Agent[ConvState]) -> None:
    @agent.on_state_changed
    def changed(next: ConvState, prev: ConvState) -> None:
        assert_type(next["status"], str)

    @agent.on_state_changed
    def with_patch(next: ConvState, prev: ConvState, patch: Optional[Dict[str, Any]]) -> None: ...

    @agent.on_change
    def on_change(change: Change[ConvState]) -> None:
        assert_type(change.next, ConvState)
        assert_type(change.version, int)

    @agent.set_validator
    def validator(change: Change[ConvState]) -> None: ...

    def wrong(next: List[int], prev: List[int]) -> None: ...

    agent.on_state_changed(wrong)  # type: ignore[arg-type]


def typed_json_patch(agent: Agent[ConvState], other: AsyncAgent[ConvState]) -> None:
    ops = [{"op": "replace", "path": "/status", "value": "processing"}]
    assert_type(agent.patch_state(ops), ConvState)
    assert_type(agent.patch_state(({"op": "remove", "path": "/at"},)), ConvState)
    assert_type(agent.patch_state_if(1, ops), Versioned[ConvState])
    assert_type(agent.patch_state_json("[]"), str)
    assert_type(agent.patch_state_if_json(1, "[]"), Tuple[str, int])
    assert_type(agent.get_path("/status"), Any)
    assert_type(agent.get_path_json("/status"), str)
    assert_type(agent.get_tail("/messages", 1), List[Any])
    assert_type(agent.get_tail_json("/messages", 1), str)
    agent.patch_state("[]")  # type: ignore[arg-type]  # text goes to patch_state_json
    agent.patch_state({"op": "remove", "path": "/at"})  # type: ignore[arg-type]  # one operation, not a list
    agent.get_path(0)  # type: ignore[arg-type]  # a pointer is a str

    @agent.on_state_changed
    def with_any_patch(
        next: ConvState, prev: ConvState, patch: Optional[Union[Dict[str, Any], List[Dict[str, Any]]]]
    ) -> None: ...

    @agent.on_change
    def on_change(change: Change[ConvState]) -> None:
        assert_type(change.patch, Optional[Union[Dict[str, Any], List[Dict[str, Any]]]])
        assert_type(change.kind, Literal["merge", "json_patch", "replace", "migration"])

    for logged in agent.changes_since(0):
        assert_type(logged.kind, Literal["merge", "json_patch", "replace", "migration"])


async def typed_async_json_patch(agent: AsyncAgent[ConvState]) -> None:
    assert_type(await agent.patch_state([{"op": "remove", "path": "/at"}]), ConvState)
    assert_type(await agent.patch_state_if(1, []), Versioned[ConvState])
    assert_type(await agent.get_tail("/messages", 1), List[Any])


def plain_agents_stay_dicts(path: str) -> None:
    agent = Agent(path)
    assert_type(agent, Agent[Dict[str, Any]])
    assert_type(agent.get_state(), Dict[str, Any])
    agent.get_state()["anything"] = [1, "two"]
    agent.replace_state({"any": "mapping"})
    assert_type(agent.replace_state(types.MappingProxyType({"any": "mapping"})), Dict[str, Any])
    assert_type(agent.replace_state_if(1, ConvModel()), Versioned[Dict[str, Any]])
    assert_type(agent.get_state_versioned().state, Dict[str, Any])

    @agent.on_state_changed
    def changed(next: Dict[str, Any], prev: Dict[str, Any], patch: Optional[Dict[str, Any]]) -> None: ...

    @agent.on_change
    def on_change(change: Change) -> None:
        assert_type(change.next, Dict[str, Any])


def constructed_typed(path: str) -> None:
    assert_type(Agent[ConvState](path).get_state(), ConvState)
    annotated: Agent[ConvState] = Agent(path, initial_state={"status": "idle", "lastReply": "", "at": 0})
    assert_type(annotated.get_state()["lastReply"], str)


async def async_agents(path: str) -> None:
    typed = await AsyncAgent[ConvState].open(path)
    assert_type(typed, AsyncAgent[ConvState])
    assert_type(await typed.get_state(), ConvState)
    assert_type(await typed.set_state(ConvModel(at=3)), ConvState)
    assert_type((await typed.get_state_versioned()).state, ConvState)
    assert_type(await typed.get_state_as(ConvModel), ConvModel)
    (await typed.get_state())["nope"]  # type: ignore[typeddict-item]
    async with AsyncAgent[ConvState].open(path) as opened:
        assert_type(opened, AsyncAgent[ConvState])
    plain = await AsyncAgent.open(path)
    assert_type(plain, AsyncAgent[Dict[str, Any]])
    assert_type(await plain.get_state(), Dict[str, Any])
    assert_type(await plain.replace_state(types.MappingProxyType({"any": 1})), Dict[str, Any])
    await typed.replace_state({"status": "idle"})  # type: ignore[arg-type]
    async with plain.changes() as feed:
        async for change in feed:
            assert_type(change, Change[Dict[str, Any]])


def open_options_are_checked(path: str) -> None:
    # The keywords of Agent, AsyncAgent, AsyncAgent.open and the store functions are the keys of
    # OpenOptions / ConnectionOptions: a misspelt one, or a value of the wrong type, is an error.
    Agent(path, busy_timeout_ms=100, store_max_value_bytes=4_000_000, read_only=None)
    Agent(path, busy_timout_ms=100)  # type: ignore[call-arg]
    Agent(path, max_value_bytes="1MB")  # type: ignore[arg-type]
    AsyncAgent(path, synchronous="sometimes")  # type: ignore[arg-type]
    AsyncAgent.open(path, nope=1)  # type: ignore[call-arg]
    options: OpenOptions = {"agent_id": "a", "busy_timeout_ms": 2000, "default": str}
    assert_type(Agent(path, **options), Agent[Dict[str, Any]])
    assert_type(Agent[ConvState](path, **options), Agent[ConvState])
    assert_type(AsyncAgent.open(path, **options), Opening[Dict[str, Any]])
    connection: ConnectionOptions = {"busy_timeout_ms": 2000, "max_connections": 2}
    list_agents(path, limit=10, **connection)
    delete_agent(path, "a", if_version=1, **connection)
    list_agents(path, agent_id="a")  # type: ignore[call-arg]
    list_agents(path, **options)  # type: ignore[misc]
