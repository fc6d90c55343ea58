"""What the history tests share (test_history.py, test_compare_and_set.py, test_poll.py,
test_change_log.py): a recording on_change hook, the change_log option, and the check that
deliveries follow one another."""

from __future__ import annotations

import threading
from typing import Any, List, Tuple

from agent_state import Change


class Recorder:
    """An on_change hook that records every Change it is given (from any thread)."""

    def __init__(self) -> None:
        self.seen: List[Change] = []
        self._lock = threading.Lock()

    def __call__(self, change: Change) -> None:
        with self._lock:
            self.seen.append(change)

    def lines(self) -> List[Tuple[int, Any, Any, Any]]:
        """(version, prev, next, patch) of each delivery."""
        with self._lock:
            return [(c.version, c.prev, c.next, c.patch) for c in self.seen]


def logged(keep_last: int) -> dict:
    return {"change_log": {"keep_last": keep_last}}


def assert_chained(seen: List[Change], first_version: int = 1) -> None:
    """Versions increase by one from first_version, and each prev is the previous next."""
    for i, c in enumerate(seen):
        assert c.version == first_version + i, f"delivery {i} has version {c.version}"
        if i:
            assert c.prev == seen[i - 1].next, f"delivery {i} does not follow the one before"
