"""A lock held by another handle's write, for the tests of calls that wait for it."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from agent_state import Agent
from agent_state import _native


class Holder:
    """A second sync handle on the same store whose write holds the store's lock (its
    validator blocks on an event) until release(). On PostgreSQL a write takes the row lock
    before its transaction's work only under a cancel token, so the holder's write runs under
    one."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.inside = threading.Event()
        self.go = threading.Event()

        def block(change: Any) -> None:
            self.inside.set()
            self.go.wait(30)

        agent.set_validator(block)
        self.thread = threading.Thread(target=self._write)
        self.thread.start()
        assert self.inside.wait(30), "the holder's write did not start"

    def _write(self) -> None:
        lib = _native.library()
        token = ctypes.c_uint64(0)
        lib.agent_cancel_new(-1, ctypes.byref(token))
        lib.agent_cancel_bind(token.value)
        try:
            self.agent.set_state({"holder": True})
        finally:
            lib.agent_cancel_bind(0)
            lib.agent_cancel_free(token.value)

    def release(self) -> None:
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
