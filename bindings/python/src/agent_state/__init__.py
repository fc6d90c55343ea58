"""Python binding of agent_state: one persistent, transactional JSON state value per agent.

>>> from agent_state import Agent
>>> with Agent(":memory:", initial_state={"status": "idle", "lastReply": "", "at": 0}) as agent:
...     agent.set_state({"status": "processing"})
{'status': 'processing', 'lastReply': '', 'at': 0}

``patch_state`` applies an RFC 6902 JSON Patch (appending to a list without sending it), and
``get_path``/``get_tail`` read one place of the state by JSON Pointer.
Every commit gets the next version (``get_state_versioned``, compare-and-set with
``set_state_if``/``replace_state_if``); a validator (``set_validator``) can reject changes before
they commit; with the agent's ``change_log`` option on, ``poll`` delivers the changes other
handles and processes made to the hooks, and ``changes_since``, ``state_at`` and ``restore`` read
the history.
``list_agents``, ``delete_agent`` and ``expire_agents`` (and their ``_async`` coroutines) list,
delete (erase) and expire a store's agents. ``watch`` follows the changes of any agents of a
store (by id or id prefix), committed by any process, as an iterator or an async iterator.

The C library is loaded through ctypes (no compiler needed): the copy bundled in the package,
or the one named by the ``AGENT_STATE_LIBRARY`` environment variable. The book's codec page
(docs/src/concepts/codec.md) has the mapping between Python values and stored JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._native import library_path
from ._records import (
    AgentInfo,
    Change,
    ChangeCallback,
    ChangeLogOption,
    InitialStateCallback,
    LoggedChange,
    StateChangedCallback,
    Synchronous,
    ValidatorCallback,
    Versioned,
)
from ._hook import Hook
from .agent import Agent, library_version
from ._async_hooks import AsyncHook
from .async_agent import AsyncAgent, ChangeFeed
from .codec import encode_value
from .options import ConnectionOptions, OpenOptions
from .store import (
    delete_agent,
    delete_agent_async,
    expire_agents,
    expire_agents_async,
    list_agents,
    list_agents_async,
)
from .decoding import decode
from . import errors as _errors
from .errors import *  # noqa: F403 - the exceptions and the status constants: errors.__all__
from .jscollections import JSMap, JSSet, Tagged
from .values import BigInt, JSONFloat, JSONInt, RegExp, TypedArray
from .watching import Watch, WatchEvent, WatchKind, watch

if TYPE_CHECKING:
    from .errors import ClosedError as ClosedError
else:

    def __getattr__(name: str) -> Any:
        """The deprecated names (``ClosedError``), with a ``DeprecationWarning``."""
        from .errors import deprecated_name

        return deprecated_name(__name__, name)


def _package_version() -> str:
    """The installed distribution's version, which setup.py took from the workspace's
    Cargo.toml (the one place the version is written); run from a source checkout without an
    installed distribution, that Cargo.toml's ``[workspace.package] version`` itself."""
    from importlib import metadata

    try:
        return metadata.version("agent_state")
    except metadata.PackageNotFoundError:
        pass
    import re
    from pathlib import Path

    for parent in Path(__file__).resolve().parents:
        manifest = parent / "Cargo.toml"
        if manifest.is_file():
            text = manifest.read_text("utf-8")
            match = re.search(r'^\[workspace\.package\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.M | re.S)
            if match:
                return match.group(1)
    return "0+unknown"


#: The version of this package: the workspace's (Cargo.toml), as ``library_version()`` is for
#: the library built from the same sources.
__version__ = _package_version()

# The public API, as the book's Python page documents it (tests/test_layout.py checks both). Everything else
# is internal, also the names of the package's modules that have no underscore.
__all__ = [
    "Agent",
    "AsyncAgent",
    "OpenOptions",
    "ConnectionOptions",
    "AsyncHook",
    "ChangeFeed",
    "Hook",
    "Change",
    "Versioned",
    "LoggedChange",
    "AgentInfo",
    "list_agents",
    "delete_agent",
    "expire_agents",
    "list_agents_async",
    "delete_agent_async",
    "expire_agents_async",
    "StateChangedCallback",
    "ChangeCallback",
    "ValidatorCallback",
    "InitialStateCallback",
    "ChangeLogOption",
    "Synchronous",
    "library_version",
    "library_path",
    "encode_value",
    "decode",
    "BigInt",
    "JSONInt",
    "JSONFloat",
    "JSMap",
    "JSSet",
    "TypedArray",
    "RegExp",
    "Tagged",
    "watch",
    "Watch",
    "WatchEvent",
    "WatchKind",
]
# The exceptions, one per status, and the status constants.
__all__ += _errors.__all__
