"""A loop-lag monitor: how long an event loop was kept from running its tasks.

Used by the async tests (a call waiting for a lock must not block the loop) and by bench.py
(the stall of a 1 ms ticker while a thousand awaited calls are started and completed)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Optional

#: The ticker's period, in seconds.
TICK_S = 0.001


class LoopLag:
    """A task on the running loop that wakes every millisecond (``asyncio.sleep(0.001)``) and
    keeps the largest gap between two wake-ups (:attr:`largest`, seconds): the longest the loop
    was kept from running its tasks, plus the tick itself (on an idle loop, about 1 ms).

    Use it as ``async with LoopLag() as lag: ...`` (the gap is ``lag.largest`` afterwards) or
    with :meth:`start` and ``await`` :meth:`stop`. Made and used on one loop; not thread-safe.
    """

    def __init__(self) -> None:
        self.largest = 0.0
        self.ticks = 0
        self._stop = False
        self._task: "Optional[asyncio.Future[None]]" = None

    def start(self) -> "LoopLag":
        """Starts the ticker on the running loop (call it from a coroutine)."""
        self._task = asyncio.ensure_future(self._tick())
        return self

    async def _tick(self) -> None:
        last = time.perf_counter()
        while not self._stop:
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            self.largest = max(self.largest, now - last)
            self.ticks += 1
            last = now

    async def stop(self) -> float:
        """Stops the ticker (after its next tick) and returns :attr:`largest`."""
        self._stop = True
        assert self._task is not None, "LoopLag.stop() before start()"
        await self._task
        return self.largest

    async def __aenter__(self) -> "LoopLag":
        # One tick first: the measure starts on a running ticker, not with the task's start.
        self.start()
        while not self.ticks:
            await asyncio.sleep(TICK_S)
        self.largest = 0.0
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()
