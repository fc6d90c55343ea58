"""Python binding of agent_state: one persistent, transactional JSON state value per agent.

>>> from agent_state import Agent
>>> with Agent(":memory:", initial_state={"status": "idle", "lastReply": "", "at": 0}) as agent:
...     agent.set_state({"status": "processing"})
{'status': 'processing', 'lastReply': '', 'at': 0}

The C library is loaded through ctypes (no compiler needed): the copy bundled in the package,
or the one named by the ``AGENT_STATE_LIBRARY`` environment variable. See ``README.md`` for the
codec mapping between Python values and stored JSON.
"""

from __future__ import annotations

from ._native import LIBRARY_ENV, library_path
from .agent import Agent, Hook, InitialStateCallback, StateChangedCallback, library_version
from .codec import MAX_SAFE_INTEGER, decode, encode_value
from .errors import (
    AGENT_ERR_BAD_HANDLE,
    AGENT_ERR_BUSY,
    AGENT_ERR_CODEC,
    AGENT_ERR_HOOK,
    AGENT_ERR_INVALID_ARGUMENT,
    AGENT_ERR_JSON,
    AGENT_ERR_PANIC,
    AGENT_ERR_STORAGE,
    AGENT_ERR_TOO_LARGE,
    AGENT_OK,
    AgentError,
    BadHandleError,
    BusyError,
    ClosedError,
    CodecError,
    HookError,
    InvalidArgumentError,
    JSONError,
    PanicError,
    StateTooLargeError,
    StorageError,
    error_for_status,
    status_name,
)
from .values import TAGS, BigInt, JSMap, JSONFloat, JSONInt, JSSet, RegExp, Tagged, TypedArray

#: The version of this package.
__version__ = "0.2.0"

__all__ = [
    "Agent",
    "Hook",
    "StateChangedCallback",
    "InitialStateCallback",
    "library_version",
    "library_path",
    "LIBRARY_ENV",
    "encode_value",
    "decode",
    "MAX_SAFE_INTEGER",
    "TAGS",
    "BigInt",
    "JSONInt",
    "JSONFloat",
    "JSMap",
    "JSSet",
    "TypedArray",
    "RegExp",
    "Tagged",
    "AgentError",
    "InvalidArgumentError",
    "ClosedError",
    "BadHandleError",
    "JSONError",
    "CodecError",
    "StateTooLargeError",
    "StorageError",
    "BusyError",
    "HookError",
    "PanicError",
    "error_for_status",
    "status_name",
    "AGENT_OK",
    "AGENT_ERR_INVALID_ARGUMENT",
    "AGENT_ERR_BAD_HANDLE",
    "AGENT_ERR_JSON",
    "AGENT_ERR_CODEC",
    "AGENT_ERR_TOO_LARGE",
    "AGENT_ERR_STORAGE",
    "AGENT_ERR_BUSY",
    "AGENT_ERR_HOOK",
    "AGENT_ERR_PANIC",
]
