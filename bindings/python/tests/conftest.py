"""Shared fixtures: agents that are always closed, in memory or in a temporary store file, and
Python child processes (for what only a whole process shows: its exit, its signals)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

from agent_state import Agent, AsyncAgent

import backends


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A store file path that does not exist yet."""
    return tmp_path / "agent.db"


def _on_server(path: Any, tmp_path: Path) -> bool:
    """On PostgreSQL, a store path in the test's temporary directory names an agent instead."""
    if not backends.POSTGRES or isinstance(path, int):
        return False
    text = os.fsdecode(os.fspath(path))
    return text.startswith(str(tmp_path) + os.sep)


@pytest.fixture
def store_of(tmp_path: Path) -> Callable[[Any], Tuple[Any, Dict[str, Any]]]:
    """Where the store a path names lives on this run's backend: ``(path, {})`` on SQLite; on
    PostgreSQL (backends.py), for a path in the test's temporary directory, ``(the server's
    URI, {"agent_id": ...})``, one fresh agent_id per path for the whole test, so that opening
    a path again opens the same store. For tests that open agents themselves (in threads, or
    in child processes given the path and the agent_id)."""
    agent_ids: Dict[str, str] = {}

    def _where(path: Any) -> Tuple[Any, Dict[str, Any]]:
        if not _on_server(path, tmp_path):
            return path, {}
        key = os.fsdecode(os.fspath(path))
        return backends.PG_URI, {"agent_id": agent_ids.setdefault(key, backends.new_agent_id())}

    return _where


@pytest.fixture
def open_agent(db_path: Path, store_of: Callable[[Any], Tuple[Any, Dict[str, Any]]]) -> Iterator[Callable[..., Agent]]:
    """Opens agents (on ``db_path`` unless a path is given) and closes them all afterwards.

    On PostgreSQL a path in the test's temporary directory (``db_path`` too) is an agent on the
    server (``store_of``)."""
    opened: List[Agent] = []

    def _open(path: Any = None, **options: Any) -> Agent:
        options.setdefault("synchronous", "normal")
        target, extra = store_of(db_path if path is None else path)
        for key, value in extra.items():
            options.setdefault(key, value)
        agent = Agent(target, **options)
        opened.append(agent)
        return agent

    yield _open
    for agent in opened:
        agent.close()


@pytest.fixture
def open_async(tmp_path: Path, store_of: Callable[[Any], Tuple[Any, Dict[str, Any]]]) -> Iterator[Callable[..., AsyncAgent]]:
    """Opens AsyncAgents on the store ``name`` names (in tmp_path, or on the server) and closes
    them afterwards."""
    opened: List[AsyncAgent] = []

    def _open(name: str = "agent.db", **options: Any) -> AsyncAgent:
        target, extra = store_of(tmp_path / name)
        options.setdefault("synchronous", "normal")
        agent = AsyncAgent(target, **{**extra, **options})
        opened.append(agent)
        return agent

    yield _open
    for agent in opened:
        agent.sync.close()


@pytest.fixture
def agent(open_agent: Callable[..., Agent]) -> Agent:
    """An agent on a fresh store file with the issue's initial state."""
    return open_agent(initial_state={"status": "idle", "lastReply": "", "at": 0})


@pytest.fixture
def mem() -> Iterator[Agent]:
    """An agent on a private in-memory store (on PostgreSQL: a fresh agent on the server)."""
    if backends.POSTGRES:
        path, options = backends.server_store()
        with Agent(path, **options) as agent:
            yield agent
        return
    with Agent(":memory:") as agent:
        yield agent


# ---- the PostgreSQL run: which tests it runs -----------------------------------------------
#
# Under AGENT_STATE_TEST_BACKEND=postgres the suite runs the tests that make their stores
# through the fixtures above (mem, agent, open_agent, store_of), which put them on the server. Skipped:
# tests that make no store (they do not depend on the backend and ran on SQLite), tests that
# also take db_path, tmp_path or run_python (they open files or child processes directly),
# unless marked any_backend (they use those only through open_agent), and tests marked
# sqlite_only.

_STORE_FIXTURES = {"mem", "agent", "open_agent", "store_of"}
_FILE_FIXTURES = {"db_path", "tmp_path", "run_python", "tmp_path_factory"}


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "any_backend: runs on PostgreSQL although it takes db_path or tmp_path")
    config.addinivalue_line("markers", "sqlite_only(why): a test of SQLite files, skipped on PostgreSQL")


def pytest_sessionstart(session: Any) -> None:
    """On PostgreSQL, stop at once when no agent can be opened on the server (tests that wait
    for a hook or a thread would otherwise wait for their timeouts)."""
    if not backends.POSTGRES:
        return
    path, options = backends.server_store()
    try:
        Agent(path, **options).close()
    except Exception as e:  # noqa: BLE001 - any failure means the run cannot go on
        pytest.exit(f"PostgreSQL: cannot open an agent on {path}: {type(e).__name__}: {e}", returncode=1)


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    if not backends.POSTGRES:
        return
    for item in items:
        args = set(getattr(getattr(item, "_fixtureinfo", None), "argnames", ()))
        only = item.get_closest_marker("sqlite_only")
        if only is not None:
            why = "SQLite only: " + (only.args[0] if only.args else "")
        elif item.get_closest_marker("any_backend") is not None:
            continue
        elif not args & _STORE_FIXTURES:
            why = "makes no store through the fixtures (ran on SQLite)"
        elif args & _FILE_FIXTURES:
            why = "opens files or processes itself: " + ", ".join(sorted(args & _FILE_FIXTURES))
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=why))


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
