"""A path is a file name, even when it looks like an SQLite URI."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent_state import Agent


@pytest.mark.parametrize("name", ["file:notes.db", "file:z.db#frag", "file:q.db?mode=memory"])
def test_uri_looking_path_opens_exactly_the_named_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        with Agent(name) as agent:
            agent.set_state({"n": 1})
            for suffix in ("", "-wal", "-shm"):
                mode = stat.S_IMODE(os.stat(name + suffix).st_mode)
                assert mode == 0o600, f"{name}{suffix} has mode {mode:o}"
        with Agent(name) as agent:
            assert agent.get_state() == {"n": 1}
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(name)) == []
