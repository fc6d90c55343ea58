"""Watching a store (``agent_state.watch``): the changes any process commits to the agents a
watch names (ids or an id prefix) come out of its iterator and its async iterator, per agent in
commit order, each once; ``since`` catches up; a deletion is one ``"deleted"`` event; closing
ends a waiting reader; bad arguments raise specific errors. On SQLite and on PostgreSQL (the
tests take ``tmp_path`` only to place a SQLite file, hence ``any_backend``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import agent_state
from agent_state import Agent, BadHandleError, InvalidArgumentError, StorageError, Watch, WatchEvent, watch

import backends

#: How long a test waits for an event it expects: generous (a loaded machine, a server), since
#: a passing test never waits it out.
WAIT = 30.0

Store = Tuple[str, str]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A store to watch on this run's backend, existing already (watching never creates one),
    and an id prefix no other test or process uses."""
    prefix = backends.new_agent_id() + "/"
    if backends.POSTGRES:
        assert backends.PG_URI is not None
        return backends.PG_URI, prefix
    location = str(tmp_path / "watched.db")
    Agent(location, agent_id="seed").close()
    return location, prefix


@pytest.fixture
def opened(store: Store) -> Iterator[Callable[..., Agent]]:
    """Opens agents of the store by id, closed at the test's end; with the change log on (the
    watcher reads each change from it; with it off, a change comes as a ``"resync"``)."""
    agents: List[Agent] = []

    def _open(agent_id: str, **options: Any) -> Agent:
        options.setdefault("synchronous", "normal")
        options.setdefault("change_log", {"keep_last": 100})
        agent = Agent(store[0], agent_id=agent_id, **options)
        agents.append(agent)
        return agent

    yield _open
    for agent in agents:
        agent.close()


@pytest.fixture
def watches() -> Iterator[Callable[..., Watch]]:
    """Starts watches, closed at the test's end."""
    made: List[Watch] = []

    def _watch(location: str, **options: Any) -> Watch:
        w = watch(location, **options)
        made.append(w)
        return w

    yield _watch
    for w in made:
        w.close()


def take(w: Watch, n: int) -> List[WatchEvent]:
    """``n`` events of ``w``, failing the test if they do not come."""
    got: List[WatchEvent] = []
    for _ in range(n):
        event = w.next(timeout=WAIT)
        assert event is not None, f"{len(got)} of {n} events came within {WAIT}s: {got}"
        got.append(event)
    return got


def by_agent(events: List[WatchEvent]) -> Dict[str, List[WatchEvent]]:
    out: Dict[str, List[WatchEvent]] = {}
    for event in events:
        out.setdefault(event.agent_id, []).append(event)
    return out


_WRITER = """
import sys
from agent_state import Agent
location, prefix = sys.argv[1], sys.argv[2]
log = {"keep_last": 100}
with Agent(location, agent_id=prefix + "a", change_log=log) as a, \
        Agent(location, agent_id=prefix + "b", change_log=log) as b:
    a.set_state({"n": 1})
    a.patch_state([{"op": "add", "path": "/m", "value": 2}])
    b.replace_state({"r": True})
    a.set_state({"n": 3})
"""


@pytest.mark.any_backend
def test_another_processes_changes_come_in_commit_order(
    store: Store, watches: Callable[..., Watch], run_python: Callable[..., Any]
) -> None:
    location, prefix = store
    w = watches(location, ids=[prefix + "a", prefix + "b"])
    done = run_python(_WRITER, location, prefix)
    assert done.returncode == 0, done.stderr
    got = by_agent(take(w, 4))
    # The deletion once the changes before it came: a deletion erases the agent's change log,
    # so a watcher that had not read a change yet when the agent was deleted skips to the
    # deletion (the copy it keeps is right all the same).
    agent_state.delete_agent(location, prefix + "a")
    got[prefix + "a"] += take(w, 1)
    a, b = got[prefix + "a"], got[prefix + "b"]
    assert [(e.version, e.kind) for e in a] == [(1, "merge"), (2, "json_patch"), (3, "merge"), (0, "deleted")]
    assert a[0].patch == {"n": 1} and a[0].state == {"n": 1}  # an agent's first change has its state
    assert a[1].patch == [{"op": "add", "path": "/m", "value": 2}] and a[1].state is None
    assert a[2].patch == {"n": 3}
    assert a[3].patch is None and a[3].state is None
    assert a[0].at is not None and abs(dt.datetime.now(dt.timezone.utc) - a[0].at) < dt.timedelta(hours=1)
    assert a[0].migrated_from is None and a[0].schema == 0
    assert [(e.version, e.kind, e.patch, e.state) for e in b] == [(1, "replace", None, {"r": True})]
    assert w.next(timeout=0) is None


@pytest.mark.any_backend
def test_async_for_receives_the_changes(store: Store, watches: Callable[..., Watch], opened: Callable[..., Agent]) -> None:
    location, prefix = store
    w = watches(location, prefix=prefix, states=True)
    agent = opened(prefix + "x")

    async def main() -> List[WatchEvent]:
        got: List[WatchEvent] = []
        loop = asyncio.get_running_loop()
        # Written from another thread while the loop waits on the watch's descriptor (more
        # than one wake-up's batch of 32).
        writing = loop.run_in_executor(None, lambda: [agent.set_state({"i": i}) for i in range(1, 41)])
        async for event in w:
            got.append(event)
            if len(got) == 40:
                break
        await writing
        return got

    got = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert [e.version for e in got] == list(range(1, 41))
    assert all(e.agent_id == prefix + "x" and e.kind == "merge" for e in got)
    assert got[-1].state == {"i": 40}  # states=True: every event has the state


@pytest.mark.any_backend
def test_a_prefix_follows_new_agents_and_no_other(
    store: Store, watches: Callable[..., Watch], opened: Callable[..., Agent]
) -> None:
    location, prefix = store
    w = watches(location, prefix=prefix + "in/")
    opened(prefix + "out").set_state({"x": 1})
    for name in "abc":
        agent = opened(prefix + "in/" + name)
        agent.set_state({"v": 1})
        agent.set_state({"v": 2})
    got = by_agent(take(w, 6))
    assert sorted(got) == [prefix + "in/" + name for name in "abc"]
    for events in got.values():
        assert [e.version for e in events] == [1, 2]


@pytest.mark.any_backend
def test_since_catches_up_from_the_change_log(
    store: Store, watches: Callable[..., Watch], opened: Callable[..., Agent]
) -> None:
    location, prefix = store
    logged = opened(prefix + "logged")
    other = opened(prefix + "other")
    for i in range(1, 4):
        logged.set_state({"i": i})
        other.set_state({"i": i})
    w = watches(location, ids=[prefix + "logged", prefix + "other"], since={prefix + "logged": 1})
    caught = take(w, 2)
    assert [(e.agent_id, e.version, e.patch) for e in caught] == [
        (prefix + "logged", 2, {"i": 2}),
        (prefix + "logged", 3, {"i": 3}),
    ]
    other.set_state({"i": 4})
    (event,) = take(w, 1)
    assert (event.agent_id, event.version) == (prefix + "other", 4)


@pytest.mark.any_backend
def test_a_polling_watch_delivers_too(store: Store, watches: Callable[..., Watch], opened: Callable[..., Agent]) -> None:
    # poll_interval: on PostgreSQL one store-wide versions query per interval instead of LISTEN
    # (for a transaction pooler); a SQLite file ignores it.
    location, prefix = store
    w = watches(location, prefix=prefix, poll_interval=dt.timedelta(milliseconds=20))
    agent = opened(prefix + "p")
    for i in range(1, 4):
        agent.set_state({"i": i})
    assert [(e.version, e.patch) for e in take(w, 3)] == [(1, {"i": 1}), (2, {"i": 2}), (3, {"i": 3})]


@pytest.mark.any_backend
def test_add_and_remove(store: Store, watches: Callable[..., Watch], opened: Callable[..., Agent]) -> None:
    location, prefix = store
    w = watches(location, ids=[])
    a = opened(prefix + "a")
    a.set_state({"i": 1})
    w.add(prefix + "a", since=0)
    (event,) = take(w, 1)
    assert (event.agent_id, event.version) == (prefix + "a", 1)
    w.remove(prefix + "a")
    b = opened(prefix + "b")
    w.add(prefix + "b")
    a.set_state({"i": 2})
    b.set_state({"i": 1})
    (event,) = take(w, 1)
    assert event.agent_id == prefix + "b"


@pytest.mark.any_backend
def test_close_ends_a_waiting_reader(store: Store) -> None:
    location, prefix = store
    w = watch(location, prefix=prefix)
    seen: List[Any] = []
    reader = threading.Thread(target=lambda: seen.extend(w))  # a for loop, waiting
    reader.start()
    w.close()
    reader.join(WAIT)
    assert not reader.is_alive() and seen == []
    assert w.closed
    w.close()  # idempotent
    with pytest.raises(BadHandleError):
        w.next(timeout=0)

    async def main() -> List[WatchEvent]:
        w2 = watch(location, prefix=prefix)
        asyncio.get_running_loop().call_later(0.05, w2.close)
        return [event async for event in w2]

    assert asyncio.run(asyncio.wait_for(main(), WAIT)) == []


@pytest.mark.any_backend
def test_the_context_manager_closes(store: Store) -> None:
    location, prefix = store
    with watch(location, ids=[prefix + "a"]) as w:
        assert not w.closed
    assert w.closed


@pytest.mark.any_backend
def test_bad_arguments_raise_specific_errors(store: Store, watches: Callable[..., Watch], tmp_path: Path) -> None:
    location, prefix = store
    with pytest.raises(InvalidArgumentError):
        watch(location, ids=["a"], prefix="p")
    with pytest.raises(InvalidArgumentError):
        watch(location, ids="abc")  # one id as a string: not a list of them
    with pytest.raises(InvalidArgumentError):
        watch(location, ids=["a\0b"])
    with pytest.raises(InvalidArgumentError):
        watch(location, ids=["x" * 256])
    with pytest.raises(InvalidArgumentError):
        watch(location, max_pending=0)
    with pytest.raises(InvalidArgumentError):
        watch(location, since={"a": -1})
    with pytest.raises(InvalidArgumentError):
        watch(location, poll_interval=0)
    with pytest.raises(TypeError):
        watch(location, initial_state={})  # an agent's option, not a connection's
    w = watches(location, prefix=prefix)
    with pytest.raises(InvalidArgumentError):
        w.add(prefix + "a")  # a prefix watch follows no ids
    with pytest.raises(InvalidArgumentError):
        w.next(timeout="1")  # type: ignore[arg-type]
    if backends.POSTGRES:
        return
    with pytest.raises(InvalidArgumentError):
        watch(":memory:")
    missing = tmp_path / "missing.db"
    with pytest.raises(StorageError):
        watch(str(missing))
    assert not missing.exists()


def test_the_names_are_exported() -> None:
    assert agent_state.watch is watch
    assert {"watch", "Watch", "WatchEvent", "WatchKind"} <= set(agent_state.__all__)


@pytest.mark.any_backend
def test_an_agent_opened_with_watch_sees_another_processes_changes_in_its_hook_without_poll(
    store: Store, run_python: Callable[..., Any]
) -> None:
    location, prefix = store
    seen: List[Any] = []
    three = threading.Event()
    with Agent(location, agent_id=prefix + "a", change_log={"keep_last": 100}, watch=True) as a:

        @a.on_state_changed
        def _hook(next_state: Any, prev: Any) -> None:
            seen.append(next_state)
            if len(seen) >= 3:
                three.set()

        done = run_python(_WRITER, location, prefix)
        assert done.returncode == 0, done.stderr
        assert three.wait(WAIT), f"the hook saw {seen}"
        # Nothing twice: the process wrote three changes of this agent.
        assert seen == [{"n": 1}, {"n": 1, "m": 2}, {"n": 3, "m": 2}]
    with pytest.raises(InvalidArgumentError, match="change_log"):
        Agent(location, agent_id=prefix + "c", change_log=False, watch=True)
