"""Property-based tests (hypothesis): set_state against a pure-Python RFC 7396 reference over
random documents, and codec round trips over random values of every storable type."""

from __future__ import annotations

import array
import datetime as dt
import math
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_state import Agent, BigInt, JSMap, JSSet, RegExp, TypedArray, encode_value
from agent_state.codec import identity_of_text

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rfc7396_merge(target: Any, patch: Any) -> Any:
    """The reference algorithm of RFC 7396 section 2, keeping member order like the library:
    existing members stay in place, new ones are appended in patch order."""
    if isinstance(patch, dict):
        result = dict(target) if isinstance(target, dict) else {}
        for name, value in patch.items():
            if value is None:
                result.pop(name, None)
            else:
                result[name] = rfc7396_merge(result.get(name), value)
        return result
    return patch


def same(a: Any, b: Any) -> bool:
    """Deep equality that also compares the member order of objects and tells 1, 1.0, true and
    -0.0 from 1, 1, 1 and 0.0."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and list(a) == list(b)
            and all(same(a[k], b[k]) for k in a)
        )
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, float)
            and isinstance(b, float)
            and a == b
            and math.copysign(1.0, a) == math.copysign(1.0, b)
        )
    return bool(a == b)


# Few distinct names, so patches often hit existing members.
names = st.sampled_from(["a", "b", "c", "d", "é", "k e y", ""])
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)),
    max_leaves=8,
)
states = st.dictionaries(names, documents, max_size=5)
# Patches may hold null at any level (null deletes).
patch_values = st.recursive(
    st.one_of(st.none(), scalars),
    lambda inner: st.one_of(st.lists(st.one_of(scalars, inner), max_size=3), st.dictionaries(names, inner, max_size=4)),
    max_leaves=8,
)
patches = st.dictionaries(names, patch_values, max_size=5)


@SETTINGS
@given(initial=states, patch_list=st.lists(patches, min_size=1, max_size=3))
def test_set_state_matches_the_rfc7396_reference(initial: dict, patch_list: list) -> None:
    with Agent(":memory:") as agent:
        delivered = []
        agent.on_state_changed(lambda n, p, d: delivered.append((n, p, d)))
        expected = agent.replace_state(initial)
        assert same(expected, initial)
        for patch in patch_list:
            before = expected
            expected = rfc7396_merge(expected, patch)
            got = agent.set_state(patch)
            assert same(got, expected), (before, patch, got, expected)
            assert same(agent.get_state(), expected)
            if encode_value(expected) != encode_value(before):  # a change: its hook ran
                n, p, d = delivered[-1]
                assert same(n, expected) and same(p, before) and same(d, patch)
        assert agent.get_state_json() == encode_value(expected)


# -- codec round trips ----------------------------------------------------------------------

UTC = dt.timezone.utc
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda m: dt.timezone(dt.timedelta(minutes=m))
)
# Whole milliseconds (the 3-digit stored form) as often as any microsecond (the 6-digit one).
datetimes = st.builds(
    lambda d, tz, whole_ms: d.replace(
        microsecond=d.microsecond // 1000 * 1000 if whole_ms else d.microsecond, tzinfo=tz
    ),
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    st.one_of(st.just(UTC), offsets),
    st.booleans(),
)
hashables = st.one_of(st.integers(), st.text(max_size=4), st.binary(max_size=4))
typed = st.one_of(
    st.lists(st.integers(-128, 127), max_size=5).map(lambda v: array.array("b", v)),
    st.lists(st.integers(0, 2**32 - 1), max_size=5).map(lambda v: array.array("I", v)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5).map(lambda v: array.array("q", v)),
    st.lists(st.floats(width=32), max_size=5).map(lambda v: array.array("f", v)),
    st.lists(st.floats(), max_size=5).map(lambda v: array.array("d", v)),
    st.binary(max_size=8).map(lambda b: TypedArray("Float16Array", b[: len(b) // 2 * 2])),
    st.binary(max_size=8).map(lambda b: TypedArray("Uint8ClampedArray", b)),
)
patterns = st.one_of(
    st.sampled_from([re.compile("a+b"), re.compile(r"^\d+$", re.I | re.M), re.compile(".", re.S)]),
    st.builds(RegExp, st.text(max_size=5), st.sampled_from(["", "g", "gi", "dgimsuy", "v", "y"])),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers().map(BigInt),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.binary(max_size=12),
    datetimes,
    typed,
    patterns,
    st.frozensets(hashables, max_size=4),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(names, inner, max_size=3),
        st.dictionaries(st.integers(), inner, max_size=3),  # a $map
        st.lists(inner, max_size=3).map(JSSet),
        # Keys distinct for the library: a JSMap refuses two keys that are one.
        st.lists(st.tuples(inner, inner), max_size=3, unique_by=lambda kv: identity_of_text(encode_value(kv[0]))).map(
            JSMap
        ),
    ),
    max_leaves=10,
)


@SETTINGS
@given(value=values)
def test_codec_round_trip_is_lossless(value: Any) -> None:
    with Agent(":memory:") as agent:
        agent.replace_state({"v": value})
        stored = agent.get_state_json()
        # The library stored exactly the binding's encoding...
        assert stored == '{"v":' + encode_value(value) + "}"
        read = agent.get_state()["v"]
        # ...what was read encodes the same...
        assert encode_value(read) == encode_value(value)
        # ...and written back, stores the same JSON.
        agent.replace_state({"v": read})
        assert agent.get_state_json() == stored
