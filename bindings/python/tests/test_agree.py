"""Regression tests for the cases where the bindings disagreed on the same value. The decisions
are recorded in tests/conformance/binding_values.json, which the Go binding runs too."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import agent_state

from agent_state import (
    Agent,
    CodecError,
    InvalidArgumentError,
    JSMap,
    JSONError,
    JSONFloat,
    JSSet,
    Tagged,
    TypedArray,
    encode_value,
)

WHEN = dt.datetime(2026, 11, 30, 3, 6, 44, 123000, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("tag", ["$date", "$bigint", "$map", "$set", "$arraybuffer", "$typedarray", "$regexp"])
def test_a_dict_shaped_like_a_tag_is_refused(mem: Agent, tag: str) -> None:
    for value in ({tag: "x"}, {"a": [{tag: "x"}]}):
        with pytest.raises(CodecError, match="tagged value"):
            encode_value(value)
        with pytest.raises(CodecError, match="tagged value"):
            mem.set_state({"v": value})
    with pytest.raises(CodecError):
        Agent(":memory:", initial_state={"v": {tag: "x"}})
    assert mem.get_state_json() == "{}"
    # With another key it is plain data; Tagged (and JSON text) keep the tagged meaning.
    assert mem.set_state({"v": {tag: "x", "other": 1}})["v"] == {tag: "x", "other": 1}
    assert mem.set_state({"d": Tagged("$date", "2026-11-30T03:06:44.123Z")})["d"] == WHEN


def test_map_keys_compare_by_value_and_a_map_cannot_be_built_with_one_key_twice() -> None:
    m = JSMap([(JSONFloat("1.0"), "a"), ([1], "list")])
    for key in (1, 1.0, JSONFloat("1e0"), JSONFloat("10E-1")):
        assert key in m and m[key] == "a"
    assert "1" not in m and True not in m and [1.5] not in m
    assert m[[1]] == "list" and [JSONFloat("1.0")] not in m  # inside lists numbers compare by text
    m[1] = "b"
    assert m.pairs()[0] == (JSONFloat("1.0"), "b")  # the stored key and place are kept
    del m[1.0]
    assert 1 not in m and len(m) == 1
    for pairs in (
        [(1, "a"), (1.0, "b")],
        [(0, "a"), (-0.0, "b")],
        [([JSONFloat("1E2")], 1), ([JSONFloat("1e+2")], 2)],
        [({"a": 1}, 1), ({"a": 1}, 2)],
    ):
        with pytest.raises(CodecError, match="same for the library"):
            JSMap(pairs)
    JSMap([([1], 1), ([1.0], 2), ("1", 3)])  # distinct for the library
    assert 2 in JSSet([2.0]) and [1.5] not in JSSet([[1]])


def nested(depth: int) -> Any:
    """A dict nested ``depth`` levels deep (the outermost dict is level 1)."""
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def at(level: int, value: Any) -> Any:
    """A state holding ``value`` at nesting level ``level``."""
    for _ in range(level - 2):
        value = [value]
    return {"a": value}


def test_nesting_beyond_the_limit_is_a_codec_error_at_every_depth(mem: Agent) -> None:
    mem.replace_state(nested(64))
    for depth in (65, 100, 127, 128, 129, 150, 200, 201, 1000, 100_000):
        for call in (lambda: encode_value(nested(depth)), lambda: mem.replace_state(nested(depth))):
            try:
                call()
            except CodecError as e:
                assert "nesting deeper than 64" in e.message
            except (JSONError, RecursionError) as e:  # what depths 129-200 used to raise
                pytest.fail(f"{depth} levels: {type(e).__name__}: {e}")
            else:
                pytest.fail(f"{depth} levels accepted")
    # Tagged values count as the library counts them: a set two levels, a map three.
    cases = [
        (at(62, JSSet([[]])), True),
        (at(63, JSSet([[]])), False),
        (at(63, JSSet()), True),
        (at(64, JSSet()), False),
        (at(62, JSMap([(1, 2)])), True),
        (at(63, JSMap([(1, 2)])), False),
        (at(64, TypedArray("Int8Array")), True),
        (at(64, Tagged("$typedarray", {"type": "Int8Array", "base64": ""})), True),
        (at(65, WHEN), False),
        (at(65, 2**64), False),
    ]
    for state, ok in cases:
        if ok:
            mem.replace_state(state)
        else:
            with pytest.raises(CodecError, match="nesting deeper than 64"):
                mem.replace_state(state)


@pytest.mark.parametrize("timeout", [2**31, 9_223_372_036_854, 2**63, 2**64 + 1])
def test_a_busy_timeout_beyond_the_library_range_is_refused_naming_the_maximum(timeout: int) -> None:
    with pytest.raises(InvalidArgumentError, match="2147483647"):
        Agent(":memory:", busy_timeout_ms=timeout)


def test_the_largest_busy_timeout_is_accepted() -> None:
    with Agent(":memory:", busy_timeout_ms=2**31 - 1) as agent:
        assert agent.set_state({"a": 1}) == {"a": 1}


def test_decoding_text_the_library_refuses_does_not_drop_members() -> None:
    # JSSet() keeps one of two equal members; decoding must not turn refused text into a
    # valid, different value: it keeps it verbatim, and storing it is refused.
    for text in ('{"s":{"$set":[1,1.0]}}', '{"m":{"$map":[[1,"a"],[1.0,"b"]]}}'):
        value = agent_state.decode(text)
        assert isinstance(next(iter(value.values())), Tagged)
        assert encode_value(value) == text
        with Agent(":memory:") as agent, pytest.raises(CodecError, match="twice"):
            agent.set_state(value)
