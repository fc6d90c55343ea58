"""The arguments of :class:`~agent_state.Agent` checked and encoded for the library: the open
options (one JSON object) and version numbers."""

from __future__ import annotations

import datetime as _dt
import operator
import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ._records import ChangeLogOption, InitialStateCallback, PathLike, Synchronous
from .codec import encode_state, encode_value
from .errors import InvalidArgumentError
from .values import JSONInt

_MAX_VERSION = 2**64 - 1


def int_arg(value: Any, what: str) -> int:
    """An integer argument: an int, or what ``operator.index`` takes, but not a bool
    (:class:`TypeError` otherwise)."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None


def check_version(value: Any, what: str) -> int:
    """Checks a version argument: an int (not a bool) from 0 to 2**64 - 1."""
    number = int_arg(value, what)
    if not 0 <= number <= _MAX_VERSION:
        raise InvalidArgumentError(f"{what} must be from 0 to 2**64 - 1, not {number}")
    return number


def store_path(path: PathLike) -> bytes:
    """The bytes of a store's path (or URI) for the library: ``str`` and ``bytes`` unchanged,
    other path-like objects through ``os.fspath``; a NUL byte raises
    :class:`~agent_state.InvalidArgumentError` (C would cut the path there)."""
    raw_path = os.fsencode(path)
    if b"\0" in raw_path:
        raise InvalidArgumentError("the path contains a NUL byte")
    return raw_path


_SECOND = _dt.timedelta(seconds=1)


def change_log_json(value: Any) -> str:
    """The JSON of the ``change_log`` open option (the library checks what it means)."""
    if isinstance(value, Mapping):
        items: Dict[Any, Any] = {}
        for key, v in value.items():
            if isinstance(v, _dt.timedelta):
                whole, rest = divmod(v, _SECOND)
                v = whole + (1 if rest else 0)  # rounded up to whole seconds
            if type(v) is int:
                v = JSONInt(v)  # a plain JSON number at any size, never a $bigint
            items[key] = v
        return encode_value(items)
    return encode_value(value)


def text_arg(value: Any, what: str) -> bytes:
    """A string argument for the library (an agent id, a prefix): a ``str`` that UTF-8 can
    encode, without NUL (C would cut it there), as NUL-free UTF-8 bytes (the library checks its
    length)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(value).__name__}")
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"{what} is not valid UTF-8 (it has a lone surrogate)") from None
    if b"\0" in data:
        raise InvalidArgumentError(f"{what} contains a NUL character")
    return data


def agent_id_json(value: Any) -> str:
    """The JSON of the ``agent_id`` open option: a ``str`` that UTF-8 can encode (the library
    checks it is non-empty and at most 255 bytes)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"agent_id must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError("agent_id is not valid UTF-8 (it has a lone surrogate)") from None
    return encode_value(value)


def open_options(
    initial_state: Any,
    max_value_bytes: Optional[int],
    synchronous: Optional[Synchronous],
    busy_timeout_ms: Optional[int],
    read_only: Optional[bool],
    change_log: Optional[ChangeLogOption],
    agent_id: Optional[str] = None,
    max_connections: Optional[int] = None,
    server_timeout_ms: Optional[int] = None,
    default: Optional[Callable[[Any], Any]] = None,
) -> Tuple[Optional[bytes], Optional[InitialStateCallback]]:
    """The options JSON for ``agent_open`` (``None``: all defaults), and the initial-state hook
    when ``initial_state`` is a callable (registered once the agent is open). ``initial_state``
    is encoded with ``default`` (the agent's ``default`` option)."""
    options = []
    hook: Optional[InitialStateCallback] = None
    if initial_state is not None:
        if callable(initial_state) and not isinstance(initial_state, Mapping):
            hook = initial_state
        else:
            encoded = encode_state(initial_state, "initial_state", default)
            options.append('"initial_state":' + encoded.decode("utf-8"))
    for name, value in (
        ("max_value_bytes", max_value_bytes),
        ("synchronous", synchronous),
        ("busy_timeout_ms", busy_timeout_ms),
        ("server_timeout_ms", server_timeout_ms),
        ("read_only", read_only),
    ):
        if value is not None:
            options.append(f'"{name}":' + encode_value(value))
    if change_log is not None:
        options.append('"change_log":' + change_log_json(change_log))
    if agent_id is not None:
        options.append('"agent_id":' + agent_id_json(agent_id))
    if max_connections is not None:
        options.append('"max_connections":' + encode_value(max_connections))
    return (("{" + ",".join(options) + "}").encode("utf-8") if options else None), hook


def store_options(
    synchronous: Optional[Synchronous],
    busy_timeout_ms: Optional[int],
    read_only: Optional[bool],
    max_connections: Optional[int],
    server_timeout_ms: Optional[int],
) -> Optional[bytes]:
    """The options JSON of the store functions (``agent_store_list``, ``agent_store_delete``,
    ``agent_store_expire``): the connection's options of ``agent_open``, encoded as for an
    :class:`~agent_state.Agent` (``None``: all defaults)."""
    options, _ = open_options(
        None,
        None,
        synchronous,
        busy_timeout_ms,
        read_only,
        None,
        max_connections=max_connections,
        server_timeout_ms=server_timeout_ms,
    )
    return options
