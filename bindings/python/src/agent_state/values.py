"""Value types for the storage codec's tagged values where Python has no exact native twin.

The codec maps most tagged values to native Python types (see :mod:`agent_state.codec`). The
types here fill the gaps, so that a state read with ``get_state()`` and written back stores
exactly the same JSON:

* :class:`BigInt` — an ``int`` that is stored as ``{"$bigint": "..."}`` whatever its size.
* :class:`JSONInt` / :class:`JSONFloat` — an ``int`` / ``float`` that remembers the exact text
  of a JSON number (``1E2``, ``-0``, ``1.50``, ``9007199254740993``), so it is written back as is.
* :class:`TypedArray` — a ``$typedarray`` of a kind ``array.array`` cannot hold
  (``Uint8ClampedArray``, ``Float16Array``), or built explicitly.
* :class:`RegExp` — a ``$regexp`` whose flags or source Python's ``re`` cannot represent exactly.

The wrapper types whose equality is their encoded JSON (``JSMap``, ``JSSet``, ``Tagged``) are in
:mod:`agent_state.jscollections`, above the encoder they need: this module sits below it (the
encoder writes these types), so it imports nothing of the codec.
"""

from __future__ import annotations

import array
import re
import struct
import sys
from collections.abc import Iterable
from decimal import MAX_EMAX, MAX_PREC, Context
from typing import Any, Dict, Optional, Tuple, Union

from .errors import CodecError

__all__ = ["BigInt", "JSONInt", "JSONFloat", "TypedArray", "RegExp"]

#: The member names that make a single-member JSON object a tagged value.
TAGS = frozenset(["$date", "$bigint", "$map", "$set", "$arraybuffer", "$typedarray", "$regexp"])

#: JavaScript typed array names, with (struct format character, element size in bytes).
TYPED_ARRAY_TYPES: Dict[str, Tuple[str, int]] = {
    "Int8Array": ("b", 1),
    "Uint8Array": ("B", 1),
    "Uint8ClampedArray": ("B", 1),
    "Int16Array": ("h", 2),
    "Uint16Array": ("H", 2),
    "Float16Array": ("e", 2),
    "Int32Array": ("i", 4),
    "Uint32Array": ("I", 4),
    "Float32Array": ("f", 4),
    "Float64Array": ("d", 8),
    "BigInt64Array": ("q", 8),
    "BigUint64Array": ("Q", 8),
    # A JavaScript DataView: bytes with no element type (read as a TypedArray holder).
    "DataView": ("B", 1),
}

_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z")
_BIG_CONTEXT = Context(prec=MAX_PREC, Emax=MAX_EMAX)


def int_from_text(text: str) -> int:
    """Parses a decimal integer of any length (Python 3.11+ limits ``int(str)`` to 4300 digits;
    going through ``Decimal`` avoids that limit)."""
    if len(text) <= 4000:
        return int(text)
    return int(_BIG_CONTEXT.create_decimal(text))


def int_to_text(value: int) -> str:
    """Formats an integer of any size in decimal (see :func:`int_from_text`)."""
    try:
        return int.__repr__(value)
    except ValueError:  # the int/str conversion digit limit of Python 3.11+
        return str(_BIG_CONTEXT.create_decimal(int(value)))


class BigInt(int):
    """An ``int`` stored as a JavaScript BigInt: ``{"$bigint": "<decimal>"}``.

    ``get_state()`` returns ``$bigint`` values as ``BigInt``, so they are written back as
    ``$bigint`` even when small. Wrap a plain ``int`` to force the BigInt form: ``BigInt(5)``.
    Arithmetic on a ``BigInt`` gives plain ``int`` results. It prints as the number it is:
    ``str()``, ``format()`` and f-strings give its digits, as for an ``int``; only ``repr()``
    names the type.
    """

    def __repr__(self) -> str:
        return f"BigInt({int_to_text(self)})"

    # A value read from the store ends up in prompts, URLs and log lines: int's own str (which
    # would otherwise be the repr above) and format, so it reads as the plain number would.
    def __str__(self) -> str:
        return int_to_text(self)

    def __format__(self, spec: str) -> str:
        return int_to_text(self) if not spec else int.__format__(int(self), spec)


class JSONInt(int):
    """An ``int`` written as a plain JSON number with an exact text, never as ``$bigint``.

    ``get_state()`` returns JSON integer numbers outside JavaScript's safe range
    (``|n| > 2**53 - 1``) and the text ``-0`` as ``JSONInt``, so that writing them back stores
    the same number text. Wrap a plain ``int`` to store it as a JSON number whatever its size:
    ``JSONInt(2**64)`` (numbers beyond the range of a double are refused by the library).
    ``str()`` and ``format()`` are those of the ``int`` (``-0`` prints as ``0``); only
    ``repr()`` shows the type and the text.

    Attributes:
        json: the exact JSON text of the number.
    """

    json: str

    def __new__(cls, value: Union[int, str]) -> "JSONInt":
        if isinstance(value, str):
            if not _JSON_INT.match(value):
                raise CodecError(f"{value!r} is not a JSON integer")
            self = super().__new__(cls, int_from_text(value))
            self.json = value
            return self
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"JSONInt takes an int or the text of a JSON integer, not {type(value).__name__}")
        self = super().__new__(cls, value)
        self.json = value.json if isinstance(value, JSONInt) else int_to_text(value)
        return self

    def __repr__(self) -> str:
        return f"JSONInt({self.json!r})"

    # As for BigInt: it prints as the plain int would, not as its repr.
    def __str__(self) -> str:
        return int_to_text(self)

    def __format__(self, spec: str) -> str:
        return int_to_text(self) if not spec else int.__format__(int(self), spec)

    def __reduce__(self) -> Any:
        return (JSONInt, (self.json,))


class JSONFloat(float):
    """A ``float`` that keeps the exact text of the JSON number it was read from.

    ``get_state()`` returns a JSON number with a fraction or exponent as a plain ``float`` when
    Python's ``repr`` gives back the same text (``1.5``, ``0.1``, ``100.0``), and as a
    ``JSONFloat`` otherwise (``1E2``, ``1.50``, ``1e-400``), so that writing it back stores the
    same text. ``JSONFloat("2.50")`` writes ``2.50``. Arithmetic gives plain ``float`` results.
    ``str()`` and ``format()`` are those of the ``float`` (``JSONFloat("0.10")`` prints ``0.1``,
    as ``0.10`` does in Python and in JavaScript); only ``repr()`` shows the type and the
    text. The exact digits are in :attr:`json` (``Decimal(x.json)``).

    Attributes:
        json: the exact JSON text of the number.
    """

    __slots__ = ("json",)
    json: str

    def __new__(cls, value: Union[float, int, str]) -> "JSONFloat":
        if isinstance(value, str):
            if not _JSON_NUMBER.match(value):
                raise CodecError(f"{value!r} is not a JSON number")
            number = float(value)
            if number != number or number in (float("inf"), float("-inf")):
                raise CodecError(f"{value!r} is outside the range of a double")
            self = super().__new__(cls, number)
            self.json = value
            return self
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"JSONFloat takes a float or the text of a JSON number, not {type(value).__name__}")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise CodecError(f"{value!r} cannot be stored: NaN and infinities are not JSON numbers")
        self = super().__new__(cls, number)
        self.json = value.json if isinstance(value, JSONFloat) else float.__repr__(number)
        return self

    def __repr__(self) -> str:
        return f"JSONFloat({self.json!r})"

    # float's str is its repr, which this class overrides: print as the plain float would.
    def __str__(self) -> str:
        return float.__repr__(self)

    def __format__(self, spec: str) -> str:
        return float.__format__(float(self), spec)

    def __reduce__(self) -> Any:
        return (JSONFloat, (self.json,))


def _native_typecodes() -> Dict[str, str]:
    """JavaScript typed array name -> ``array.array`` typecode of the same element type."""
    codes: Dict[str, str] = {"Int8Array": "b", "Uint8Array": "B", "Float32Array": "f", "Float64Array": "d"}
    wanted = {
        "Int16Array": ("hilq", 2),
        "Uint16Array": ("HILQ", 2),
        "Int32Array": ("ilqh", 4),
        "Uint32Array": ("ILQH", 4),
        "BigInt64Array": ("qlih", 8),
        "BigUint64Array": ("QLIH", 8),
    }
    for name, (candidates, size) in wanted.items():
        for code in candidates:
            if array.array(code).itemsize == size:
                codes[name] = code
                break
    if array.array("f").itemsize != 4:  # pragma: no cover - exotic platforms
        del codes["Float32Array"]
    if array.array("d").itemsize != 8:  # pragma: no cover
        del codes["Float64Array"]
    return codes


#: JavaScript typed array name -> the ``array.array`` typecode ``get_state()`` returns it as.
ARRAY_TYPECODES: Dict[str, str] = _native_typecodes()


def typed_array_name(arr: "array.array[Any]") -> str:
    """The JavaScript typed array name for an ``array.array`` (by signedness and item size)."""
    code = arr.typecode
    size = arr.itemsize
    if code in "bhilq":
        names = {1: "Int8Array", 2: "Int16Array", 4: "Int32Array", 8: "BigInt64Array"}
    elif code in "BHILQ":
        names = {1: "Uint8Array", 2: "Uint16Array", 4: "Uint32Array", 8: "BigUint64Array"}
    elif code == "f" and size == 4:
        return "Float32Array"
    elif code == "d" and size == 8:
        return "Float64Array"
    else:
        raise CodecError(f"array.array of typecode {code!r} has no JavaScript typed array twin")
    try:
        return names[size]
    except KeyError:  # pragma: no cover - exotic platforms
        raise CodecError(f"array.array of typecode {code!r} and item size {size} has no typed array twin") from None


def array_to_le_bytes(arr: "array.array[Any]") -> bytes:
    """The little-endian bytes of an ``array.array`` (typed arrays are stored little-endian)."""
    if sys.byteorder == "big" and arr.itemsize > 1:  # pragma: no cover - big-endian hosts
        arr = array.array(arr.typecode, arr)
        arr.byteswap()
    return arr.tobytes()


class TypedArray:
    """A JavaScript typed array, stored as ``{"$typedarray": {"type": ..., "base64": ...}}``.

    ``get_state()`` returns typed arrays as ``array.array`` where one holds the same element
    type (``Int8Array``..``BigUint64Array``, ``Float32Array``, ``Float64Array``), and as
    ``TypedArray`` for ``Uint8ClampedArray`` and ``Float16Array``. An ``array.array`` is
    written as the typed array of its element type.

    Attributes:
        type: the JavaScript type name, e.g. ``"Float16Array"``.
        data: the elements' bytes, little-endian (as JavaScript stores them on every platform
            this runs on).
    """

    __slots__ = ("type", "data")
    type: str
    data: bytes

    def __init__(self, type: str, data: Union[bytes, bytearray, memoryview] = b"") -> None:
        if type not in TYPED_ARRAY_TYPES:
            raise CodecError(f"unknown typed array type {type!r} (known: {', '.join(TYPED_ARRAY_TYPES)})")
        data = bytes(data)
        size = TYPED_ARRAY_TYPES[type][1]
        if len(data) % size:
            raise CodecError(f"{type} byte length {len(data)} is not a multiple of {size}")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "data", data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TypedArray is immutable")

    @classmethod
    def from_values(cls, type: str, values: Iterable[Union[int, float]]) -> "TypedArray":
        """Builds a typed array of ``type`` from numbers (``Uint8ClampedArray`` values must be
        0..255; ``Float16Array`` values are rounded to half precision)."""
        if type not in TYPED_ARRAY_TYPES:
            raise CodecError(f"unknown typed array type {type!r}")
        fmt = TYPED_ARRAY_TYPES[type][0]
        items = list(values)
        try:
            return cls(type, struct.pack(f"<{len(items)}{fmt}", *items))
        except (struct.error, OverflowError) as e:
            raise CodecError(f"values do not fit a {type}: {e}") from None

    @classmethod
    def from_array(cls, arr: "array.array[Any]") -> "TypedArray":
        """The typed array an ``array.array`` is stored as."""
        return cls(typed_array_name(arr), array_to_le_bytes(arr))

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes."""
        return TYPED_ARRAY_TYPES[self.type][1]

    def __len__(self) -> int:
        return len(self.data) // self.itemsize

    def tolist(self) -> "list[Union[int, float]]":
        """The elements as Python numbers."""
        fmt = TYPED_ARRAY_TYPES[self.type][0]
        return list(struct.unpack(f"<{len(self)}{fmt}", self.data))

    def to_array(self) -> "array.array[Any]":
        """The elements as an ``array.array`` (``ValueError`` for ``Float16Array``;
        ``Uint8ClampedArray`` gives an unsigned-byte array)."""
        name = "Uint8Array" if self.type == "Uint8ClampedArray" else self.type
        code = ARRAY_TYPECODES.get(name)
        if code is None:
            raise ValueError(f"array.array cannot hold {self.type} elements")
        arr = array.array(code)
        arr.frombytes(self.data)
        if sys.byteorder == "big" and arr.itemsize > 1:  # pragma: no cover
            arr.byteswap()
        return arr

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TypedArray):
            return self.type == other.type and self.data == other.data
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.type, self.data))

    def __repr__(self) -> str:
        return f"TypedArray({self.type!r}, {self.data!r})"

    def __reduce__(self) -> Any:
        return (TypedArray, (self.type, self.data))


_REGEXP_FLAGS = "dgimsuvy"


class RegExp:
    """A JavaScript regular expression, stored as ``{"$regexp": {"source": ..., "flags": ...}}``.

    ``get_state()`` returns a ``$regexp`` as a compiled ``re.Pattern`` when Python can compile
    its source with the same meaning of flags (only ``i``, ``m``, ``s``, written in that order),
    and as ``RegExp`` otherwise (flags such as ``g``, ``y``, ``u``; a source Python rejects),
    so that no flag is lost. A ``re.Pattern`` is written with its pattern as the source and
    ``re.IGNORECASE``/``MULTILINE``/``DOTALL`` as ``i``/``m``/``s``.

    Attributes:
        source: the pattern text.
        flags: distinct letters from ``"dgimsuvy"`` (not both ``u`` and ``v``).
    """

    __slots__ = ("source", "flags")
    source: str
    flags: str

    def __init__(self, source: str, flags: str = "") -> None:
        if not isinstance(source, str) or not isinstance(flags, str):
            raise CodecError("RegExp source and flags must be str")
        if len(set(flags)) != len(flags) or any(f not in _REGEXP_FLAGS for f in flags):
            raise CodecError(f"RegExp flags {flags!r} must be distinct letters from {_REGEXP_FLAGS!r}")
        if "u" in flags and "v" in flags:
            raise CodecError("RegExp flags 'u' and 'v' exclude each other")
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "flags", flags)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RegExp is immutable")

    def compile(self) -> "re.Pattern[str]":
        """A best-effort Python ``re.Pattern``: ``i``, ``m``, ``s`` become ``re.IGNORECASE``,
        ``re.MULTILINE``, ``re.DOTALL``; other flags are dropped. Raises ``re.error`` when the
        source is not valid Python syntax."""
        value = 0
        for letter, flag in (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL)):
            if letter in self.flags:
                value |= flag
        return re.compile(self.source, value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RegExp):
            return self.source == other.source and self.flags == other.flags
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.source, self.flags))

    def __repr__(self) -> str:
        return f"RegExp({self.source!r}, {self.flags!r})"

    def __reduce__(self) -> Any:
        return (RegExp, (self.source, self.flags))


def regexp_flags_of(pattern: "re.Pattern[Any]") -> Optional[str]:
    """The JavaScript flags for a Python pattern, or None if it has a flag JavaScript lacks."""
    flags = pattern.flags & ~re.UNICODE
    out = ""
    for letter, flag in (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL)):
        if flags & flag:
            out += letter
            flags &= ~flag
    return None if flags else out
