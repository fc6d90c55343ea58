"""An agent's last state, decoded once and reused wherever the library's text proves it equal.

Decoding the JSON text a state call returns is most of what the binding itself costs per call
(``bench.py``'s "binding overhead" rows measure it). Two things make much of that decoding
unnecessary, trusting nothing but the text the library just returned:

* **Same text, same value.** A :class:`Snapshot` keeps the text of the state last read or
  written through this agent, and its decoded value (*pristine*: never handed out, never
  changed). When the library returns exactly that text again (``get_state`` of a state nobody
  changed), the answer is a copy of the pristine value: new dicts and lists (a caller may change
  what it gets), the same immutable leaves (``str``, ``int``, ``float``, ``bool``, ``None``),
  which the decoder's own number caches already share between results.
* **A merge predicted, then checked.** ``set_state(patch)`` knows the patch: ``_predict``
  merges it into the pristine state and builds the merged state's text from the members' texts
  it keeps. If that text is the one the library returned, it decodes to exactly the predicted
  value (``_predict`` says why); otherwise (another writer came in between, or the library wrote
  a member differently) the text is decoded as without a snapshot. Below ``_PREDICT_MIN`` the
  C decoder is faster than predicting, and the text is decoded.

Only *plain* states are kept: no text that may hold a tagged value, and no wrapper (``JSONInt``,
``JSONFloat``) in the value. Every other state is decoded as before. What a call returns is
always what ``decode_state(text)`` returns, type for type, member order and numbers included
(``tests/test_snapshot.py``).

Building a snapshot from a text not seen before costs about twice a decoding (the decoding, a
walk of the value and the copy handed out), so :class:`StateCache` backs off while snapshots go
to waste (another process writing between every two reads of this one). Snapshots are never
changed once made: an agent shared by threads reads its cache's current one with one attribute
load, and the worst a race does is build one that is not needed.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from ._predict import Node, Ops, members, merge, ops_of
from .decoding import _may_hold_tags, decode_state

_LEAVES = frozenset([str, int, float, bool, type(None)])


class Snapshot:
    """A plain state: its text, its pristine value, its node (its members' texts, see
    ``_predict``; None until a prediction needs it), and the copy operations of its members
    that are containers."""

    __slots__ = ("text", "state", "node", "nested")

    def __init__(self, text: str, state: Dict[str, Any], node: Optional[Node], nested: Dict[str, Ops]) -> None:
        self.text = text
        self.state = state
        self.node = node
        self.nested = nested

    def fresh(self) -> Dict[str, Any]:
        """A copy of the state whose every dict and list is new."""
        out = self.state.copy()
        for key, ops in self.nested.items():
            top = out[key].copy()
            out[key] = top
            if type(ops) is tuple:
                for k in ops:
                    top[k] = top[k].copy()
            else:
                made = [top]
                for parent_index, k in ops:
                    parent = made[parent_index]
                    child = parent[k].copy()
                    parent[k] = child
                    made.append(child)
        return out


def _build(text: str) -> Tuple[Dict[str, Any], Optional[Snapshot]]:
    """Decodes ``text``: ``(value to hand out, its snapshot or None when it is not plain)``.
    The members' texts are left for the first prediction to parse."""
    state = decode_state(text)
    if _may_hold_tags(text):
        return state, None
    nested: Dict[str, Ops] = {}
    for key, value in state.items():
        t = type(value)
        if t is dict or t is list:
            ops = ops_of(value)
            if ops is None:
                return state, None  # a number wrapper: not kept
            nested[key] = ops
        elif t not in _LEAVES:
            return state, None
    snap = Snapshot(text, state, None, nested)
    return snap.fresh(), snap


def _patched(snap: Snapshot, patch: Mapping[str, Any], text: str) -> Optional[Snapshot]:
    """The snapshot of ``text`` if it is ``patch`` merged into ``snap``'s state (see
    ``_predict`` for why equal texts make equal values); None if not. Raises
    ``_predict.NotPlain`` when it cannot tell."""
    if _may_hold_tags(text):
        return None
    node = snap.node
    if node is None:  # the first prediction since the snapshot was built
        found = members(snap.text)
        if found is None:
            return None
        node = (found[1], {})
    nested = snap.nested.copy()
    state, predicted, node, _ = merge(snap.state, node, None, patch, nested)
    if predicted != text:
        return None
    return Snapshot(text, state, node, nested)


#: The shortest state text (in characters) whose write is predicted: below it the C decoder
#: reads the whole text sooner than the prediction and the copy are made. Measured with timeit
#: (process time) of ``decode_state`` against ``_patched`` + ``Snapshot.fresh`` on bench.py's
#: ``make_state`` and its two-member patch, this project's VM: 929 characters 4.9 µs against
#: 4.3 + 1.2; 1,385 7.3 against 4.6 + 1.7; 3,914 19.0 against 5.1 + 4.5. A shorter text is
#: decoded, and the snapshot left as it is.
_PREDICT_MIN = 1200

#: The most calls in a row that decode without building a snapshot, once snapshots went to
#: waste again and again (one less than a power of two).
_MAX_COLD = 63


class StateCache:
    """One agent's snapshot, and how eagerly to build the next one.

    A build that no call reused before the next text came (or that found the state not plain)
    was waste; after each such build, the next texts that match nothing are decoded plainly,
    1, 3, 7, ... up to ``_MAX_COLD`` of them, and one reuse resets that. Races between threads
    only change how often a snapshot is built, never what a call returns."""

    __slots__ = ("snap", "pending", "level", "cold")

    def __init__(self) -> None:
        self.snap: Optional[Snapshot] = None
        #: True from a build until a call reuses its snapshot.
        self.pending = False
        self.level = 0
        self.cold = 0

    # decoded() and merged() give dicts, typed Any: the agent types them as its state type.

    def decoded(self, text: str) -> Any:
        """``decode_state(text)``, from the snapshot when it is that text."""
        snap = self.snap
        if snap is not None and snap.text == text:
            if self.pending:
                self.pending = False
                self.level = 0
            return snap.fresh()
        return self._miss(text)

    def merged(self, patch: Optional[Mapping[str, Any]], text: str) -> Any:
        """``decode_state(text)`` of the text a write of ``patch`` returned (None: not plain,
        nothing to predict), predicted from the snapshot when it can be."""
        if len(text) < _PREDICT_MIN:
            return decode_state(text)
        snap = self.snap
        if patch is not None and snap is not None:
            try:
                new = _patched(snap, patch, text)
            except Exception:  # NotPlain; a patch changed into a cycle (RecursionError)
                new = None
            if new is not None:
                self.snap = new
                if self.pending:
                    self.pending = False
                    self.level = 0
                return new.fresh()
        return self.decoded(text)

    def _miss(self, text: str) -> Dict[str, Any]:
        if self.pending:
            self.pending = False
            self.level = min(self.level + 1, _MAX_COLD.bit_length())
            self.cold = (1 << self.level) - 1
        if self.cold > 0:
            self.cold -= 1
            self.snap = None
            return decode_state(text)
        value, snap = _build(text)
        self.snap = snap
        self.pending = True
        return value
