"""The options for many agents per store and for PostgreSQL (``agent_id``, ``max_connections``),
the connection URI as a path, and :class:`UnavailableError`. SQLite only: the suites that run
against a PostgreSQL server are separate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, List

import pytest

import agent_state
from agent_state import Agent, InvalidArgumentError, UnavailableError
from agent_state import _native

#: A PostgreSQL URI whose Unix-socket directory does not exist: nothing can answer it.
UNREACHABLE = "postgresql:///postgres?host=/nonexistent-agent-state-dir&port=1&user=x"


def test_unavailable_is_status_12() -> None:
    assert agent_state.AGENT_ERR_UNAVAILABLE == 12
    assert UnavailableError.default_status == 12
    lib = _native.library()
    assert lib.agent_status_name(12).decode() == "AGENT_ERR_UNAVAILABLE"
    assert agent_state.errors.error_for_status(12, "m").status_name == "AGENT_ERR_UNAVAILABLE"


@pytest.mark.parametrize(
    "uri",
    [
        UNREACHABLE,
        UNREACHABLE.encode("utf-8"),
        "postgres:///postgres?host=/nonexistent-agent-state-dir&port=1&user=x",
    ],
)
def test_an_unreachable_server_raises_unavailable(uri: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnavailableError) as e:
        Agent(uri, agent_id="a", busy_timeout_ms=2000)
    assert e.value.status == agent_state.AGENT_ERR_UNAVAILABLE
    assert e.value.message.startswith("agent_open: ")
    assert isinstance(e.value, agent_state.AgentError)
    # Taken as a URI, not as a file name: nothing was created in the working directory.
    assert os.listdir(tmp_path) == []


class _Recording:
    """The library, with ``agent_open``'s path argument recorded."""

    def __init__(self, lib: Any, paths: List[bytes]) -> None:
        self._lib = lib
        self._paths = paths

    def agent_open(self, path: bytes, options: Any, out: Any) -> int:
        self._paths.append(path)
        return int(self._lib.agent_open(path, options, out))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)


@pytest.mark.parametrize("uri", [UNREACHABLE, UNREACHABLE.encode("utf-8"), "postgresql://u:p@h:1//odd//db"])
def test_a_uri_reaches_the_library_unchanged(uri: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    paths: List[bytes] = []
    real = _native.library()
    monkeypatch.setattr(_native, "library", lambda: _Recording(real, paths))
    with pytest.raises(agent_state.AgentError):
        Agent(uri, agent_id="a", busy_timeout_ms=1)
    assert paths == [uri if isinstance(uri, bytes) else uri.encode("utf-8")]


def test_a_password_stays_out_of_the_repr() -> None:
    agent = Agent.__new__(Agent)
    agent._handle = 0
    agent._path = "postgresql://app:s3cret@db.example:5432/app"
    assert repr(agent) == "<agent_state.Agent 'postgresql://app:***@db.example:5432/app' closed>"
    agent._path = "postgresql:///app?host=/run/postgresql"
    assert "postgresql:///app?host=/run/postgresql" in repr(agent)


@pytest.mark.parametrize("bad", [5, b"a", ["a"], {"id": "a"}, True, 1.5])
def test_an_agent_id_that_is_not_a_str_is_refused(bad: Any, db_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="agent_id"):
        Agent(db_path, agent_id=bad)
    assert not db_path.exists()


@pytest.mark.parametrize("bad", ["", "x" * 256, "é" * 128, "\udc80"])
def test_an_empty_too_long_or_non_utf8_agent_id_is_refused(bad: str, db_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="agent_id"):
        Agent(db_path, agent_id=bad)


def test_the_longest_agent_id_is_accepted(open_agent: Callable[..., Agent]) -> None:
    for agent_id in ("x" * 255, "é" * 127 + "x", "a"):
        agent = open_agent(agent_id=agent_id)
        assert agent.set_state({"id": agent_id}) == {"id": agent_id}


@pytest.mark.parametrize("bad", [0, 1001, -1, "4", 2.0, True, 2**64])
def test_max_connections_out_of_range_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="max_connections"):
        Agent(":memory:", max_connections=bad)


def test_max_connections_in_range_is_accepted_on_sqlite(open_agent: Callable[..., Agent]) -> None:
    for n in (1, 4, 1000):
        assert open_agent(max_connections=n).set_state({"n": n}) == {"n": n}


def test_agents_of_one_file_are_isolated(open_agent: Callable[..., Agent], db_path: Path) -> None:
    # Needs the SQLite backend's many agents per file.
    a = open_agent(agent_id="a", initial_state={"who": None})
    b = open_agent(agent_id="b", initial_state={"who": None})
    a.set_state({"who": "a"})
    assert b.get_state() == {"who": None}
    b.set_state({"who": "b"})
    b.set_state({"n": 2})
    assert a.get_state() == {"who": "a"}
    assert a.get_state_versioned().version == 1
    assert b.get_state_versioned().version == 2
    # Another handle on the same agent sees its state; a third agent starts empty.
    assert open_agent(agent_id="a").get_state() == {"who": "a"}
    assert open_agent(agent_id="c").get_state() == {}
    assert db_path.exists()
