"""A store's agents (listing, deletion, expiry): list_agents, delete_agent, expire_agents and
their coroutines, on both backends.

On SQLite each test has a file of its own; on PostgreSQL the agents live on the server, which
other tests share: each test's agent ids start with a prefix of its own (``backends``), and a
test lists with that prefix. Expiry deletes agents whatever their id, so on PostgreSQL the
expiry test ages its agents to 2001 and only expires what a dry run shows is its own."""

from __future__ import annotations

import asyncio
import ctypes
import datetime as dt
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import agent_state
from agent_state import (
    Agent,
    AgentInfo,
    Change,
    ConflictError,
    InvalidArgumentError,
    StorageError,
    Versioned,
    delete_agent,
    delete_agent_async,
    expire_agents,
    expire_agents_async,
    list_agents,
    list_agents_async,
)
from agent_state import _native

import backends
from lock_holder import Holder

pytestmark = pytest.mark.any_backend

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> str:
    """Where this test's agents live: a SQLite file of its own, or the (shared) server."""
    if backends.POSTGRES:
        assert backends.PG_URI is not None
        return backends.PG_URI
    return str(tmp_path / "agents.db")


@pytest.fixture
def prefix() -> str:
    """The prefix of this test's agent ids: no other test's agent has it."""
    return backends.new_agent_id() + "/"


@pytest.fixture
def open_on(store: str) -> Iterator[Callable[..., Agent]]:
    """Opens agents of ``store`` by id, closed afterwards."""
    opened: List[Agent] = []

    def _open(agent_id: str, **options: Any) -> Agent:
        options.setdefault("synchronous", "normal")
        agent = Agent(store, agent_id=agent_id, **options)
        opened.append(agent)
        return agent

    yield _open
    for agent in opened:
        agent.close()


def _now() -> dt.datetime:
    return dt.datetime.now(UTC)


def _ms(moment: dt.datetime) -> dt.datetime:
    """``moment`` rounded down to the millisecond, as the store keeps times."""
    return moment.replace(microsecond=moment.microsecond - moment.microsecond % 1000)


def _size(agent: Agent) -> int:
    return len(agent.get_state_json().encode("utf-8"))


# -- list --------------------------------------------------------------------------------------


def test_list_orders_by_id_pages_and_filters_by_prefix(
    store: str, prefix: str, open_on: Callable[..., Agent]
) -> None:
    names = ["b", "a", "c/2", "c/1", "é", "z", "c"]
    before = _ms(_now())
    agents = {}
    for i, name in enumerate(names):
        agent = open_on(prefix + name, initial_state={"n": 0})
        for n in range(i + 1):  # versions 1, 2, ...
            agent.set_state({"n": n, "text": "é" * i})
        agents[name] = agent
    after = _now()
    open_on(prefix + "never-written").get_state()  # opened, never written: not listed

    listed = list_agents(store, prefix=prefix)
    assert [e.id for e in listed] == sorted(prefix + n for n in names)
    for entry in listed:
        assert isinstance(entry, AgentInfo)
        agent = agents[entry.id[len(prefix):]]
        assert entry.version == agent.get_state_versioned().version == names.index(entry.id[len(prefix):]) + 1
        assert entry.bytes == _size(agent)  # UTF-8 bytes, not characters
        assert entry.written_at.tzinfo == UTC
        assert entry.written_at.microsecond % 1000 == 0
        assert before <= entry.written_at <= after, (before, entry.written_at, after)

    # Pages of 2, each after the previous page's last id, make up the whole listing.
    pages: List[List[AgentInfo]] = []
    last = None
    while True:
        page = list_agents(store, prefix=prefix, after=last, limit=2)
        if not page:
            break
        assert len(page) <= 2
        pages.append(page)
        last = page[-1].id
    assert [len(p) for p in pages] == [2, 2, 2, 1]
    assert [e for p in pages for e in p] == listed

    # A prefix selects; `after` is exclusive and need not be an agent's id.
    assert [e.id for e in list_agents(store, prefix=prefix + "c")] == [prefix + n for n in ("c", "c/1", "c/2")]
    assert [e.id for e in list_agents(store, prefix=prefix + "c/")] == [prefix + "c/1", prefix + "c/2"]
    assert [e.id for e in list_agents(store, prefix=prefix, after=prefix + "c/1")] == [
        prefix + n for n in ("c/2", "z", "é")
    ]
    assert [e.id for e in list_agents(store, prefix=prefix, after=prefix + "b0")] == [
        prefix + n for n in ("c", "c/1", "c/2", "z", "é")
    ]
    assert list_agents(store, prefix=prefix, after=prefix + "é") == []
    assert list_agents(store, prefix=prefix + "nothing") == []
    assert list_agents(store, prefix=prefix, limit=1) == listed[:1]
    # The listing reflects writes: a new version, a new size.
    agents["a"].set_state({"more": "x" * 100})
    (entry,) = list_agents(store, prefix=prefix + "a")
    assert (entry.version, entry.bytes) == (3, _size(agents["a"]))


@pytest.mark.sqlite_only("a file's single agent, opened without agent_id")
def test_a_files_single_agent_is_listed_with_the_empty_id(tmp_path: Path) -> None:
    path = tmp_path / "single.db"
    with Agent(path, initial_state={"n": 0}) as single, Agent(path, agent_id="other") as other:
        single.set_state({"n": 1})
        other.set_state({"n": 2})
        listed = list_agents(path)
        assert [(e.id, e.version) for e in listed] == [("", 1), ("other", 1)]
        assert list_agents(path, prefix="") == listed
        assert [e.id for e in list_agents(path, after="")] == ["other"]
        assert delete_agent(path, "") == 1
        assert single.get_state_versioned() == Versioned({"n": 0}, 0)
        assert [e.id for e in list_agents(os.fsencode(path))] == ["other"]  # bytes paths too


@pytest.mark.sqlite_only("a SQLite file that does not exist")
def test_listing_never_creates_a_store(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(StorageError):
        list_agents(path)
    with pytest.raises(StorageError):
        expire_agents(path, dt.timedelta(days=1), dry_run=True)
    assert not path.exists()


# -- delete ------------------------------------------------------------------------------------


def test_delete_returns_the_version_and_open_agents_see_the_initial_state(
    store: str, prefix: str, open_on: Callable[..., Agent]
) -> None:
    a = open_on(prefix + "victim", initial_state={"n": 0})
    b = open_on(prefix + "victim", initial_state={"n": -1})
    keep = open_on(prefix + "keep")
    for n in range(1, 4):
        a.set_state({"n": n})
    keep.set_state({"kept": True})
    assert b.get_state_versioned() == Versioned({"n": 3}, 3)
    old = 3

    with pytest.raises(ConflictError):
        delete_agent(store, prefix + "victim", if_version=2)
    with pytest.raises(ConflictError):
        delete_agent(store, prefix + "victim", if_version=0)
    assert a.get_state_versioned() == Versioned({"n": 3}, 3), "a refused deletion deleted"

    assert delete_agent(store, prefix + "victim", if_version=3) == 3
    assert a.get_state_versioned() == Versioned({"n": 0}, 0)
    assert b.get_state_versioned() == Versioned({"n": -1}, 0)  # each handle's initial state
    assert [e.id for e in list_agents(store, prefix=prefix)] == [prefix + "keep"]
    assert keep.get_state() == {"kept": True}

    # Nothing stored: None, not an error; if_version 0 means "nothing stored".
    assert delete_agent(store, prefix + "victim") is None
    assert delete_agent(store, prefix + "victim", if_version=0) is None
    with pytest.raises(ConflictError):
        delete_agent(store, prefix + "victim", if_version=3)
    assert delete_agent(store, prefix + "never-existed") is None

    # Versions never go back: a compare-and-set against the pre-deletion version fails, also
    # once the agent is written again (its new incarnation continues above the old version).
    with pytest.raises(ConflictError):
        b.set_state_if(old, {"stale": True})
    with pytest.raises(ConflictError):
        b.replace_state_if(old, {"stale": True})
    new_state, new_version = b.set_state_if(0, {"fresh": True})
    assert new_state == {"n": -1, "fresh": True}
    assert new_version > old
    for k in range(3):  # three changes (a write that changes nothing commits nothing)
        a.set_state({"n": 10 + k})
    with pytest.raises(ConflictError):
        a.set_state_if(old, {"stale": True})
    assert "stale" not in a.get_state()
    (entry,) = list_agents(store, prefix=prefix + "victim")
    assert entry.version == a.get_state_versioned().version == new_version + 3

    # Deleting the new incarnation: its version, and again above it afterwards.
    assert delete_agent(store, prefix + "victim", if_version=new_version + 3) == new_version + 3
    assert a.set_state({"n": 1}) == {"n": 1}
    assert a.get_state_versioned().version > new_version + 3


def test_hooks_see_the_deletion_as_one_change_to_the_initial_state(
    store: str, prefix: str, open_on: Callable[..., Agent]
) -> None:
    a = open_on(prefix + "hooked", initial_state={"n": 0}, change_log={"keep_last": 10})
    b = open_on(prefix + "hooked", initial_state={"n": 0})
    seen_a: List[Change] = []
    seen_b: List[Change] = []
    a.on_change(seen_a.append)
    b.on_change(seen_b.append)
    a.set_state({"n": 1})
    a.set_state({"n": 2})
    assert b.poll() == 2
    assert [c.version for c in seen_a] == [c.version for c in seen_b] == [1, 2]
    del seen_a[:], seen_b[:]

    assert delete_agent(store, prefix + "hooked") == 2
    deletion = Change(next={"n": 0}, prev={"n": 2}, patch=None, version=0)
    # By poll:
    assert a.poll() == 1
    assert seen_a == [deletion]
    assert a.poll() == 0
    # Or ahead of the next write, which continues above the deleted version:
    assert b.set_state({"m": 1}) == {"n": 0, "m": 1}
    assert len(seen_b) == 2
    assert seen_b[0] == deletion
    assert seen_b[1].prev == {"n": 0} and seen_b[1].next == {"n": 0, "m": 1} and seen_b[1].patch == {"m": 1}
    assert seen_b[1].version > 2
    # ...which the other handle then gets as the next change (the log's setting stayed).
    assert a.poll() == 1
    assert seen_a[1] == seen_b[1]
    assert [c.version for c in a.changes_since(0)] == [seen_b[1].version]


def test_a_deletion_by_another_process_is_seen(
    store: str, prefix: str, open_on: Callable[..., Agent], run_python: Callable[..., Any]
) -> None:
    a = open_on(prefix + "shared", initial_state={"n": 0}, change_log={"keep_last": 10})
    seen: List[Change] = []
    a.on_change(seen.append)
    a.set_state({"n": 1})
    done = run_python(
        """
        import sys
        from agent_state import delete_agent, list_agents
        print(delete_agent(sys.argv[1], sys.argv[2]))
        print(len(list_agents(sys.argv[1], prefix=sys.argv[2])))
        """,
        store,
        prefix + "shared",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0"]
    assert a.get_state_versioned() == Versioned({"n": 0}, 0)
    assert a.poll() == 1
    assert seen[-1] == Change(next={"n": 0}, prev={"n": 1}, patch=None, version=0)
    with pytest.raises(ConflictError):
        a.set_state_if(1, {"n": 2})


@pytest.mark.sqlite_only("erasure from the bytes of a SQLite file and its WAL")
def test_a_deleted_agent_leaves_no_byte_in_the_file_or_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "erase.db"
    in_history = b"MARKER-history-5c1f0e9a"
    in_state = b"MARKER-state-3b7d42aa"

    def found(marker: bytes) -> List[str]:
        return [
            name
            for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal")
            if (tmp_path / name).exists() and marker in (tmp_path / name).read_bytes()
        ]

    with Agent(path, agent_id="victim", change_log={"keep_last": 100}) as victim, Agent(
        path, agent_id="bystander", change_log={"keep_last": 100}
    ) as bystander:
        victim.set_state({"secret": in_history.decode() * 20, "turn": 1})
        bystander.set_state({"note": "stays", "turn": 1})
        victim.replace_state({"secret": in_state.decode() * 20, "turn": 2})  # history only
        for turn in range(3, 30):
            victim.set_state({"turn": turn, "padding": "p" * 500})
            bystander.set_state({"turn": turn})
        assert victim.state_at(1)["secret"].startswith(in_history.decode())
        assert found(in_history) and found(in_state), "the test's search finds nothing to erase"

        assert delete_agent(path, "victim") == 29
        assert found(in_history) == [] and found(in_state) == []
        # The handles stay usable, the bystander intact.
        assert victim.get_state_versioned() == Versioned({}, 0)
        assert bystander.get_state()["note"] == "stays"
        assert len(bystander.changes_since(0)) == 28
        victim.set_state({"again": True})
    assert found(in_history) == [] and found(in_state) == []


# -- expire ------------------------------------------------------------------------------------

#: The time the expiry test ages its agents to (2001-09-09T01:46:40Z), minutes apart.
AGED_MS = 1_000_000_000_000


def _age(store: str, written: Dict[str, int]) -> None:
    """Sets the time of the last write of agents (``{id: ms}``) directly in the store's table,
    as if they had been written then: ``written_ms`` and its minute, ``written_grain``. SQLite:
    by the sqlite3 module in a child process (in this process it would be a second copy of
    SQLite beside the library's); PostgreSQL: by psql (no SQL client in the test's venv)."""
    rows = [(ms, ms - ms % 60_000, agent) for agent, ms in written.items()]
    if not backends.POSTGRES:
        script = (
            "import sqlite3, sys, json\n"
            "db = sqlite3.connect(sys.argv[1], timeout=30)\n"
            "with db:\n"
            "    for row in json.loads(sys.argv[2]):\n"
            "        assert db.execute('UPDATE agent_state SET written_ms=?, written_grain=? WHERE agent=?', row).rowcount == 1\n"
            "db.close()\n"
        )
        import json

        subprocess.run([sys.executable, "-c", script, store, json.dumps(rows)], check=True, timeout=60)
        return
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("PostgreSQL: aging agents needs a SQL client; no psql on PATH and none in the venv")
    statements = "".join(
        f"UPDATE agent_state SET written_ms = {ms}, written_grain = {grain} WHERE agent = '{agent.replace(chr(39), chr(39) * 2)}';\n"
        for ms, grain, agent in rows
    )
    subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", store, "-f", "-"],
        input=statements,
        text=True,
        check=True,
        timeout=60,
        capture_output=True,
    )


def test_expire_deletes_the_longest_idle_first_in_batches_and_dry_runs_delete_nothing(
    store: str, prefix: str, open_on: Callable[..., Agent]
) -> None:
    ids = {name: prefix + name for name in ("old0", "old1", "old2", "fresh")}
    agents = {name: open_on(agent_id, initial_state={"gone": True}) for name, agent_id in ids.items()}
    for name, agent in agents.items():
        agent.set_state({"name": name})
        agent.set_state({"name": name, "turn": 2})
    # old0 the longest idle, then old1, then old2; "fresh" was just written.
    aged = {ids["old0"]: AGED_MS, ids["old1"]: AGED_MS + 120_000, ids["old2"]: AGED_MS + 240_000}
    _age(store, aged)
    listed = {e.id: e for e in list_agents(store, prefix=prefix)}
    for agent_id, ms in aged.items():
        assert listed[agent_id].written_at == EPOCH + dt.timedelta(milliseconds=ms)
    # Idle for longer than this: written before AGED_MS + 10 minutes (only the aged agents,
    # and no agent of another test, which were all written this century).
    idle = _now() - (EPOCH + dt.timedelta(milliseconds=AGED_MS + 600_000))
    old = [ids["old0"], ids["old1"], ids["old2"]]

    dry = expire_agents(store, idle, dry_run=True, limit=10)
    if backends.POSTGRES and [e.id for e in dry] != old:
        foreign = [e.id for e in dry if e.id not in old]
        pytest.skip(f"PostgreSQL: the server holds agents of others aged as long ago ({foreign[:3]}); not expiring them")
    assert [e.id for e in dry] == old
    assert dry == [listed[i] for i in old]  # as list_agents lists them
    assert len(list_agents(store, prefix=prefix)) == 4, "a dry run deleted"
    assert [e.id for e in expire_agents(store, idle, dry_run=True, limit=2)] == old[:2]
    # Idle for longer than their age + a day: none.
    assert expire_agents(store, idle + dt.timedelta(days=1), dry_run=True) == []

    first = expire_agents(store, idle, limit=2)
    assert first == [listed[i] for i in old[:2]]
    assert [e.id for e in list_agents(store, prefix=prefix)] == [ids["fresh"], ids["old2"]]
    assert agents["old0"].get_state_versioned() == Versioned({"gone": True}, 0)
    assert agents["old1"].get_state_versioned() == Versioned({"gone": True}, 0)
    assert agents["old2"].get_state_versioned().version == 2

    rest = expire_agents(store, idle, limit=2)
    assert [e.id for e in rest] == [ids["old2"]]  # fewer than the limit: the sweep is done
    assert expire_agents(store, idle) == []
    assert [e.id for e in list_agents(store, prefix=prefix)] == [ids["fresh"]]
    assert agents["fresh"].get_state() == {"gone": True, "name": "fresh", "turn": 2}
    # An expired agent's versions never come back either.
    with pytest.raises(ConflictError):
        agents["old2"].set_state_if(2, {"stale": True})
    assert agents["old2"].set_state({"back": True}) == {"gone": True, "back": True}
    assert agents["old2"].get_state_versioned().version > 2


def test_expire_with_a_recent_cutoff_dry_runs(store: str, prefix: str, open_on: Callable[..., Agent]) -> None:
    # An agent written just now is not idle for an hour; a dry run with a cutoff of 0 may list
    # it (every agent written before now) and deletes nothing. (A real expiry of every agent is
    # left to SQLite's private files below.)
    agent = open_on(prefix + "now")
    agent.set_state({"x": 1})
    assert prefix + "now" not in [e.id for e in expire_agents(store, dt.timedelta(hours=1), dry_run=True)]
    time.sleep(0.01)
    listed = expire_agents(store, dt.timedelta(0), dry_run=True, limit=10_000)
    if not backends.POSTGRES:
        assert [e.id for e in listed] == [prefix + "now"]
        assert [e.id for e in expire_agents(store, dt.timedelta(microseconds=1))] == [prefix + "now"]
        assert agent.get_state_versioned() == Versioned({}, 0)
    else:
        assert len(list_agents(store, prefix=prefix)) == 1


# -- bad input ---------------------------------------------------------------------------------


def test_bad_input_raises_invalid_argument(store: str, prefix: str, open_on: Callable[..., Agent]) -> None:
    open_on(prefix + "a").set_state({"x": 1})  # the store exists
    day = dt.timedelta(days=1)
    for limit in (0, -1, 10_001, 2**32 + 1):
        with pytest.raises(InvalidArgumentError, match="limit"):
            list_agents(store, prefix=prefix, limit=limit)
        with pytest.raises(InvalidArgumentError, match="limit"):
            expire_agents(store, day, limit=limit, dry_run=True)
    assert len(list_agents(store, prefix=prefix, limit=10_000)) == 1
    for limit_type in (True, 1.0, "1"):
        with pytest.raises(TypeError):
            list_agents(store, limit=limit_type)  # type: ignore[arg-type]
    long_id = "x" * 256
    assert delete_agent(store, "é" * 127) is None  # 254 bytes: a valid id
    for bad in (long_id, "é" * 128, "a\0b", "\udc80"):
        with pytest.raises(InvalidArgumentError):
            delete_agent(store, bad)
        with pytest.raises(InvalidArgumentError):
            list_agents(store, prefix=bad)
        with pytest.raises(InvalidArgumentError):
            list_agents(store, after=bad)
    with pytest.raises(InvalidArgumentError):
        delete_agent(store, 5)  # type: ignore[arg-type]
    for version in (-1, 2**63, 2**64):
        with pytest.raises(InvalidArgumentError):
            delete_agent(store, prefix + "a", if_version=version)
    with pytest.raises(TypeError):
        delete_agent(store, prefix + "a", if_version="1")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        expire_agents(store, dt.timedelta(seconds=-1), dry_run=True)
    with pytest.raises(TypeError):
        expire_agents(store, 3600, dry_run=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        list_agents(store + "\0x")
    with pytest.raises(InvalidArgumentError):
        list_agents(store, busy_timeout_ms=-5)
    # The agent's own options are not parameters.
    for option in ({"agent_id": "a"}, {"initial_state": {}}, {"change_log": False}, {"max_value_bytes": 10}):
        with pytest.raises(TypeError):
            list_agents(store, **option)  # type: ignore[arg-type]
    assert [e.id for e in list_agents(store, prefix=prefix)] == [prefix + "a"]


@pytest.mark.sqlite_only("read_only on a SQLite file")
def test_read_only_lists_and_refuses_to_delete(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with Agent(path, agent_id="a") as a:
        a.set_state({"x": 1})
    assert [e.id for e in list_agents(path, read_only=True)] == ["a"]
    with pytest.raises(StorageError):
        delete_agent(path, "a", read_only=True)
    with pytest.raises(StorageError):
        expire_agents(path, dt.timedelta(0), read_only=True)
    assert [e.id for e in list_agents(path, read_only=True)] == ["a"]


# -- coroutines --------------------------------------------------------------------------------


def test_the_coroutines(store: str, prefix: str, open_on: Callable[..., Agent]) -> None:
    a = open_on(prefix + "a", initial_state={"n": 0})
    b = open_on(prefix + "b")
    a.set_state({"n": 1})
    b.set_state({"n": 1})
    b.set_state({"n": 2})

    async def main() -> None:
        listed = await list_agents_async(store, prefix=prefix)
        assert listed == list_agents(store, prefix=prefix)
        assert [(e.id, e.version) for e in listed] == [(prefix + "a", 1), (prefix + "b", 2)]
        assert [e.id for e in await list_agents_async(store, prefix=prefix, after=prefix + "a", limit=5)] == [prefix + "b"]
        with pytest.raises(ConflictError):
            await delete_agent_async(store, prefix + "a", if_version=7)
        assert await delete_agent_async(store, prefix + "a", if_version=1) == 1
        assert await delete_agent_async(store, prefix + "a") is None
        assert await expire_agents_async(store, dt.timedelta(days=36500), dry_run=True) == []
        with pytest.raises(InvalidArgumentError):
            await list_agents_async(store, limit=0)
        # Many at once, on the bounded pool.
        pages = await asyncio.gather(*(list_agents_async(store, prefix=prefix) for _ in range(50)))
        assert all([e.id for e in page] == [prefix + "b"] for page in pages)

    asyncio.run(main())
    assert a.get_state_versioned() == Versioned({"n": 0}, 0)
    if not backends.POSTGRES:

        async def expire_all() -> List[AgentInfo]:
            return await expire_agents_async(store, dt.timedelta(0), limit=5)

        assert [e.id for e in asyncio.run(expire_all())] == [prefix + "b"]
        assert b.get_state_versioned() == Versioned({}, 0)


def test_a_deletion_waiting_for_a_lock_is_cancelled(
    store: str, prefix: str, open_on: Callable[..., Agent]
) -> None:
    agent = open_on(prefix + "locked")
    agent.set_state({"n": 1})
    holder = Holder(open_on(prefix + "locked"))
    try:

        async def main() -> float:
            start = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(
                    delete_agent_async(store, prefix + "locked", busy_timeout_ms=30_000), timeout=0.3
                )
            return time.monotonic() - start

        took = asyncio.run(main())
        print(f"a deletion waiting for the lock: cancelled after {took * 1000:.0f} ms")
        assert took < 5
    finally:
        holder.release()
    # Nothing deleted: the holder's write committed on top of the state.
    assert agent.get_state_versioned() == Versioned({"n": 1, "holder": True}, 2)
    assert [(e.id, e.version) for e in list_agents(store, prefix=prefix)] == [(prefix + "locked", 2)]
    assert delete_agent(store, prefix + "locked", busy_timeout_ms=30_000) == 2


def test_the_api_is_exported() -> None:
    for name in ("list_agents", "delete_agent", "expire_agents", "list_agents_async", "delete_agent_async",
                 "expire_agents_async", "AgentInfo"):
        assert name in agent_state.__all__
    assert AgentInfo._fields == ("id", "version", "bytes", "written_at")
    assert asyncio.iscoroutinefunction(list_agents_async)
