"""Garbage collection of agents whose callbacks refer back to them.

The commonest way to write a hook is a method of the object that owns the agent:
``self.agent.on_state_changed(self.changed)``. The bound method refers to the owner, which
refers to the agent: a cycle. The binding keeps every callable the library may call; if it
kept them in a module-level table, that table would keep the cycle, hence the agent and its
open files, alive until exit. Agents that are garbage-collected unclosed must be closed.
"""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path
from typing import Any, Callable, List

import pytest

from agent_state import Agent, Change

FD_DIR = "/proc/self/fd"


def open_fds() -> int:
    return len(os.listdir(FD_DIR))


class Bot:
    """An owner whose callbacks are its own methods (or closures over itself)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.seen: List[Any] = []
        self.agent = Agent(path, synchronous="normal")
        if kind == "on_state_changed":
            self.agent.on_state_changed(self.changed)
        elif kind == "on_change":
            self.agent.on_change(self.change)
        elif kind == "validator":
            self.agent.set_validator(self.change)
        elif kind == "initial":
            self.agent.set_initial_state_hook(self.initial)
        elif kind == "closure":
            self.agent.on_state_changed(lambda n, p, d: self.seen.append(n))

    def changed(self, next: Any, prev: Any, patch: Any) -> None:
        self.seen.append(next)

    def change(self, change: Change) -> None:
        self.seen.append(change.next)

    def initial(self) -> dict:
        return {"initial": True}


@pytest.mark.skipif(not os.path.isdir(FD_DIR), reason="needs /proc/self/fd")
@pytest.mark.parametrize("kind", ["on_state_changed", "on_change", "validator", "initial", "closure"])
def test_an_agent_whose_callback_refers_back_to_it_is_closed_when_collected(
    tmp_path: Path, kind: str
) -> None:
    gc.collect()
    before = open_fds()
    agents: List[Callable[[], Any]] = []
    for i in range(100):
        bot = Bot(tmp_path / f"{i}.db", kind)
        assert bot.agent.set_state({"i": i})["i"] == i  # the store, its WAL and shm are open
        assert bot.seen or kind == "initial"  # the callback works while its owner lives
        agents.append(weakref.ref(bot.agent))
        del bot
    gc.collect()
    assert sum(ref() is not None for ref in agents) == 0
    # Before: 300 more descriptors (store, WAL, shm of each of the 100 agents).
    assert open_fds() <= before + 3
    # The stores were closed, not abandoned: each holds its write.
    with Agent(tmp_path / "99.db") as again:
        assert again.get_state()["i"] == 99


def test_a_callback_lives_as_long_as_its_agent_however_it_is_referenced(tmp_path: Path) -> None:
    agent = Agent(tmp_path / "a.db")
    seen: List[Any] = []

    def register(agent: Agent) -> None:  # the callable's only reference is the registration
        agent.on_state_changed(lambda n, p, d: seen.append(n))

    register(agent)
    gc.collect()
    agent.set_state({"a": 1})
    assert seen == [{"a": 1}]
    ref = weakref.ref(agent)
    del agent
    gc.collect()
    assert ref() is None
