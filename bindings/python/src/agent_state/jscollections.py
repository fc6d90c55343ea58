"""The wrapper types whose identity is their encoded JSON: JavaScript ``Map`` and ``Set`` for
the storage codec (``$map``, ``$set``), and :class:`Tagged`, any tagged value verbatim.

Keys and elements are compared exactly as the library compares them when it checks for
duplicates: numbers by value, as JavaScript does (``1`` and ``1.0`` are the same key, so are
``0`` and ``-0``), everything else by its encoded JSON as the library writes it (``[1, 2]`` and
``(1, 2)`` are the same, ``True`` and ``1`` differ, ``[1]`` and ``[1.0]`` differ, ``[1E2]`` and
``[1e+2]`` do not). Mutating a list or dict after using it as a key or element is not supported
(as with a Python ``dict``, whose keys must not change).

They sit above the encoder (:mod:`agent_state.codec`), which they need for that identity; it
writes them through their ``_encode_with`` (their base :class:`~agent_state.codec.Encodable`),
so it does not import them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping, MutableSet
from collections.abc import Set as AbstractSet
from typing import Any, Dict, Tuple, Union

from .codec import Encodable, _Encoder, encode_value, identity_of_text
from .errors import CodecError
from .values import TAGS

__all__ = ["JSMap", "JSSet", "Tagged"]


def _key(value: Any) -> str:
    """The identity of ``value`` as a key or element (see :func:`~agent_state.codec.identity_of_text`)."""
    return identity_of_text(encode_value(value))


class JSMap(MutableMapping[Any, Any], Encodable):
    """A JavaScript ``Map``, stored as ``{"$map": [[key, value], ...]}``.

    Insertion-ordered, with keys of any storable type, including lists and dicts (numbers
    compare by value, anything else by its encoded JSON). ``get_state()`` returns every ``$map``
    as a ``JSMap`` (also one whose keys are all strings, which a ``dict`` would turn into a plain
    object). A Python ``dict`` with any non-``str`` key is written as a ``$map`` too.

    Built from pairs, two keys that are one for the library (``(1, "a"), (1.0, "b")``) raise
    :class:`~agent_state.CodecError`, as the library refuses them (and Go refuses such a
    ``Map``); assigning to an existing key (``m[1.0] = "b"``) updates it.

    >>> m = JSMap([(1, "one"), ([1, 2], "pair")])
    >>> m[(1, 2)]
    'pair'
    """

    __slots__ = ("_items",)

    def __init__(self, items: Union[Mapping[Any, Any], Iterable[Tuple[Any, Any]]] = ()) -> None:
        self._items: Dict[str, Tuple[Any, Any]] = {}
        pairs = items.items() if isinstance(items, Mapping) else items
        for pair in pairs:
            k, v = pair
            ck = _key(k)
            if ck in self._items:
                raise CodecError(
                    f"two keys of this map are the same for the library ({self._items[ck][0]!r} and {k!r})"
                )
            self._items[ck] = (k, v)

    def __getitem__(self, key: Any) -> Any:
        try:
            ck = _key(key)
        except CodecError:
            raise KeyError(key) from None
        try:
            return self._items[ck][1]
        except KeyError:
            raise KeyError(key) from None

    def __setitem__(self, key: Any, value: Any) -> None:
        ck = _key(key)
        old = self._items.get(ck)
        self._items[ck] = (key if old is None else old[0], value)

    def __delitem__(self, key: Any) -> None:
        try:
            ck = _key(key)
        except CodecError:
            raise KeyError(key) from None
        try:
            del self._items[ck]
        except KeyError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            return _key(key) in self._items
        except CodecError:
            return False

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def pairs(self) -> "list[Tuple[Any, Any]]":
        """The ``(key, value)`` pairs in insertion order (keys may be unhashable)."""
        return list(self._items.values())

    def copy(self) -> "JSMap":
        """A shallow copy."""
        return JSMap(self.pairs())

    def _encode_with(self, enc: _Encoder) -> None:
        enc.js_map(self, self.pairs())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        if not isinstance(other, JSMap):
            try:
                other = JSMap(other)
            except CodecError:
                return False
        mine = {k: v for k, (_, v) in self._items.items()}
        theirs = {k: v for k, (_, v) in other._items.items()}
        return mine == theirs

    __hash__ = None  # type: ignore[assignment]  # unhashable, as dict and set are (typeshed does the same)

    def __repr__(self) -> str:
        return f"JSMap({self.pairs()!r})"


class JSSet(MutableSet[Any], Encodable):
    """A JavaScript ``Set``, stored as ``{"$set": [value, ...]}``.

    Insertion-ordered, with elements of any storable type, including lists and dicts (numbers
    compare by value, anything else by its encoded JSON). ``get_state()`` returns every ``$set`` as a ``JSSet`` (a Python
    ``set`` would lose the order, and could not hold lists). Python ``set`` and ``frozenset``
    values are written as ``$set`` too.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items: Dict[str, Any] = {}
        for item in items:
            self.add(item)

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> "JSSet":
        return cls(it)

    def add(self, value: Any) -> None:
        """Adds ``value`` (a no-op if an element with the same encoding is present)."""
        self._items.setdefault(_key(value), value)

    def discard(self, value: Any) -> None:
        """Removes ``value`` if present."""
        try:
            self._items.pop(_key(value), None)
        except CodecError:
            pass

    def __contains__(self, value: object) -> bool:
        try:
            return _key(value) in self._items
        except CodecError:
            return False

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def copy(self) -> "JSSet":
        """A shallow copy."""
        return JSSet(self)

    def _encode_with(self, enc: _Encoder) -> None:
        enc.js_set(self, list(self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AbstractSet):
            return NotImplemented
        if not isinstance(other, JSSet):
            try:
                other = JSSet(other)
            except CodecError:
                return False
        return self._items.keys() == other._items.keys()

    __hash__ = None  # type: ignore[assignment]  # unhashable, as dict and set are (typeshed does the same)

    def __repr__(self) -> str:
        return f"JSSet({list(self._items.values())!r})"


class Tagged(Encodable):
    """A tagged value kept verbatim: ``{tag: value}`` with ``tag`` one of :data:`TAGS`.

    ``get_state()`` returns one for a tagged value that no Python type can represent exactly
    (so far: a ``$date`` in year 0, before ``datetime.MINYEAR``). Writing ``Tagged(tag, value)``
    stores ``{tag: value}`` with ``value`` encoded as usual; the library checks its form.

    Attributes:
        tag: the tag, e.g. ``"$date"``.
        value: the tag's content as decoded data.
    """

    __slots__ = ("tag", "value")
    tag: str
    value: Any

    def __init__(self, tag: str, value: Any) -> None:
        if tag not in TAGS:
            raise CodecError(f"{tag!r} is not a tag (known: {', '.join(sorted(TAGS))})")
        object.__setattr__(self, "tag", tag)
        object.__setattr__(self, "value", value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Tagged is immutable")

    def _encode_with(self, enc: _Encoder) -> None:
        enc.tagged(self, self.tag, self.value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tagged):
            return self.tag == other.tag and _key(self.value) == _key(other.value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.tag, _key(self.value)))

    def __repr__(self) -> str:
        return f"Tagged({self.tag!r}, {self.value!r})"

    def __reduce__(self) -> Any:
        return (Tagged, (self.tag, self.value))
