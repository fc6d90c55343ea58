"""``await AsyncAgent.open(...)`` opens on a worker thread: while it waits for a server that
does not answer, the event loop keeps running other tasks (a ticker coroutine counts them);
the constructor, which opens on the calling thread, holds the loop for as long. The store
functions' coroutines open on a worker thread too."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import time
from typing import Any, Awaitable, Callable, Dict, Iterator, Tuple, TypeVar

import pytest

from agent_state import (
    AsyncAgent,
    InvalidArgumentError,
    UnavailableError,
    delete_agent_async,
    expire_agents_async,
    list_agents_async,
)

T = TypeVar("T")
Where = Callable[[Any], Tuple[Any, Dict[str, Any]]]

#: How long the silent server keeps an open waiting (the library's server_timeout_ms).
WAIT_MS = 1000


@pytest.fixture
def silent_server() -> Iterator[str]:
    """The URI of a PostgreSQL "server" that accepts connections (the kernel completes them:
    a listening socket's backlog) and never answers, so that an open waits for
    server_timeout_ms, whatever the backend of this run."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"postgresql://app@127.0.0.1:{listener.getsockname()[1]}/app?sslmode=disable"


async def _ticks_while(make: Callable[[], Awaitable[T]]) -> Tuple[int, BaseException]:
    """Runs ``make()`` (expected to fail) next to a ticker task; returns how many times the
    ticker ran while it was in progress, and what it raised."""
    ticks = 0
    running = False

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            if running:
                ticks += 1

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.02)  # the ticker is going
    running = True
    try:
        await make()
    except BaseException as exc:  # noqa: BLE001 - returned to the caller
        failure = exc
    else:  # pragma: no cover - a silent server never lets the open succeed
        raise AssertionError("the open succeeded against a server that never answers")
    finally:
        running = False
        task.cancel()
    return ticks, failure


def test_open_waits_for_the_server_off_the_event_loop(silent_server: str) -> None:
    async def main() -> None:
        ticks, failure = await _ticks_while(
            lambda: AsyncAgent.open(silent_server, agent_id="bot", server_timeout_ms=WAIT_MS)
        )
        assert isinstance(failure, UnavailableError), failure
        assert ticks >= 3, f"the loop ticked {ticks} times during a {WAIT_MS} ms open"

        # The constructor, by contrast, opens on the loop's thread: nothing else runs meanwhile
        # (which also shows that the ticker notices a blocked loop).
        async def construct() -> None:
            AsyncAgent(silent_server, agent_id="bot", server_timeout_ms=WAIT_MS)

        ticks, failure = await _ticks_while(construct)
        assert isinstance(failure, UnavailableError), failure
        assert ticks == 0

    asyncio.run(main())


def test_the_store_coroutines_open_off_the_event_loop(silent_server: str) -> None:
    calls: Dict[str, Callable[[], Awaitable[Any]]] = {
        "list_agents_async": lambda: list_agents_async(silent_server, server_timeout_ms=WAIT_MS),
        "delete_agent_async": lambda: delete_agent_async(silent_server, "bot", server_timeout_ms=WAIT_MS),
        "expire_agents_async": lambda: expire_agents_async(
            silent_server, dt.timedelta(days=1), server_timeout_ms=WAIT_MS
        ),
    }

    async def main() -> None:
        for name, make in calls.items():
            ticks, failure = await _ticks_while(make)
            assert isinstance(failure, UnavailableError), (name, failure)
            assert ticks >= 3, f"{name}: the loop ticked {ticks} times during a {WAIT_MS} ms open"

    asyncio.run(main())


def test_cancelling_an_open_ends_its_wait_for_the_server(silent_server: str) -> None:
    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(
                AsyncAgent.open(silent_server, agent_id="bot", server_timeout_ms=600_000), 0.2
            )
        return time.monotonic() - started

    # Not a latency bound: only far sooner than the ten minutes the open would wait.
    assert asyncio.run(main()) < 120


@pytest.mark.any_backend
def test_open_gives_a_working_agent(tmp_path: Any, store_of: Where) -> None:
    target, extra = store_of(tmp_path / "conv.db")

    async def main() -> None:
        agent = await AsyncAgent.open(target, initial_state={"status": "idle"}, **extra)
        try:
            assert isinstance(agent, AsyncAgent) and not agent.closed
            assert await agent.set_state({"status": "processing"}) == {"status": "processing"}
        finally:
            await agent.aclose()

        async with AsyncAgent.open(target, **extra) as again:
            assert await again.get_state() == {"status": "processing"}
            seen = []
            again.on_state_changed(lambda next, prev: seen.append(next))
            await again.set_state({"turn": 1})
            assert seen == [{"status": "processing", "turn": 1}]
        assert again.closed

        # Bad arguments fail the await, as they fail the constructor.
        with pytest.raises(InvalidArgumentError):
            await AsyncAgent.open(target, max_connections=0, **extra)

    asyncio.run(main())
