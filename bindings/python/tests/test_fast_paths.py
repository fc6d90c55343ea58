"""The codec's fast paths give exactly what the full (slow) paths give.

Decoding: ``decode`` skips the tag hook when no object of the text can be tagged, and maps number
tokens through bounded caches; ``_decode_slow`` (the full decoder) and a reference decoder with
the plain hooks and no cache must agree with it, value for value and type for type, and raise
the same errors. Encoding: ``encode_state`` / ``encode_value`` write plain values through the
json module's C encoder; ``_encode_state_slow`` (every value through the binding's own encoder)
must write the same bytes, or raise the same error.
"""

from __future__ import annotations

import array
import collections
import datetime as dt
import enum
import json
import math
import re
from decimal import Decimal
from typing import Any, Callable, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_state import (
    Agent,
    BigInt,
    CodecError,
    JSMap,
    JSONFloat,
    JSONInt,
    JSSet,
    RegExp,
    Tagged,
    TypedArray,
    codec,
    decoding,
)
from agent_state.limits import MAX_SAFE_INTEGER

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: The decoder as it was before the fast path and the number caches: the reference.
REFERENCE = json.JSONDecoder(
    object_pairs_hook=decoding._object_pairs,
    parse_float=decoding._parse_float,
    parse_int=decoding._parse_int,
    parse_constant=decoding._parse_constant,
)


def identical(a: Any, b: Any) -> bool:
    """Same types all the way down, same member order, same exact number texts."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if isinstance(a, (JSONInt, JSONFloat)):
        return a.json == b.json
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (JSMap, JSSet, Tagged, TypedArray, RegExp)):
        return encode_slow(a) == encode_slow(b)
    return bool(a == b)


def encode_slow(value: Any) -> str:
    enc = codec._Encoder()
    enc.value(value)
    return codec._finish(enc)


def outcome(fn: Callable[[], Any]) -> Tuple[str, Any]:
    try:
        return ("value", fn())
    except Exception as e:  # compared below: same type, same message
        return ("error", (type(e), str(e)))


def check_decoders_agree(text: Any) -> Any:
    fast = outcome(lambda: decoding.decode(text))
    slow = outcome(lambda: decoding._decode_slow(text))
    raw = text.decode("utf-8") if isinstance(text, bytes) else text
    ref = outcome(lambda: REFERENCE.decode(raw))
    for other in (slow, ref):
        assert fast[0] == other[0], (text, fast, other)
        if fast[0] == "value":
            assert identical(fast[1], other[1]), (text, fast[1], other[1])
        else:
            assert fast[1] == other[1], (text, fast[1], other[1])
    # Twice: the second read goes through the warm caches.
    again = outcome(lambda: decoding.decode(text))
    assert again[0] == fast[0] and (identical(again[1], fast[1]) if again[0] == "value" else again[1] == fast[1])
    return fast[1]


# -- decoding: a corpus of the awkward cases ------------------------------------------------------

NUMBERS = [
    "0", "-0", "0.0", "-0.0", "1", "-1", "1.5", "1.50", "1.0", "100.0", "1e2", "1E2", "1e+2",
    "1e-2", "1E-2", "0.1", "0.10", "0.0001", "0.00001", "1e-05", "1e-5", "1e16", "1e+16",
    "1234567890123456.0", "123456789012345.6", "0.1000000000000000055511151231257827",
    "9007199254740991", "-9007199254740991", "9007199254740992", "-9007199254740992",
    "9007199254740993", "999999999999999", "1000000000000000", "-1000000000000000",
    "123456789012345678901234567890", "-123456789012345678901234567890", "5e-324",
    "2.2250738585072014e-308", "1.7976931348623157e+308", "1e308", "1e400", "-1e400", "1e-400",
    "12345678901234567890.5", "3.141592653589793", "3.1415926535897932", "2.5e-3",
]
STRINGS = [
    "", "plain", '"$date', '\\"$date', "$date", "-0", "a-0", "-0.5", "1.50", "1e+2",
    "12345678901234567890123", "9007199254740993", "\\u0024date", "\\\\u0024date",
    "\\u00e9t\\u00e9", "caf\u00e9", "\\n\\t\\\"", "\U0001f600", "\\ud83d\\ude00",
]
TAGGED = [
    '{"$date":"2026-11-30T03:06:44.123Z"}',
    '{"$date":"0000-01-01T00:00:00.000Z"}',
    '{"$bigint":"123456789012345678901234567890"}',
    '{"$set":[1,"a",[2]]}',
    '{"$map":[[1,"one"],["k",{"$set":[]}]]}',
    '{"$arraybuffer":"AAEC"}',
    '{"$typedarray":{"type":"Int16Array","base64":"AQACAA=="}}',
    '{"$typedarray":{"type":"Uint8ClampedArray","base64":"AQI="}}',
    '{"$regexp":{"source":"a+b","flags":"i"}}',
    '{"$regexp":{"source":"a","flags":"gy"}}',
    '{"$date":"not a date"}',
    '{"$date":1,"other":2}',
    '{"\\u0024date":"2026-11-30T03:06:44.123Z"}',
    '{"$unknown":1}',
]


@pytest.mark.parametrize("number", NUMBERS)
def test_numbers_decode_alike(number: str) -> None:
    for text in (number, "[" + number + "]", '{"n":' + number + "}", '{"n":[' + number + "," + number + "]}"):
        check_decoders_agree(text)
        check_decoders_agree(text.encode("utf-8"))


def test_number_types_are_the_documented_ones() -> None:
    got = check_decoders_agree("[" + ",".join(NUMBERS[:20]) + "]")
    kinds = {text: type(v) for text, v in zip(NUMBERS[:20], got)}
    assert kinds["-0"] is JSONInt and kinds["0"] is int and kinds["1.50"] is JSONFloat
    assert kinds["1.5"] is float and kinds["1e+2"] is JSONFloat and kinds["0.00001"] is JSONFloat
    edge = check_decoders_agree("[9007199254740991,9007199254740992,-9007199254740992]")
    assert [type(v) for v in edge] == [int, JSONInt, JSONInt]
    assert [v.json for v in edge[1:]] == ["9007199254740992", "-9007199254740992"]


@pytest.mark.parametrize("string", STRINGS)
def test_strings_decode_alike(string: str) -> None:
    for text in (
        '{"s":"' + string + '"}',
        '{"' + string + '":1}',
        '{"' + string + '":{"$date":"2026-11-30T03:06:44.123Z"}}',
        '["' + string + '",-0,1.50]',
    ):
        check_decoders_agree(text)


@pytest.mark.parametrize("tagged", TAGGED)
def test_tagged_values_decode_alike(tagged: str) -> None:
    for text in (tagged, '{"v":' + tagged + "}", '{"a":[1,' + tagged + '],"b":-0,"c":1.50}'):
        check_decoders_agree(text)


@pytest.mark.parametrize(
    "text",
    [
        "", " ", "{", '{"a":1', '{"a":1}x', '{"a":1} ', ' {"a":1}', '\n{"a":[1, 2]}\n', "[1,]",
        '{"a":NaN}', '{"a":Infinity}', '{"a":-Infinity}', '{"a":01}', '{"a":"\x01"}', "null",
        "true", '"$date"', '{"a":1,"a":2}', '{"$date":1,"$date":"2026-11-30T03:06:44.123Z"}',
    ],
)
def test_odd_and_malformed_texts_behave_alike(text: str) -> None:
    check_decoders_agree(text)


def test_non_text_is_refused_alike() -> None:
    with pytest.raises(TypeError):
        decoding.decode(5)
    with pytest.raises(TypeError):
        decoding._decode_slow(5)
    assert decoding.decode(bytearray(b'{"a":1.50}'))["a"].json == "1.50"
    assert decoding.decode(memoryview(b'{"a":-0}'))["a"].json == "-0"


def test_the_fast_path_is_taken_only_without_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refuse:
        def decode(self, text: str) -> Any:
            raise AssertionError("the full decoder was used")

    full = decoding._decoder
    monkeypatch.setattr(decoding, "_decoder", Refuse())
    assert decoding.decode('{"a":{"b":[1,-0,1.50,"x$y","-0",12345678901234567890]}}')["a"]["b"][1].json == "-0"
    with pytest.raises(AssertionError):
        decoding.decode('{"a":{"$date":"2026-11-30T03:06:44.123Z"}}')
    with pytest.raises(AssertionError):
        decoding.decode('{"a":{"\\u0024date":"2026-11-30T03:06:44.123Z"}}')
    monkeypatch.setattr(decoding, "_decoder", full)
    assert decoding.decode('{"a":{"\\u0024date":"2026-11-30T03:06:44.123Z"}}')["a"].year == 2026


def test_results_are_fresh_and_wrappers_never_shared() -> None:
    text = '{"a":{"b":[1,2.5,1.50,-0]},"c":[{"d":1}]}'
    one, two = decoding.decode(text), decoding.decode(text)
    assert identical(one, two)
    assert one is not two and one["a"] is not two["a"] and one["a"]["b"] is not two["a"]["b"]
    assert one["c"][0] is not two["c"][0]
    assert one["a"]["b"][2] is not two["a"]["b"][2]  # JSONFloat: a new one every time
    assert one["a"]["b"][3] is not two["a"]["b"][3]  # JSONInt
    one["a"]["b"].append("mutated")
    assert decoding.decode(text) == two


def test_number_caches_are_bounded() -> None:
    floats = "[" + ",".join("%d.25" % i for i in range(decoding._CACHE_SIZE + 100)) + "]"
    ints = "[" + ",".join(str(i) for i in range(decoding._CACHE_SIZE + 100)) + "]"
    assert decoding.decode(floats)[-1] == decoding._CACHE_SIZE + 99.25
    assert decoding.decode(ints)[-1] == decoding._CACHE_SIZE + 99
    assert len(decoding._float_cache) <= decoding._CACHE_SIZE and len(decoding._int_cache) <= decoding._CACHE_SIZE
    assert all(type(v) is float for v in decoding._float_cache.values())
    assert all(type(v) is int for v in decoding._int_cache.values())


# -- decoding: hypothesis ----------------------------------------------------------------------

names = st.one_of(
    st.sampled_from(["a", "b", "$", "$date", "$x", "-0", "1.50", "\u00e9", ""]), st.text(max_size=6)
)
number_texts = st.one_of(
    st.integers().map(str),
    st.integers(min_value=2**53 - 3, max_value=2**53 + 3).map(str),
    st.integers(min_value=-(2**53) - 3, max_value=-(2**53) + 3).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(
        lambda sign, i, frac, exp: sign + i + ("." + frac if frac else "") + exp,
        st.sampled_from(["", "-"]),
        st.sampled_from(["0"]) | st.integers(1, 10**20).map(str),
        st.sampled_from(["", "0", "5", "50", "0001", "25", "1000000000000000055511151231257827"]),
        st.sampled_from(["", "e5", "E5", "e+2", "e-05", "E-400", "e400", "e+16", "e-7"]),
    ),
    st.sampled_from(NUMBERS),
)
string_texts = st.one_of(st.text(max_size=12), st.sampled_from(STRINGS)).map(
    lambda s: s if s in STRINGS else json.dumps(s, ensure_ascii=False)[1:-1]
)
key_texts = st.one_of(names.map(lambda s: json.dumps(s, ensure_ascii=False)[1:-1]), st.sampled_from(STRINGS))
def _member_name(text: str) -> str:
    """A member name as a parser sees it (its escapes resolved), or the raw text when it is
    not a valid JSON string body (such texts make the document malformed anyway)."""
    try:
        return str(json.loads('"' + text + '"'))
    except ValueError:
        return text


json_texts = st.recursive(
    st.one_of(
        number_texts,
        string_texts.map(lambda s: '"' + s + '"'),
        st.sampled_from(["true", "false", "null"]),
        st.sampled_from(TAGGED),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda v: "[" + ",".join(v) + "]"),
        # Unique names: the library never hands out an object with a repeated name (I-JSON).
        st.lists(st.tuples(key_texts, inner), max_size=4, unique_by=lambda kv: _member_name(kv[0])).map(
            lambda kv: "{" + ",".join('"' + k + '":' + v for k, v in kv) + "}"
        ),
    ),
    max_leaves=12,
)


@SETTINGS
@given(text=json_texts)
def test_decoders_agree_on_random_json(text: str) -> None:
    check_decoders_agree(text)
    check_decoders_agree('{"v":' + text + "}")


plain_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.sampled_from(STRINGS),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)),
    max_leaves=12,
)


@SETTINGS
@given(value=plain_values)
def test_decoders_agree_on_encoded_values(value: Any) -> None:
    try:
        text = encode_slow({"v": value})
    except CodecError:
        return  # e.g. a dict whose only key is a tag name
    got = check_decoders_agree(text)
    assert encode_slow(got) == text  # lossless


# -- encoding --------------------------------------------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


def check_encoders_agree(value: Any) -> None:
    fast = outcome(lambda: codec.encode_state(value))
    slow = outcome(lambda: codec._encode_state_slow(value))
    assert fast == slow, (value, fast, slow)
    inner = outcome(lambda: codec.encode_value(value))
    reference = outcome(lambda: encode_slow(value))
    assert inner == reference, (value, inner, reference)


def circular() -> Any:
    a: Any = {"a": [1]}
    a["a"].append(a)
    return a


def nested(depth: int) -> Any:
    value: Any = {"leaf": 1}
    for i in range(depth):
        value = {"k": value} if i % 2 else {"k": [value]}
    return value


ENCODER_CASES = [
    {},
    {"a": 1, "b": -2.5, "c": "x", "d": None, "e": True, "f": False, "g": [], "h": {}},
    {"status": "s1", "m1": {"id": 1, "score": 1.25}},
    {"a": -0.0, "b": 0.0, "c": 1e16, "d": 1e-05, "e": 0.1, "f": 5e-324, "g": 1.7976931348623157e308},
    {"a": MAX_SAFE_INTEGER, "b": -MAX_SAFE_INTEGER, "c": MAX_SAFE_INTEGER + 1, "d": -MAX_SAFE_INTEGER - 1},
    {"a": 2**64, "b": [2**200], "c": {"d": -(2**70)}},
    {"a": (1, 2, (3,)), "b": [(), {}]},
    {"s": "\u00e9\u4e2d\U0001f600\n\t\"\\\x00\x1f\x7f\u2028"},
    {"\u00e9": 1, "\n": 2, "": 3, '"': 4},
    {"a": float("nan")},
    {"a": [float("inf")]},
    {"a": {"b": -float("inf")}},
    {"a": "\ud800"},
    {"\udc00": 1},
    {"a": {"$date": "2026-01-01"}},
    {"a": [{"$set": []}]},
    {"$date": 1},
    {"$date": 1, "other": 2},
    {"a": {"$x": 1}},
    {"a": JSONInt("-0"), "b": JSONFloat("1.50"), "c": BigInt(5), "d": JSONInt(2**60)},
    {"a": Color.RED, "b": Text("t"), Text("key"): 1},
    {"a": collections.OrderedDict([("x", 1)]), "b": collections.OrderedDict([("$date", 1)])},
    {"a": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), "b": {1, 2}, "c": b"\x00\x01"},
    {"a": dt.datetime(2026, 1, 1)},
    {"a": {1: "int key"}, "b": {(1, 2): "tuple key"}},
    {"a": array.array("h", [1, 2]), "b": re.compile("a+", re.I), "c": Decimal("1.50")},
    {"a": JSMap([(1, 2)]), "b": JSSet([1]), "c": Tagged("$date", "x"), "d": RegExp("a", "g")},
    {"a": object()},
    {"a": [1, [2, [3, [4, lambda: 0]]]]},
    circular(),
    nested(60),
    nested(99),
    nested(100),
    nested(150),
    nested(250),
    collections.OrderedDict([("a", 1)]),
    JSMap([("a", 1)]),
    [1, 2],
    "not a mapping",
]


@pytest.mark.parametrize("value", ENCODER_CASES, ids=range(len(ENCODER_CASES)))
def test_encoders_agree(value: Any) -> None:
    check_encoders_agree(value)


def test_the_fast_path_is_taken_for_plain_values() -> None:
    assert codec._encode_fast({"status": "s1", "m1": {"id": 1, "score": 1.25, "t": ["a", None]}}) is not None
    for special in (JSONInt("-0"), JSONFloat("1.50"), BigInt(1), 2**53, Color.RED, Text("x"), {"$date": "x"}, {1: 2}):
        assert codec._encode_fast({"v": special}) is None
    assert codec._encode_fast(nested(150)) is None


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=MAX_SAFE_INTEGER - 2, max_value=MAX_SAFE_INTEGER + 2),
    st.floats(),  # NaN and infinities too: both paths refuse them
    st.text(max_size=8),  # lone surrogates too
    st.sampled_from(STRINGS),
    st.sampled_from([JSONInt("-0"), JSONFloat("1.50"), BigInt(7), Color.RED, Text("t"), b"\x01", {1, 2}]),
)
any_values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(names, inner, max_size=4),
        st.dictionaries(st.integers(), inner, max_size=2),
    ),
    max_leaves=12,
)


@SETTINGS
@given(value=st.dictionaries(names, any_values, max_size=5))
def test_encoders_agree_on_random_values(value: Any) -> None:
    check_encoders_agree(value)


@SETTINGS
@given(value=st.dictionaries(names, plain_values, max_size=5))
def test_fast_encoding_round_trips_through_the_library(value: Any) -> None:
    try:
        data = codec._encode_state_slow(value)
    except CodecError:
        return
    assert codec.encode_state(value) == data
    with Agent(":memory:") as agent:
        got = agent.replace_state(value)
        assert agent.get_state_json().encode("utf-8") == data
        assert codec.encode_state(got) == data
        assert identical(got, agent.get_state())
