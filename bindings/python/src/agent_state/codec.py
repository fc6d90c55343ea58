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
``datetime`` (timezone-aware)               ``{"$date": "YYYY-MM-DDTHH:MM:SS.sss[sss]Z"}`` (UTC)
``bytes``, ``bytearray``, ``memoryview``    ``{"$arraybuffer": "<base64>"}``
``array.array``, :class:`TypedArray`        ``{"$typedarray": {"type": ..., "base64": ...}}``
``re.Pattern`` (str), :class:`RegExp`       ``{"$regexp": {"source": ..., "flags": ...}}``
:class:`Tagged`                             ``{tag: value}``
``uuid.UUID``                               string, ``str(u)``
``enum.Enum``                               its ``value``, written as a value is
``pathlib.PurePath``                        string, ``str(p)``
dataclass / pydantic model instance         object of its fields (:mod:`agent_state._models`)
==========================================  ==================================================

With a ``default`` function (the ``default`` option of ``Agent``, or of :func:`encode_value`),
a value of any other type is written as what ``default(value)`` returns, as ``json.dumps``
does; ``default`` raises to refuse it.

Everything else raises :class:`~agent_state.CodecError` before any call into the library:
functions and arbitrary objects, circular references, NaN and infinities, naive datetimes,
``date`` and ``time`` objects, bytes patterns, strings with lone
surrogates, a ``dict`` whose only key is a tag name such as ``"$date"`` (it would be read
back as a tagged value), and nesting deeper than the library's 64 levels, at any depth (counted
as the library counts: a ``$map`` takes three levels, a ``$set`` two, other tagged values one).

Reading is :mod:`agent_state.decoding`'s (``decode``): it gives the native type back where it is
exact, and the wrapper types where not, so that writing back what was read stores the same JSON:
numbers keep their exact text, ``$map`` and ``$set`` keep their order.

The wrapper types of :mod:`agent_state.values` are below this module; ``JSMap``, ``JSSet`` and
``Tagged`` (:mod:`agent_state.jscollections`) are above it, as their keys and equality are their
encoded JSON: this module knows them by their base :class:`Encodable` only.
"""

from __future__ import annotations

import array
import base64
import datetime as _dt
import enum
import json
import math
import re
import uuid
from collections.abc import Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .errors import CodecError, InvalidArgumentError
from ._models import model_fields
from .fast_encode import _encode_fast
from .limits import MAX_DEPTH, MAX_SAFE_INTEGER
from .values import (
    TAGS,
    BigInt,
    JSONFloat,
    JSONInt,
    RegExp,
    TypedArray,
    array_to_le_bytes,
    int_to_text,
    regexp_flags_of,
    typed_array_name,
)

__all__ = ["encode_value"]


_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_UTC = _dt.timezone.utc

#: A string literal, or the exponent marker of a number (after a digit), in JSON text.
_STRING_OR_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(?<=[0-9])[eE]([-+]?)')


def _exponent(match: "re.Match[str]") -> str:
    if match.group(0)[0] == '"':
        return match.group(0)
    return "e" + (match.group(1) or "+")


def identity_of_text(text: str) -> str:
    """What makes two ``$map`` keys or ``$set`` elements the same, from their encoded JSON: the
    library's rule. A number is compared by its value as a double, as JavaScript does
    (SameValueZero: ``1`` and ``1.0`` are one value, so are ``0`` and ``-0``); anything else by
    its JSON text as the library writes it (so two equal lists or dicts are the same key, and
    ``[1E2]`` is ``[1e+2]``)."""
    if text[0] in "-0123456789":
        number = float(text)
        if number not in (float("inf"), float("-inf")):
            return "#" + (number + 0.0).hex()  # + 0.0 turns -0.0 into 0.0
    if "e" in text or "E" in text:
        return _STRING_OR_EXPONENT.sub(_exponent, text)
    return text


class Encodable:
    """Base of the wrapper types that write themselves through the encoder (``JSMap``,
    ``JSSet``, ``Tagged``, in :mod:`agent_state.jscollections`). They need the encoder (their
    keys and equality are their encoded JSON), so the encoder knows them only by this base and
    the module stays free of an import cycle."""

    __slots__ = ()

    def _encode_with(self, enc: "_Encoder") -> None:
        """Writes this value with ``enc`` (one of its ``js_map``, ``js_set``, ``tagged``)."""
        raise NotImplementedError


class _Encoder:
    """One encoding run: output parts, the containers being encoded (cycle detection), the
    library's nesting level of the innermost one, and the path for error messages."""

    __slots__ = ("out", "active", "path", "level", "default")

    def __init__(self, default: Optional[Callable[[Any], Any]] = None) -> None:
        self.out: List[str] = []
        self.active: Set[int] = set()
        self.path: List[str] = []
        self.level = 0
        #: Called for a value of no storable type (json.dumps's ``default``), or None.
        self.default = default

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

    def enter(self, container: Any, levels: int = 1) -> None:
        """Starts writing ``container``, which takes ``levels`` nesting levels (see
        :data:`MAX_DEPTH`); :meth:`leave` ends it."""
        ident = id(container)
        if ident in self.active:
            raise self.fail(f"circular reference to a {type(container).__name__}")
        self.check_level(levels)
        self.level += levels
        self.active.add(ident)

    def leave(self, container: Any, levels: int = 1) -> None:
        self.level -= levels
        self.active.discard(id(container))

    def check_level(self, levels: int = 1) -> None:
        """Refuses a value taking ``levels`` more levels where the library would refuse it."""
        if self.level + levels > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH} levels, the most the library stores")

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
                self.check_level()
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
        self.leave(v)

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
        self.leave(container)

    def js_map(self, container: Any, items: List[Tuple[Any, Any]]) -> None:
        self.enter(container, 3)  # the tagged object, its array, each [key, value] pair
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
        self.leave(container, 3)

    def js_set(self, container: Any, items: Any) -> None:
        self.enter(container, 2)  # the tagged object and its array
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
        self.leave(container, 2)

    def other(self, v: Any) -> None:
        out = self.out
        if isinstance(v, str):
            out.append(_encode_str(str.__str__(v)))
        elif isinstance(v, JSONInt):
            out.append(v.json)
        elif isinstance(v, BigInt):
            self.check_level()
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
            self.check_level()
            out.append('{"$date":"' + self.date_text(v) + '"}')
        elif isinstance(v, (_dt.date, _dt.time)):
            raise self.fail(
                f"a {type(v).__name__} is not an instant; store a timezone-aware datetime"
            )
        elif isinstance(v, (bytes, bytearray, memoryview)):
            data = bytes(v) if not isinstance(v, memoryview) else v.tobytes()
            self.check_level()
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
        elif isinstance(v, Encodable):  # Tagged, JSMap, JSSet
            v._encode_with(self)
        elif isinstance(v, (set, frozenset)):
            self.js_set(v, list(v))
        elif isinstance(v, Mapping):
            self.mapping(v, v.items())
        elif isinstance(v, (list, tuple)):
            self.sequence(v)
        elif isinstance(v, enum.Enum):  # an IntEnum or a str Enum was written above, by value
            self.value(v.value)
        elif isinstance(v, uuid.UUID):
            out.append(_encode_str(str(v)))
        elif isinstance(v, PurePath):
            out.append(_encode_str(str(v)))
        else:
            members = model_fields(v, patch=False)
            if members is not None:  # a dataclass or pydantic model inside a value: whole
                self.mapping(v, members.items())
            elif self.default is not None:
                self.replaced(v)
            else:
                what = getattr(type(v), "__qualname__", type(v).__name__)
                raise self.fail(f"a value of type {what} cannot be stored")

    def replaced(self, v: Any) -> None:
        """Writes what the ``default`` function returns for ``v``, a value of no storable
        type, at ``v``'s place (same nesting level)."""
        assert self.default is not None
        ident = id(v)
        what = getattr(type(v), "__qualname__", type(v).__name__)
        if ident in self.active:
            raise self.fail(f"the default function returned the value it was given (a {what}), which cannot be stored")
        try:
            stand_in = self.default(v)
        except CodecError:
            raise
        except Exception as e:
            raise self.fail(f"a value of type {what} cannot be stored (default raised {type(e).__name__}: {e})") from e
        self.active.add(ident)
        try:
            self.value(stand_in)
        finally:
            self.active.discard(ident)

    def tagged(self, v: Any, tag: str, value: Any) -> None:
        """Writes ``{tag: value}`` (``v``, a ``Tagged``)."""
        out = self.out
        self.enter(v)
        out.append("{" + _encode_str(tag) + ":")
        self.path.append(tag)
        # The library counts the members of a $typedarray or $regexp (and the string of the
        # other leaf tags) as part of the tagged value's one level; $map and $set contents
        # count as their arrays and pairs do.
        leaf = 0 if tag in ("$map", "$set") else 1
        self.level -= leaf
        self.value(value)
        self.level += leaf
        self.path.pop()
        out.append("}")
        self.leave(v)

    def date_text(self, v: _dt.datetime) -> str:
        if v.tzinfo is None or v.utcoffset() is None:
            raise self.fail(
                f"naive datetime {v.isoformat()} is ambiguous; give it a timezone (e.g. timezone.utc)"
            )
        try:
            u = v.astimezone(_UTC)
        except (OverflowError, ValueError) as e:
            raise self.fail(f"datetime {v.isoformat()} is out of range in UTC ({e})") from None
        # The shortest of the stored form's exact fractions: milliseconds when the value has
        # no finer part (so a millisecond value is written exactly as before, and as
        # JavaScript writes it), microseconds otherwise, which is all a datetime holds.
        if u.microsecond % 1000:
            fraction = f"{u.microsecond:06d}"
        else:
            fraction = f"{u.microsecond // 1000:03d}"
        return (
            f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:"
            f"{u.second:02d}.{fraction}Z"
        )

    def typed_array(self, name: str, data: bytes) -> None:
        self.check_level()
        self.out.append(
            '{"$typedarray":{"type":"' + name + '","base64":"' + base64.b64encode(data).decode("ascii") + '"}}'
        )

    def regexp(self, source: str, flags: str) -> None:
        self.check_level()
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


def encode_value(value: Any, *, default: Optional[Callable[[Any], Any]] = None) -> str:
    """Encodes any storable value as compact JSON text (the form the library stores).

    ``default``, if given, is called for a value of no storable type and returns a storable
    stand-in (or raises), as ``json.dumps``'s ``default``. Raises
    :class:`~agent_state.CodecError` for values that cannot be stored.
    """
    t = type(value)
    if t is dict or t is list:
        text = _encode_fast(value)
        if text is not None and (text.isascii() or _utf8_ok(text)):
            return text
    enc = _Encoder(default)
    enc.value(value)
    return _finish(enc)


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode_state(value: Any, what: str = "state", default: Optional[Callable[[Any], Any]] = None) -> bytes:
    """Encodes a whole state: a mapping with ``str`` keys, or a dataclass or pydantic model
    instance (all its fields), as UTF-8 JSON text.

    Raises ``TypeError`` for a value that is neither, :class:`~agent_state.InvalidArgumentError`
    for a mapping that is not a JSON object (non-``str`` keys, a :class:`JSMap`), and
    :class:`~agent_state.CodecError` for contents that cannot be stored.
    """
    return encode_patch(value, what, default, partial=False)[0]


def encode_patch(
    value: Any,
    what: str = "patch",
    default: Optional[Callable[[Any], Any]] = None,
    partial: bool = True,
) -> Tuple[bytes, Optional[Dict[str, Any]]]:
    """Encodes a merge patch (``partial``: a model instance gives the fields it sets) or a
    whole state (not ``partial``: all of a model's fields), as :func:`encode_state`; and the
    dict the fast path wrote, when it was plain (``fast_encode._plain``), which lets
    ``_snapshot`` merge it into a known state itself (None otherwise)."""
    if type(value) is not dict and not isinstance(value, Mapping):
        members = model_fields(value, partial)
        if members is not None:
            value = members
    if type(value) is dict:
        text = _encode_fast(value)
        if text is not None:
            try:
                return text.encode("utf-8"), value
            except UnicodeEncodeError:  # a lone surrogate: the slow path reports it
                pass
    return _encode_state_slow(value, what, default), None


def _encode_state_slow(value: Any, what: str = "state", default: Optional[Callable[[Any], Any]] = None) -> bytes:
    """:func:`encode_state` without the fast path (every value through :class:`_Encoder`)."""
    if isinstance(value, Encodable) or not isinstance(value, Mapping):
        if isinstance(value, Mapping):  # a Mapping that encodes itself: a JSMap
            raise InvalidArgumentError(f"the {what} must be a JSON object (a dict with str keys), not a JSMap")
        raise TypeError(
            f"the {what} must be a dict (or a dataclass or pydantic model instance), not {type(value).__name__}"
        )
    enc = _Encoder(default)
    items = list(value.items())
    for k, _ in items:
        if not isinstance(k, str):
            raise InvalidArgumentError(
                f"the {what} must be a JSON object: its keys must be str, not {type(k).__name__}"
            )
    enc.mapping(value, items)
    return _utf8("".join(enc.out))


def json_text(value: Any, what: str = "state") -> bytes:
    """Internal: raw JSON input for the ``*_json`` methods, as UTF-8 bytes."""
    if isinstance(value, str):
        # Lone surrogates pass through as (invalid) UTF-8: the library reports AGENT_ERR_JSON.
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"the {what} JSON must be str or bytes, not {type(value).__name__}")
