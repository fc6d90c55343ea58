"""The fast path of encoding (see :mod:`agent_state.codec`): plain values through the C encoder
of the json module."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from .limits import MAX_DEPTH, MAX_SAFE_INTEGER
from .values import TAGS

_encode_str: Callable[[str], str] = json.encoder.encode_basestring

# Most states and patches hold nothing but dicts with str keys, lists, str, safe ints, finite
# floats, bools and None. For those, the C encoder of the json module writes exactly what
# _Encoder writes (the same string escaping function, int.__repr__, float.__repr__, the same
# separators), several times faster. _plain() proves that a value is of that kind: exact types
# only (subclasses such as JSONInt, JSONFloat, IntEnum or a str subclass take the slow path),
# ints within the safe range, no dict that would be read back as a tagged value, bounded
# nesting (so also no cycle). What it does not check (NaN and infinities, lone surrogates)
# makes the fast path raise ValueError, and the slow path then reports it properly.

#: Containers nested deeper than this take the slow path, which refuses them.
_FAST_DEPTH = MAX_DEPTH
_LEAF_TYPES = frozenset([str, float, bool, type(None)])


def _plain(container: Any, depth: int) -> bool:
    """True if ``container`` (an exact ``dict``, ``list`` or ``tuple``) holds only values the
    fast path writes exactly as ``codec._Encoder`` does."""
    if depth > _FAST_DEPTH:
        return False
    leaf = _LEAF_TYPES
    if type(container) is dict:
        if len(container) == 1 and next(iter(container)) in TAGS:
            return False  # a dict that would read back as a tagged value: the slow path refuses it
        items = container.items()
        for k, v in items:
            if type(k) is not str:
                return False
            t = type(v)
            if t in leaf:
                continue
            if t is int:
                if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                    continue
                return False
            if (t is dict or t is list or t is tuple) and _plain(v, depth + 1):
                continue
            return False
        return True
    for v in container:
        t = type(v)
        if t in leaf:
            continue
        if t is int:
            if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                continue
            return False
        if (t is dict or t is list or t is tuple) and _plain(v, depth + 1):
            continue
        return False
    return True


def _never_called(value: Any) -> Any:  # pragma: no cover - _plain() lets no such value through
    raise TypeError(f"a value of type {type(value).__name__} on the fast path")


def _make_chunks() -> Callable[[Any, int], Any]:
    """``chunks(value, 0)``: the parts of ``value``'s compact JSON text, from the C encoder of the
    json module (what ``json.dumps(value, ensure_ascii=False, allow_nan=False,
    separators=(",", ":"))`` uses, without building an encoder object on every call)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            chunks: Callable[[Any, int], Any] = make(
                None, _never_called, _encode_str, None, ":", ",", False, False, False
            )
            sample = {"a": [1, -0.5, "\u00e9\n", None, True, ()], "": {}}
            if "".join(chunks(sample, 0)) == '{"a":[1,-0.5,"\u00e9\\n",null,true,[]],"":{}}':
                return chunks
        except Exception:  # pragma: no cover - another json implementation
            pass
    encoder = json.JSONEncoder(  # pragma: no cover - without the C accelerator
        ensure_ascii=False, allow_nan=False, check_circular=False, separators=(",", ":")
    )
    return lambda value, level: (encoder.encode(value),)  # pragma: no cover


_chunks = _make_chunks()


def _encode_fast(value: Any) -> Optional[str]:
    """The fast path: the JSON text of ``value`` (an exact dict or list), or None when the slow
    path must write it (or report what cannot be stored)."""
    if _plain(value, 1):
        try:
            return "".join(_chunks(value, 0))
        except (ValueError, TypeError):  # NaN or an infinity: the slow path reports it
            return None
    return None
