"""The storage codec, Python side: Python values to the library's JSON text and back.

Writing (``encode_*``) maps:

==========================================  ==================================================
Python                                      JSON stored
==========================================  ==================================================
``None``, ``bool``, ``str``                 ``null``, ``true``/``false``, string
``int`` with ``abs(n) <= 2**53 - 1``        number
``int`` beyond that (and :class:`BigInt`)   ``{"$bigint": "<decimal>"}``
:class:`JSONInt`                            number, its exact text
``float`` (finite), :class:`JSONFloat`      number (``repr`` text / its exact text)
``decimal.Decimal`` (finite)                number, ``str(d)``
``dict`` with only ``str`` keys             object
``dict`` with any other key, :class:`JSMap` ``{"$map": [[k, v], ...]}``
``list``, ``tuple``                         array
``set``, ``frozenset``, :class:`JSSet`      ``{"$set": [v, ...]}``
``datetime`` (timezone-aware)               ``{"$date": "YYYY-MM-DDTHH:MM:SS.sssZ"}`` (UTC)
``bytes``, ``bytearray``, ``memoryview``    ``{"$arraybuffer": "<base64>"}``
``array.array``, :class:`TypedArray`        ``{"$typedarray": {"type": ..., "base64": ...}}``
``re.Pattern`` (str), :class:`RegExp`       ``{"$regexp": {"source": ..., "flags": ...}}``
:class:`Tagged`                             ``{tag: value}``
==========================================  ==================================================

Everything else raises :class:`~agent_state.CodecError` before any call into the library:
functions and arbitrary objects, circular references, NaN and infinities, naive datetimes,
datetimes with sub-millisecond precision (the stored form has milliseconds; they are refused
rather than silently truncated), ``date`` and ``time`` objects, bytes patterns, strings with lone
surrogates, and a ``dict`` whose only key is a tag name such as ``"$date"`` (it would be read
back as a tagged value).

Reading (``decode``) gives the native type back where it is exact, and the wrapper types of
:mod:`agent_state.values` where not, so that writing back what was read stores the same JSON:
numbers keep their exact text, ``$map`` and ``$set`` keep their order.
"""

from __future__ import annotations

import array
import base64
import datetime as _dt
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .errors import CodecError, InvalidArgumentError
from .values import (
    ARRAY_TYPECODES,
    TAGS,
    BigInt,
    JSMap,
    JSONFloat,
    JSONInt,
    JSSet,
    RegExp,
    Tagged,
    TypedArray,
    array_to_le_bytes,
    identity_of_text,
    int_from_text,
    int_to_text,
    regexp_flags_of,
    typed_array_name,
)

__all__ = [
    "MAX_SAFE_INTEGER",
    "encode_value",
    "encode_state",
    "decode",
    "decode_state",
]

#: The largest integer JavaScript's numbers hold exactly (``Number.MAX_SAFE_INTEGER``). Python
#: ints beyond it (in absolute value) are written as ``$bigint``.
MAX_SAFE_INTEGER = 2**53 - 1

#: How deep the binding itself will recurse; the library refuses more than 64 levels anyway.
_MAX_DEPTH = 200

_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_UTC = _dt.timezone.utc


class _Encoder:
    """One encoding run: output parts, the containers being encoded (cycle detection), and the
    path for error messages."""

    __slots__ = ("out", "active", "path")

    def __init__(self) -> None:
        self.out: List[str] = []
        self.active: Set[int] = set()
        self.path: List[str] = []

    def fail(self, message: str) -> CodecError:
        where = "/" + "/".join(self.path) if self.path else "/"
        return CodecError(f"{message} at {where}")

    def sub(self, value: Any) -> str:
        """Encodes ``value`` to its own string (for keys and elements checked for duplicates)."""
        saved = self.out
        self.out = []
        try:
            self.value(value)
            return "".join(self.out)
        finally:
            self.out = saved

    def enter(self, container: Any) -> None:
        ident = id(container)
        if ident in self.active:
            raise self.fail(f"circular reference to a {type(container).__name__}")
        if len(self.active) >= _MAX_DEPTH:
            raise self.fail(f"nesting deeper than {_MAX_DEPTH} levels")
        self.active.add(ident)

    def value(self, v: Any) -> None:
        out = self.out
        t = type(v)
        if t is str:
            out.append(_encode_str(v))
        elif v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif t is int:
            if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                out.append(int.__repr__(v))
            else:
                out.append('{"$bigint":"' + int_to_text(v) + '"}')
        elif t is float:
            out.append(self.float_text(v))
        elif t is dict:
            self.mapping(v, v.items())
        elif t is list or t is tuple:
            self.sequence(v)
        else:
            self.other(v)

    def float_text(self, v: float) -> str:
        if math.isfinite(v):
            return float.__repr__(v)
        raise self.fail(f"{v!r} cannot be stored: NaN and infinities are not JSON numbers")

    def sequence(self, v: Any) -> None:
        self.enter(v)
        self.out.append("[")
        for i, item in enumerate(v):
            if i:
                self.out.append(",")
            self.path.append(str(i))
            self.value(item)
            self.path.pop()
        self.out.append("]")
        self.active.discard(id(v))

    def mapping(self, container: Any, items: Any) -> None:
        items = list(items)
        if not all(type(k) is str or isinstance(k, str) for k, _ in items):
            self.js_map(container, items)
            return
        if len(items) == 1 and items[0][0] in TAGS:
            raise self.fail(
                f"a dict whose only key is {items[0][0]!r} would be read back as a tagged value; "
                "store the native type (datetime, set, bytes, ...) or use agent_state.Tagged"
            )
        self.enter(container)
        out = self.out
        out.append("{")
        first = True
        for k, item in items:
            if not first:
                out.append(",")
            first = False
            out.append(_encode_str(str.__str__(k)))
            out.append(":")
            self.path.append(k)
            self.value(item)
            self.path.pop()
        out.append("}")
        self.active.discard(id(container))

    def js_map(self, container: Any, items: List[Tuple[Any, Any]]) -> None:
        self.enter(container)
        seen: Set[str] = set()
        parts = []
        for i, (k, item) in enumerate(items):
            self.path.append(f"$map/{i}")
            key_text = self.sub(k)
            identity = identity_of_text(key_text)
            if identity in seen:
                raise self.fail(f"two keys of this map are the same for the library ({key_text})")
            seen.add(identity)
            parts.append("[" + key_text + "," + self.sub(item) + "]")
            self.path.pop()
        self.out.append('{"$map":[' + ",".join(parts) + "]}")
        self.active.discard(id(container))

    def js_set(self, container: Any, items: Any) -> None:
        self.enter(container)
        seen: Set[str] = set()
        parts = []
        for i, item in enumerate(items):
            self.path.append(f"$set/{i}")
            text = self.sub(item)
            identity = identity_of_text(text)
            if identity in seen:
                raise self.fail(f"two elements of this set are the same for the library ({text})")
            seen.add(identity)
            parts.append(text)
            self.path.pop()
        self.out.append('{"$set":[' + ",".join(parts) + "]}")
        self.active.discard(id(container))

    def other(self, v: Any) -> None:
        out = self.out
        if isinstance(v, str):
            out.append(_encode_str(str.__str__(v)))
        elif isinstance(v, JSONInt):
            out.append(v.json)
        elif isinstance(v, BigInt):
            out.append('{"$bigint":"' + int_to_text(v) + '"}')
        elif isinstance(v, int):  # IntEnum, IntFlag, other int subclasses: by value
            self.value(int(v))
        elif isinstance(v, JSONFloat):
            out.append(v.json)
        elif isinstance(v, float):
            out.append(self.float_text(float(v)))
        elif isinstance(v, Decimal):
            if not v.is_finite() or not math.isfinite(float(v)):
                raise self.fail(f"{v!r} is outside the range of a double")
            # The library writes exponent markers as "e" with a sign ("1E+2" -> "1e+2").
            out.append(str(v).replace("E", "e"))
        elif isinstance(v, _dt.datetime):
            out.append('{"$date":"' + self.date_text(v) + '"}')
        elif isinstance(v, (_dt.date, _dt.time)):
            raise self.fail(
                f"a {type(v).__name__} is not an instant; store a timezone-aware datetime"
            )
        elif isinstance(v, (bytes, bytearray, memoryview)):
            data = bytes(v) if not isinstance(v, memoryview) else v.tobytes()
            out.append('{"$arraybuffer":"' + base64.b64encode(data).decode("ascii") + '"}')
        elif isinstance(v, array.array):
            try:
                name = typed_array_name(v)
            except CodecError as e:
                raise self.fail(e.message) from None
            self.typed_array(name, array_to_le_bytes(v))
        elif isinstance(v, TypedArray):
            self.typed_array(v.type, v.data)
        elif isinstance(v, RegExp):
            self.regexp(v.source, v.flags)
        elif isinstance(v, re.Pattern):
            if not isinstance(v.pattern, str):
                raise self.fail("a bytes pattern cannot be stored; use a str pattern")
            flags = regexp_flags_of(v)
            if flags is None:
                raise self.fail(
                    "only the re flags IGNORECASE, MULTILINE and DOTALL have JavaScript twins (i, m, s)"
                )
            self.regexp(v.pattern, flags)
        elif isinstance(v, Tagged):
            self.enter(v)
            out.append("{" + _encode_str(v.tag) + ":")
            self.path.append(v.tag)
            self.value(v.value)
            self.path.pop()
            out.append("}")
            self.active.discard(id(v))
        elif isinstance(v, JSMap):
            self.js_map(v, v.pairs())
        elif isinstance(v, (JSSet, set, frozenset)):
            self.js_set(v, list(v))
        elif isinstance(v, Mapping):
            self.mapping(v, v.items())
        elif isinstance(v, (list, tuple)):
            self.sequence(v)
        else:
            what = getattr(type(v), "__qualname__", type(v).__name__)
            raise self.fail(f"a value of type {what} cannot be stored")

    def date_text(self, v: _dt.datetime) -> str:
        if v.tzinfo is None or v.utcoffset() is None:
            raise self.fail(
                f"naive datetime {v.isoformat()} is ambiguous; give it a timezone (e.g. timezone.utc)"
            )
        try:
            u = v.astimezone(_UTC)
        except (OverflowError, ValueError) as e:
            raise self.fail(f"datetime {v.isoformat()} is out of range in UTC ({e})") from None
        if u.microsecond % 1000:
            raise self.fail(
                f"datetime {v.isoformat()} has sub-millisecond precision; the stored form keeps "
                "milliseconds, so round it first (refused rather than silently truncated)"
            )
        return (
            f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:"
            f"{u.second:02d}.{u.microsecond // 1000:03d}Z"
        )

    def typed_array(self, name: str, data: bytes) -> None:
        self.out.append(
            '{"$typedarray":{"type":"' + name + '","base64":"' + base64.b64encode(data).decode("ascii") + '"}}'
        )

    def regexp(self, source: str, flags: str) -> None:
        self.out.append(
            '{"$regexp":{"source":' + _encode_str(source) + ',"flags":' + _encode_str(flags) + "}}"
        )


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise CodecError(
            f"a string holds a lone surrogate ({text[e.start:e.end]!r}), which is not valid Unicode"
        ) from None


def _finish(enc: _Encoder) -> str:
    text = "".join(enc.out)
    _utf8(text)
    return text


# -- The fast path of encoding ----------------------------------------------------------------
#
# Most states and patches hold nothing but dicts with str keys, lists, str, safe ints, finite
# floats, bools and None. For those, the C encoder of the json module writes exactly what
# _Encoder writes (the same string escaping function, int.__repr__, float.__repr__, the same
# separators), several times faster. _plain() proves that a value is of that kind: exact types
# only (subclasses such as JSONInt, JSONFloat, IntEnum or a str subclass take the slow path),
# ints within the safe range, no dict that would be read back as a tagged value, bounded
# nesting (so also no cycle). What it does not check (NaN and infinities, lone surrogates)
# makes the fast path raise ValueError, and the slow path then reports it properly.

#: Containers nested deeper than this take the slow path (the library refuses more than 64).
_FAST_DEPTH = 100
_LEAF_TYPES = frozenset([str, float, bool, type(None)])


def _plain(container: Any, depth: int) -> bool:
    """True if ``container`` (an exact ``dict``, ``list`` or ``tuple``) holds only values the
    fast path writes exactly as :class:`_Encoder` does."""
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
            chunks = make(None, _never_called, _encode_str, None, ":", ",", False, False, False)
            sample = {"a": [1, -0.5, "\u00e9\n", None, True, ()], "": {}}
            if "".join(chunks(sample, 0)) == '{"a":[1,-0.5,"\u00e9\\n",null,true,[]],"":{}}':
                return chunks  # type: ignore[no-any-return]
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


def encode_value(value: Any) -> str:
    """Encodes any storable value as compact JSON text (the form the library stores).

    Raises :class:`~agent_state.CodecError` for values that cannot be stored.
    """
    t = type(value)
    if t is dict or t is list:
        text = _encode_fast(value)
        if text is not None and (text.isascii() or _utf8_ok(text)):
            return text
    enc = _Encoder()
    enc.value(value)
    return _finish(enc)


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode_state(value: Any, what: str = "state") -> bytes:
    """Encodes a state or merge patch: a mapping with ``str`` keys, as UTF-8 JSON text.

    Raises ``TypeError`` for a value that is not a mapping, :class:`~agent_state.InvalidArgumentError`
    for a mapping that is not a JSON object (non-``str`` keys, a :class:`JSMap`), and
    :class:`~agent_state.CodecError` for contents that cannot be stored.
    """
    if type(value) is dict:
        text = _encode_fast(value)
        if text is not None:
            try:
                return text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: the slow path reports it
                pass
    return _encode_state_slow(value, what)


def _encode_state_slow(value: Any, what: str = "state") -> bytes:
    """:func:`encode_state` without the fast path (every value through :class:`_Encoder`)."""
    if isinstance(value, JSMap) or not isinstance(value, Mapping):
        if isinstance(value, JSMap):
            raise InvalidArgumentError(f"the {what} must be a JSON object (a dict with str keys), not a JSMap")
        raise TypeError(f"the {what} must be a dict, not {type(value).__name__}")
    enc = _Encoder()
    items = list(value.items())
    for k, _ in items:
        if not isinstance(k, str):
            raise InvalidArgumentError(
                f"the {what} must be a JSON object: its keys must be str, not {type(k).__name__}"
            )
    enc.mapping(value, items)
    return _utf8("".join(enc.out))


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


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
    if len(text) != 24 or text[4] != "-" or text[10] != "T" or text[-1] != "Z":
        raise ValueError(text)
    year = int(text[0:4])
    if year < _dt.MINYEAR:
        raise ValueError("year before datetime.MINYEAR")
    return _dt.datetime(
        year,
        int(text[5:7]),
        int(text[8:10]),
        int(text[11:13]),
        int(text[14:16]),
        int(text[17:19]),
        int(text[20:23]) * 1000,
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
    if code is None:  # Uint8ClampedArray, Float16Array
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
        return JSSet(inner)
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
_fast_scan = _fast_decoder.scan_once


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


def json_text(value: Any, what: str = "state") -> bytes:
    """Internal: raw JSON input for the ``*_json`` methods, as UTF-8 bytes."""
    if isinstance(value, str):
        # Lone surrogates pass through as (invalid) UTF-8: the library reports AGENT_ERR_JSON.
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"the {what} JSON must be str or bytes, not {type(value).__name__}")
