"""A write that changes nothing commits nothing (the book's page "Merge and replace"): a set, replace,
compare-and-set or restore whose result is the stored state, byte for byte, writes no new
version, calls no validator and no hook, logs nothing, and returns the stored state and its
version; a compare-and-set still checks the version first. On both backends, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List

import pytest

from agent_state import Agent, AsyncAgent, Change, ConflictError

#: The state the tests store first (version 1).
STATE: Dict[str, Any] = {"status": "idle", "at": 0, "nested": {"k": [1, 2]}}
#: Patches that leave STATE as it is: none at all, members set to what they are (also nested),
#: null for a member that is absent.
UNCHANGING: List[Dict[str, Any]] = [
    {},
    {"status": "idle"},
    {"at": 0, "gone": None},
    {"nested": {"k": [1, 2]}},
    {"nested": {}},
]


def test_a_write_that_changes_nothing_commits_nothing(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent(change_log={"keep_last": 100})
    delivered: List[Any] = []
    validated: List[int] = []
    agent.on_state_changed(lambda next, prev: delivered.append(next))
    agent.set_validator(lambda change: validated.append(change.version))
    assert tuple(agent.set_state_if(0, STATE)) == (STATE, 1)

    for patch in UNCHANGING:
        assert agent.set_state(patch) == STATE, patch
        assert tuple(agent.set_state_if(1, patch)) == (STATE, 1), patch
        for stale in (0, 2):  # the version is checked first: a stale one is still a conflict
            with pytest.raises(ConflictError):
                agent.set_state_if(stale, patch)
    assert agent.replace_state(agent.get_state()) == STATE
    assert tuple(agent.replace_state_if(1, STATE)) == (STATE, 1)
    with pytest.raises(ConflictError):
        agent.replace_state_if(0, STATE)
    assert agent.set_state_json("{}") == agent.get_state_json()
    assert tuple(agent.restore(1)) == (STATE, 1)  # the state at 1 is the current one

    assert tuple(agent.get_state_versioned()) == (STATE, 1)
    assert delivered == [STATE] and validated == [1]
    assert [c.version for c in agent.changes_since(0)] == [1]

    # A replacement that only reorders the members changes the stored bytes: a change.
    reordered = {"nested": {"k": [1, 2]}, "at": 0, "status": "idle"}
    assert tuple(agent.replace_state_if(1, reordered)) == (reordered, 2)
    assert len(delivered) == 2 and validated == [1, 2]
    assert [c.version for c in agent.changes_since(0)] == [1, 2]


def test_a_first_write_is_a_change_even_when_it_adds_nothing(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent(initial_state={"status": "idle"})
    assert agent.get_state_versioned().version == 0
    assert tuple(agent.set_state_if(0, {})) == ({"status": "idle"}, 1)  # stores the initial state
    assert tuple(agent.set_state_if(1, {})) == ({"status": "idle"}, 1)


@pytest.mark.any_backend
def test_an_async_write_that_changes_nothing_commits_nothing(open_async: Callable[..., AsyncAgent]) -> None:
    agent = open_async(change_log={"keep_last": 100})
    delivered: List[Any] = []
    awaited: List[int] = []
    agent.on_state_changed(lambda next, prev: delivered.append(next))

    async def on_change(change: Change) -> None:
        awaited.append(change.version)

    async def main() -> None:
        agent.on_change(on_change)
        async with agent:
            assert tuple(await agent.set_state_if(0, STATE)) == (STATE, 1)
            for patch in UNCHANGING:
                assert await agent.set_state(patch) == STATE, patch
                assert tuple(await agent.set_state_if(1, patch)) == (STATE, 1), patch
                with pytest.raises(ConflictError):
                    await agent.set_state_if(0, patch)
            assert await agent.replace_state(STATE) == STATE
            assert tuple(await agent.replace_state_if(1, STATE)) == (STATE, 1)
            assert tuple(await agent.get_state_versioned()) == (STATE, 1)
            assert [c.version for c in await agent.changes_since(0)] == [1]

    asyncio.run(main())
    assert delivered == [STATE] and awaited == [1]
