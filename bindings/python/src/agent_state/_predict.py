"""The state a plain merge patch makes of a snapshot's state, with its JSON text: what
``set_state`` compares the library's answer with (see :mod:`agent_state._snapshot`).

The text is built, not encoded: a snapshot keeps each member's text (``"key":value``), and for
the dict members a patch merged into, their own members' texts (a :data:`Node`, parsed from the
member's text the first time a patch reaches into it). A merge copies those dicts of texts,
writes the texts of what the patch changes (a leaf's own text; a list through the C encoder;
a dict by the same merge one level down) and joins them. So a patch's cost follows the patch,
not the state: unchanged members are neither decoded nor encoded again.

Why equal texts make equal values: every text kept was checked, as part of a whole state's
text, against the library's, and decodes to the pristine value kept with it (decoding a member
does not depend on its neighbours); every text written is that of a plain value (lists,
str-keyed dicts, str, safe ints, finite floats, bools, None), which the decoder reads back as
that very value and type (an int's text is never ``-0``, a float's is its shortest repr). The
patch is checked again here (leaf types, the int range, key types): a hook or another thread
may have changed it since it was encoded. A text without ``"$`` holds no tagged value, and the
member order is the text's own, compared with it.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .decoding import _fast_scan
from .fast_encode import _chunks, _encode_str
from .limits import MAX_SAFE_INTEGER

# The json module's string scanner (C), which typeshed does not declare: read with its type.
_scanstring: Callable[[str, int, bool], Tuple[str, int]] = getattr(json.decoder, "scanstring")

#: A dict's member texts, in its order, and the nodes of those of its dict members that a
#: merge needed.
Node = Tuple[Dict[str, str], Dict[str, Any]]
#: How to copy one member's containers below its top one: the keys of its containers when they
#: are all children of the top one and hold none themselves (the common case, copied in one
#: loop); otherwise ``(parent, key)`` per container, in the order they are made (``parent``
#: indexes the containers made so far, the top one 0).
Ops = Union[Tuple[Any, ...], List[Tuple[int, Any]]]

_LEAVES = frozenset([str, int, float, bool, type(None)])
_CONTAINERS = frozenset([dict, list, tuple])
_NOT_FINITE = frozenset(["inf", "-inf", "nan"])
_BRACES = ("{", "}")  # ",".join(texts).join(_BRACES): "{" + ... + "}" in one step
_int_repr = int.__repr__
_float_repr = float.__repr__


class NotPlain(Exception):
    """The prediction cannot be made: the patch holds a value the encoder's fast path does not
    write (it changed since it was encoded), or a member's text is not compact JSON."""


def _walk(container: Any, index: int, ops: List[Tuple[int, Any]]) -> bool:
    if type(container) is dict:
        items: Any = container.items()
    elif len(container) > 16 and set(map(type, container)) <= _LEAVES:  # checked in C
        return True
    else:
        items = enumerate(container)
    for key, value in items:
        t = type(value)
        if t in _LEAVES:
            continue
        if t is not dict and t is not list:
            return False
        ops.append((index, key))
        if not _walk(value, len(ops), ops):
            return False
    return True


def ops_of(value: Any) -> Optional[Ops]:
    """The copy operations of a dict or list (see :data:`Ops`); None if it holds anything but
    plain values (a number wrapper, a tagged value)."""
    ops: List[Tuple[int, Any]] = []
    if not _walk(value, 0, ops):
        return None
    if not ops:
        return ()
    parents, keys = zip(*ops)
    return ops if any(parents) else keys


def _plain_ops(value: Any) -> Ops:
    ops = ops_of(value)
    assert ops is not None  # built of plain values
    return ops


def members(text: str) -> Optional[Tuple[Dict[str, Any], Dict[str, str]]]:
    """The members of the JSON object ``text`` (compact, no tags), decoded one by one with the
    fast decoder's own scanner (what ``decode`` runs on the whole text), and their texts; None
    for anything else (whitespace, a member name twice, malformed text)."""
    if text[:1] != "{":
        return None
    values: Dict[str, Any] = {}
    chunks: Dict[str, str] = {}
    if text == "{}":
        return values, chunks
    end_of_text = len(text)
    pos = 1
    count = 0
    try:
        while True:
            if text[pos] != '"':
                return None
            key, end = _scanstring(text, pos + 1, True)
            if text[end] != ":":
                return None
            value, stop = _fast_scan(text, end + 1)
            values[key] = value
            chunks[key] = text[pos:stop]
            count += 1
            delimiter = text[stop]
            if delimiter == ",":
                pos = stop + 1
            elif delimiter == "}" and stop + 1 == end_of_text:
                break
            else:
                return None
    except Exception:  # StopIteration, IndexError, JSONDecodeError, RecursionError
        return None
    if count != len(chunks):  # a member name twice: the texts no longer join back to the text
        return None
    return values, chunks


def _leaf(value: Any) -> Any:
    t = type(value)
    if t in _LEAVES and (t is not int or -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER):
        return value
    raise NotPlain


def _plain_copy(value: Any) -> Any:
    """A patch's list, tuple or dict as the library stores it and the decoder reads it back:
    new lists (tuples become lists) and dicts, the same leaves."""
    if type(value) is dict:
        out: Dict[str, Any] = {}
        for key, v in value.items():
            if type(key) is not str:
                raise NotPlain
            out[key] = _plain_copy(v) if type(v) in _CONTAINERS else _leaf(v)
        return out
    return [_plain_copy(v) if type(v) in _CONTAINERS else _leaf(v) for v in value]


def merge(
    target: Any,
    node: Optional[Node],
    chunk: Optional[str],
    patch: Mapping[str, Any],
    nested: Optional[Dict[str, Ops]],
) -> Tuple[Dict[str, Any], str, Node, bool]:
    """RFC 7396: ``patch`` merged into ``target`` (a pristine value, left as it is: new dicts
    along the patched paths, the rest shared). ``node`` is ``target``'s, or None when not known
    yet (then parsed from ``chunk``, ``target``'s member text). Returns the merged dict, its
    text, its node, and whether its containers are where ``target``'s were. With ``nested``
    (the top level), keeps each member's copy operations up to date in it. Raises
    :class:`NotPlain`."""
    if type(target) is dict:
        if node is None:
            if chunk is None:
                raise NotPlain
            _, end = _scanstring(chunk, 1, True)
            found = members(chunk[end + 1 :])
            if found is None:
                raise NotPlain
            node = (found[1], {})
        out: Dict[str, Any] = target.copy()
        chunks = node[0].copy()
        subs = node[1].copy()
        same = True
    else:
        out = {}
        chunks = {}
        subs = {}
        same = False
    for key, value in patch.items():
        if type(key) is not str:
            raise NotPlain
        t = type(value)
        # A leaf's text, as the decoder reads it back as the same value (None deletes).
        if t is str:
            text = _encode_str(value)
        elif t is float:
            text = _float_repr(value)
            if text in _NOT_FINITE:
                raise NotPlain
        elif t is int:
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise NotPlain
            text = _int_repr(value)
        elif t is bool:
            text = "true" if value else "false"
        elif value is None:
            if key in out:
                if type(out.pop(key)) in _CONTAINERS:
                    same = False
                del chunks[key]
                subs.pop(key, None)
                if nested is not None:
                    nested.pop(key, None)
            continue
        elif t is dict:
            value, text, sub, inner = merge(out.get(key), subs.get(key), chunks.get(key), value, None)
            subs[key] = sub
            if not inner:
                same = False
                if nested is not None:
                    nested[key] = _plain_ops(value)
            out[key] = value
            chunks[key] = _encode_str(key) + ":" + text
            continue
        elif t is list or t is tuple:
            value = _plain_copy(value)
            text = "".join(_chunks(value, 0))
            subs.pop(key, None)
            same = False
            if nested is not None:
                nested[key] = _plain_ops(value)
            out[key] = value
            chunks[key] = _encode_str(key) + ":" + text
            continue
        else:
            raise NotPlain
        if type(out.get(key)) in _CONTAINERS:  # a container replaced by a leaf
            same = False
            subs.pop(key, None)
            if nested is not None:
                nested.pop(key, None)
        out[key] = value
        chunks[key] = _encode_str(key) + ":" + text
    return out, ",".join(chunks.values()).join(_BRACES), (chunks, subs), same
