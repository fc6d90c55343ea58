"""The storage codec, reading side: the library's JSON text to Python values.

Gives the native type back where it is exact, and the wrapper types (:mod:`agent_state.values`,
:mod:`agent_state.jscollections`) where not, so that writing back what was read stores the same
JSON: numbers keep their exact text, ``$map`` and ``$set`` keep their order (see
:mod:`agent_state.codec` for the mapping). The one exception is a ``$date`` with nanoseconds
(9 fraction digits, as Go writes): a ``datetime`` holds microseconds, so it is read with the
last three digits truncated (toward the past, never into the next second), and nothing is
refused on read.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
from typing import Any, Callable, Dict, List, Tuple

from .errors import CodecError
from .limits import MAX_SAFE_INTEGER
from .jscollections import JSMap, JSSet, Tagged
from .values import (
    ARRAY_TYPECODES,
    TAGS,
    BigInt,
    JSONFloat,
    JSONInt,
    RegExp,
    TypedArray,
    int_from_text,
    regexp_flags_of,
)

__all__ = ["decode"]

_UTC = _dt.timezone.utc

def _parse_int(text: str) -> int:
    if len(text) <= 15:
        if text == "-0":
            return JSONInt(text)
        return int(text)
    value = int_from_text(text)
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value
    return JSONInt(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if float.__repr__(value) == text:
        return value
    return JSONFloat(text)


def _parse_constant(name: str) -> Any:
    raise CodecError(f"{name} is not a JSON number")


def _decode_date(text: str) -> Any:
    # The library admits a fraction of exactly 3, 6 or 9 digits (lengths 24, 27, 30).
    if len(text) not in (24, 27, 30) or text[4] != "-" or text[10] != "T" or text[19] != ".":
        raise ValueError(text)
    if text[-1] != "Z" or not text[20:-1].isdigit() or not text[20:-1].isascii():
        raise ValueError(text)
    year = int(text[0:4])
    if year < _dt.MINYEAR:
        raise ValueError("year before datetime.MINYEAR")
    # A datetime holds microseconds: nanoseconds are truncated, never rounded, so the value
    # read never moves past its second (.999999999 stays in the same second, day and year),
    # the rule every binding follows for digits finer than its type holds.
    fraction = text[20:-1][:6].ljust(6, "0")
    return _dt.datetime(
        year,
        int(text[5:7]),
        int(text[8:10]),
        int(text[11:13]),
        int(text[14:16]),
        int(text[17:19]),
        int(fraction),
        tzinfo=_UTC,
    )


def _decode_regexp(inner: Dict[str, Any]) -> Any:
    source, flags = inner["source"], inner["flags"]
    if not isinstance(source, str) or not isinstance(flags, str) or len(inner) != 2:
        raise ValueError("malformed $regexp")
    wrapper = RegExp(source, flags)
    if flags in ("", "i", "m", "s", "im", "is", "ms", "ims"):
        try:
            pattern = wrapper.compile()
        except (re.error, RecursionError, OverflowError, ValueError):
            return wrapper
        # Only when writing the pattern back gives exactly the same source and flags.
        if pattern.pattern == source and regexp_flags_of(pattern) == flags:
            return pattern
    return wrapper


def _decode_typed_array(inner: Dict[str, Any]) -> Any:
    if len(inner) != 2:
        raise ValueError("malformed $typedarray")
    name, data = inner["type"], base64.b64decode(inner["base64"], validate=True)
    wrapper = TypedArray(name, data)
    code = ARRAY_TYPECODES.get(name)
    if code is None:  # Uint8ClampedArray, Float16Array, DataView
        return wrapper
    return wrapper.to_array()


def _decode_tagged(tag: str, inner: Any) -> Any:
    if tag == "$date":
        return _decode_date(inner)
    if tag == "$bigint":
        if not isinstance(inner, str):
            raise ValueError("malformed $bigint")
        return BigInt(int_from_text(inner))
    if tag == "$set":
        members = JSSet(inner)
        if len(members) != len(inner):  # text the library refuses: keep it, do not drop members
            raise ValueError("a $set holding one member twice")
        return members
    if tag == "$map":
        return JSMap((k, v) for k, v in inner)
    if tag == "$arraybuffer":
        return base64.b64decode(inner, validate=True)
    if tag == "$typedarray":
        return _decode_typed_array(inner)
    if tag == "$regexp":
        return _decode_regexp(inner)
    raise ValueError(tag)  # pragma: no cover - TAGS is closed


def _object_pairs(pairs: List[Tuple[str, Any]]) -> Any:
    if len(pairs) == 1:
        tag, inner = pairs[0]
        if tag in TAGS:
            try:
                return _decode_tagged(tag, inner)
            except Exception:
                # Valid for the library but not representable here: keep it verbatim.
                return Tagged(tag, inner)
    return dict(pairs)


# -- Number caches ------------------------------------------------------------------------------
#
# The scanner hands every number token to parse_int / parse_float as text. The exact rules
# (_parse_int, _parse_float) cost a Python call each, and _parse_float a shortest-repr
# conversion; but a state is read again and again with mostly the same numbers. These caches
# map a token's text to its plain int or float (immutable values, so sharing them between
# results is safe; the JSONInt / JSONFloat wrappers are never cached, every read makes new
# ones). Their __getitem__ is the hook: a C-level dict lookup when the text was seen before,
# _parse_int / _parse_float otherwise. Both are bounded: full, they are emptied.

_CACHE_SIZE = 4096


class _IntCache(Dict[str, int]):
    __slots__ = ()

    def __missing__(self, text: str) -> int:
        value = _parse_int(text)
        if type(value) is int:
            if len(self) >= _CACHE_SIZE:
                self.clear()
            self[text] = value
        return value


class _FloatCache(Dict[str, float]):
    __slots__ = ()

    def __missing__(self, text: str) -> float:
        value = _parse_float(text)
        if type(value) is float:
            if len(self) >= _CACHE_SIZE:
                self.clear()
            self[text] = value
        return value


_int_cache = _IntCache()
_float_cache = _FloatCache()

#: The full decoder: every object goes through _object_pairs (tagged values).
_decoder = json.JSONDecoder(
    object_pairs_hook=_object_pairs,
    parse_float=_float_cache.__getitem__,
    parse_int=_int_cache.__getitem__,
    parse_constant=_parse_constant,
)

#: The fast decoder: the same number rules, and objects built by the C scanner itself (no hook),
#: for text in which no object can be a tagged value (see decode()).
_fast_decoder = json.JSONDecoder(
    parse_float=_float_cache.__getitem__,
    parse_int=_int_cache.__getitem__,
    parse_constant=_parse_constant,
)
# scan_once is an instance attribute that JSONDecoder.__init__ sets, which typeshed does not
# declare: read it with its type.
_fast_scan: Callable[[str, int], Tuple[Any, int]] = getattr(_fast_decoder, "scan_once")


def _may_hold_tags(text: str) -> bool:
    """False when no object of the JSON ``text`` can have a member name starting with ``$``
    (a tag): no ``"$`` anywhere, and no ``\\u0024`` escape. Matches inside strings only cost a
    trip through the full decoder."""
    if "$" in text and '"$' in text:
        return True
    return "\\" in text and "\\u0024" in text


def decode(text: Any) -> Any:
    """Decodes JSON text (``str`` or UTF-8 ``bytes``) as the library stores it into Python
    values (see the module documentation)."""
    if type(text) is not str:
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("utf-8")
        elif not isinstance(text, str):
            return _decoder.decode(text)  # json's own TypeError
    if not _may_hold_tags(text):
        # Without tags, the object_pairs_hook only ever builds dict(pairs): what the C scanner
        # builds by itself (same member order, last duplicate wins).
        try:
            value, end = _fast_scan(text, 0)
        except Exception:  # leading whitespace (StopIteration), malformed text: the full
            pass  # decoder gives its own answer
        else:
            if end == len(text):
                return value
    return _decoder.decode(text)


def _decode_slow(text: Any) -> Any:
    """:func:`decode` without the fast path (every object through the tag check)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    return _decoder.decode(text)


def decode_state(text: Any) -> Dict[str, Any]:
    """Decodes a state (a JSON object) into a ``dict``."""
    value = decode(text)
    if not isinstance(value, dict):  # pragma: no cover - the library only hands out objects
        raise CodecError(f"expected a JSON object, got {type(value).__name__}")
    return value
