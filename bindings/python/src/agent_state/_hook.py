"""The :class:`Hook`: the handle of one ``on_state_changed``/``on_change`` registration."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import _native
from ._native import call
from .errors import BadHandleError, InvalidArgumentError

if TYPE_CHECKING:  # pragma: no cover
    from .agent import Agent


class Hook:
    """The handle of a hook registration, returned by :meth:`Agent.on_state_changed` and
    :meth:`Agent.on_change`.

    Calling the handle calls the callback with the same arguments (so decorating a function
    keeps it callable);
    :meth:`remove` unregisters it; as a context manager it removes the hook on exit.

    Attributes:
        id: the library's id of the hook.
        callback: the registered callable.
    """

    __slots__ = ("_agent", "id", "callback", "_key", "__weakref__")

    def __init__(self, agent: "Agent[Any]", hook_id: int, callback: Callable[..., Any], key: int) -> None:
        self._agent = agent
        self.id = hook_id
        self.callback = callback
        self._key = key

    @property
    def active(self) -> bool:
        """True while the library still holds the hook (False after removal or close)."""
        return self._key in self._agent._callbacks

    def remove(self) -> bool:
        """Unregisters the hook: it is not called for changes delivered later (a delivery
        already running on another thread may still be inside it). Idempotent; returns True
        if this call removed it, False if it was already gone (removed, or the agent closed)."""
        handle = self._agent._handle
        if not handle:
            return False
        try:
            call(_native.library().agent_remove_hook, handle, self.id)
        except (InvalidArgumentError, BadHandleError):
            return False
        return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.callback(*args, **kwargs)

    def __enter__(self) -> "Hook":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"<agent_state.Hook id={self.id} {state} callback={self.callback!r}>"
