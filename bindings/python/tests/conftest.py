"""Shared fixtures: agents that are always closed, in memory or in a temporary store file, and
Python child processes (for what only a whole process shows: its exit, its signals)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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


@pytest.fixture
def run_python(tmp_path: Path) -> Callable[..., "subprocess.CompletedProcess[str]"]:
    """Runs ``script`` (dedented) in a child process of this interpreter, from ``tmp_path``, with
    ``args`` as ``sys.argv[1:]``; returns the finished process (output captured as text). The
    child imports the same installed package the tests use."""

    def _run(script: str, *args: str, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
        env = dict(os.environ)
        env.pop("AGENT_STATE_LIBRARY", None)
        env["PYTHONFAULTHANDLER"] = "1"  # a crash prints the threads' stacks
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return _run
