"""The arguments of :class:`~agent_state.Agent` and the store functions checked and encoded for
the library: the open options (one JSON object, from the keywords that ``options.py`` types) and
version numbers."""

from __future__ import annotations

import datetime as _dt
import operator
import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ._records import InitialStateCallback, PathLike
from .codec import encode_state, encode_value
from .errors import InvalidArgumentError
from .options import ConnectionOptions, OpenOptions
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


#: The keys of each options type, in the order they are declared (and encoded).
OPEN_KEYS: Tuple[str, ...] = tuple(OpenOptions.__annotations__)
CONNECTION_KEYS: Tuple[str, ...] = tuple(ConnectionOptions.__annotations__)

#: How an option's value becomes JSON, where ``encode_value`` is not enough (``initial_state``
#: is encoded apart, with the ``default`` encoder; ``default`` is the binding's own and never
#: sent to the library).
_ENCODERS: Dict[str, Callable[[Any], str]] = {"change_log": change_log_json, "agent_id": agent_id_json}


def check_keywords(options: Mapping[str, Any], keys: Tuple[str, ...], caller: str) -> None:
    """Raises :class:`TypeError`, as Python does for an unknown keyword, when ``options`` has a
    key that is not one of ``keys``."""
    for name in options:
        if name not in keys:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")


def options_json(
    options: Mapping[str, Any], keys: Tuple[str, ...], caller: str
) -> Tuple[Optional[bytes], Optional[InitialStateCallback]]:
    """The options JSON for ``agent_open`` (or a store function) of the keyword ``options`` of
    ``caller``, whose options type has ``keys`` (another key raises :class:`TypeError`, as an
    unknown keyword does), and the initial-state hook when ``initial_state`` is a callable
    (registered once the agent is open). A key given as ``None`` is left out; ``None`` for the
    JSON: every option left out (the library's defaults). ``initial_state`` is encoded with the
    ``default`` option."""
    check_keywords(options, keys, caller)
    default = options.get("default")
    parts = []
    hook: Optional[InitialStateCallback] = None
    for name in keys:
        value = options.get(name)
        if value is None or name == "default":
            continue
        if name == "initial_state":
            if callable(value) and not isinstance(value, Mapping):
                hook = value
                continue
            text = encode_state(value, "initial_state", default).decode("utf-8")
        else:
            text = _ENCODERS.get(name, encode_value)(value)
        parts.append(f'"{name}":{text}')
    return (("{" + ",".join(parts) + "}").encode("utf-8") if parts else None), hook
