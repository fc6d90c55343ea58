"""The store's size cap (the ``store_max_value_bytes`` open option): recorded in the store, it
is the cap of every agent opened later without its own ``max_value_bytes``; an agent's own cap
still wins. SQLite only: the cap is store-wide, and this suite's PostgreSQL agents share one
database (the core's PostgreSQL tests use one of their own)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_state import Agent, AsyncAgent, InvalidArgumentError, StateTooLargeError

pytestmark = pytest.mark.sqlite_only(
    "a store's cap is store-wide, and the suite's PostgreSQL agents share one database"
)

#: Over the library's default cap (2097152 bytes), under the one the tests record.
BIG = {"s": "z" * 3_000_000}


def test_the_store_remembers_its_cap(tmp_path: Path) -> None:
    with Agent(tmp_path / "plain.db") as plain:  # the default cap refuses BIG
        with pytest.raises(StateTooLargeError):
            plain.replace_state(BIG)

    path = tmp_path / "cap.db"
    with Agent(path, store_max_value_bytes=4_000_000) as recorder:
        recorder.set_state({"t": 0})
    with Agent(path) as later:  # the defaults: the store's cap
        assert later.replace_state(BIG) == BIG
    with Agent(path, max_value_bytes=1_000_000) as own:  # its own cap wins, and says so
        with pytest.raises(StateTooLargeError) as e:
            own.set_state({"t": 1})
        assert "this handle's max_value_bytes (1000000)" in e.value.message
        assert "store_max_value_bytes" in e.value.message
        assert own.get_state() == BIG  # reads are not capped


def test_an_async_open_records_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "cap.db"

    async def main() -> None:
        async with AsyncAgent.open(path, store_max_value_bytes=4_000_000) as recorder:
            await recorder.set_state({"t": 0})
        async with AsyncAgent.open(path) as later:
            assert await later.replace_state(BIG) == BIG

    asyncio.run(main())


def test_read_only_cannot_record_a_cap(tmp_path: Path) -> None:
    path = tmp_path / "cap.db"
    Agent(path).close()
    with pytest.raises(InvalidArgumentError, match="store_max_value_bytes"):
        Agent(path, read_only=True, store_max_value_bytes=4_000_000)
