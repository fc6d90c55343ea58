"""Shared fixtures: agents that are always closed, in memory or in a temporary store file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, List

import pytest

from agent_state import Agent


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A store file path that does not exist yet."""
    return tmp_path / "agent.db"


@pytest.fixture
def open_agent(db_path: Path) -> Iterator[Callable[..., Agent]]:
    """Opens agents (on ``db_path`` unless a path is given) and closes them all afterwards."""
    opened: List[Agent] = []

    def _open(path: Any = None, **options: Any) -> Agent:
        options.setdefault("synchronous", "normal")
        agent = Agent(db_path if path is None else path, **options)
        opened.append(agent)
        return agent

    yield _open
    for agent in opened:
        agent.close()


@pytest.fixture
def agent(open_agent: Callable[..., Agent]) -> Agent:
    """An agent on a fresh store file with the issue's initial state."""
    return open_agent(initial_state={"status": "idle", "lastReply": "", "at": 0})


@pytest.fixture
def mem() -> Iterator[Agent]:
    """An agent on a private in-memory store."""
    with Agent(":memory:") as agent:
        yield agent
