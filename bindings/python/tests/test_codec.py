"""Codec round trips for every tagged type: exact wire forms, and lossless both ways (what
``get_state`` returns, written back, stores the same JSON)."""

from __future__ import annotations

import array
import base64
import datetime as dt
import enum
import re
import struct
from decimal import Decimal
from typing import Any, Tuple

import pytest

from agent_state.values import TYPED_ARRAY_TYPES
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
    decode,
    encode_value,
)
from agent_state.limits import MAX_SAFE_INTEGER

UTC = dt.timezone.utc


def store(agent: Agent, value: Any) -> Tuple[Any, str]:
    """Stores ``{"v": value}``, checks that the library stored exactly the binding's encoding and
    that writing back what was read stores the same JSON; returns (value read, inner JSON)."""
    agent.replace_state({"v": value})
    text = agent.get_state_json()
    assert text == '{"v":' + encode_value(value) + "}"
    got = agent.get_state()["v"]
    agent.replace_state({"v": got})
    assert agent.get_state_json() == text, "not lossless"
    return got, text[len('{"v":') : -1]


def load(agent: Agent, inner: str) -> Any:
    """Stores raw JSON ``{"v": inner}``, reads it, writes it back, checks the JSON is unchanged."""
    agent.replace_state_json('{"v":' + inner + "}")
    stored = agent.get_state_json()
    got = agent.get_state()["v"]
    agent.replace_state({"v": got})
    assert agent.get_state_json() == stored, "not lossless"
    return got


# -- $date ----------------------------------------------------------------------------------


def test_date_wire_form_and_round_trip(mem: Agent) -> None:
    d = dt.datetime(2026, 11, 30, 3, 6, 44, 123000, tzinfo=UTC)
    got, wire = store(mem, d)
    assert wire == '{"$date":"2026-11-30T03:06:44.123Z"}'
    assert got == d and got.tzinfo is UTC and type(got) is dt.datetime


def test_date_in_another_timezone_is_stored_in_utc(mem: Agent) -> None:
    d = dt.datetime(2026, 1, 1, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    got, wire = store(mem, d)
    assert wire == '{"$date":"2025-12-31T23:30:00.000Z"}'
    assert got == d  # the same instant
    assert got.utcoffset() == dt.timedelta(0)


def test_date_limits(mem: Agent) -> None:
    assert store(mem, dt.datetime(1, 1, 1, tzinfo=UTC))[1] == '{"$date":"0001-01-01T00:00:00.000Z"}'
    top = dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert store(mem, top)[1] == '{"$date":"9999-12-31T23:59:59.999Z"}'
    # Year 0 is valid for the library (JavaScript has it) but not for datetime: kept verbatim.
    got = load(mem, '{"$date":"0000-06-01T00:00:00.000Z"}')
    assert got == Tagged("$date", "0000-06-01T00:00:00.000Z")
    with pytest.raises(CodecError, match="out of range"):
        mem.set_state({"d": dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))})


def test_date_precision_is_the_shortest_exact_fraction(mem: Agent) -> None:
    # A datetime with microseconds is stored exactly (6 digits) instead of refused;
    # a whole number of milliseconds keeps the 3-digit form every older value has.
    micro = dt.datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)
    got, wire = store(mem, micro)
    assert wire == '{"$date":"2026-01-01T00:00:00.001500Z"}'
    assert got == micro and got.tzinfo is UTC
    got, wire = store(mem, dt.datetime(2026, 1, 1, 0, 0, 0, 2000, tzinfo=UTC))
    assert wire == '{"$date":"2026-01-01T00:00:00.002Z"}' and got.microsecond == 2000
    got, wire = store(mem, dt.datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC))
    assert wire == '{"$date":"2026-01-01T00:00:00.000001Z"}' and got.microsecond == 1
    top = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert store(mem, top) == (top, '{"$date":"9999-12-31T23:59:59.999999Z"}')
    with pytest.raises(CodecError, match="naive"):
        mem.set_state({"d": dt.datetime(2026, 1, 1)})


def test_date_reading_each_precision(mem: Agent) -> None:
    assert load(mem, '{"$date":"2026-11-30T03:06:44.123Z"}') == dt.datetime(
        2026, 11, 30, 3, 6, 44, 123000, tzinfo=UTC
    )
    # Six digits with trailing zeros read exactly, and are written back in the shortest form:
    # the same instant, so the library's text changes only in its digit count.
    mem.replace_state_json('{"v":{"$date":"2026-11-30T03:06:44.120000Z"}}')
    assert mem.get_state()["v"] == dt.datetime(2026, 11, 30, 3, 6, 44, 120000, tzinfo=UTC)
    assert load(mem, '{"$date":"2026-11-30T03:06:44.123456Z"}') == dt.datetime(
        2026, 11, 30, 3, 6, 44, 123456, tzinfo=UTC
    )
    # Nanoseconds (as Go writes) are truncated to microseconds, toward the past: the last
    # instant of year 9999 stays in its second instead of overflowing datetime.
    for text, micro in [
        ("2026-11-30T03:06:44.123456789Z", 123456),
        ("2026-11-30T03:06:44.000000999Z", 0),
        ("9999-12-31T23:59:59.999999999Z", 999999),
    ]:
        mem.replace_state_json('{"v":{"$date":"' + text + '"}}')
        got = mem.get_state()["v"]
        assert type(got) is dt.datetime and got.tzinfo is UTC, text
        assert got == dt.datetime.fromisoformat(text[:19]).replace(microsecond=micro, tzinfo=UTC)
    # Decoding outside an agent follows the same rule.
    assert decode('{"$date":"2026-11-30T03:06:44.999999999Z"}') == dt.datetime(
        2026, 11, 30, 3, 6, 44, 999999, tzinfo=UTC
    )


def test_microsecond_datetimes_on_a_store_file(open_agent, db_path) -> None:
    # A program that stores datetime.now() in a message, on a real store file that is
    # reopened: datetime.now() stores without rounding and reads back equal; so does a fixed
    # microsecond value (deterministic).
    fixed = dt.datetime(2026, 12, 1, 7, 57, 33, 590436, tzinfo=UTC)
    now = dt.datetime.now(dt.timezone.utc)
    with open_agent(db_path, initial_state={"messages": {}}) as a:
        a.set_state({"messages": {"m1": {"role": "user", "text": "hi", "at": now}}})
        a.set_state({"messages": {"m2": {"role": "user", "text": "again", "at": fixed}}})
        assert a.get_state()["messages"]["m1"]["at"] == now
    with open_agent(db_path, initial_state={"messages": {}}) as a:
        messages = a.get_state()["messages"]
        assert messages["m1"] == {"role": "user", "text": "hi", "at": now}
        assert messages["m2"]["at"] == fixed
        assert '"at":{"$date":"2026-12-01T07:57:33.590436Z"}' in a.get_state_json()


# -- $bigint and numbers --------------------------------------------------------------------


def test_int_rule_is_the_javascript_safe_range(mem: Agent) -> None:
    for n in (0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER):
        got, wire = store(mem, n)
        assert wire == str(n) and type(got) is int and got == n
    for n in (MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**64, -(10**40)):
        got, wire = store(mem, n)
        assert wire == '{"$bigint":"%d"}' % n
        assert type(got) is BigInt and got == n
        assert type(got + 1) is int


def test_bigint_wrapper_forces_the_tag(mem: Agent) -> None:
    got, wire = store(mem, BigInt(5))
    assert wire == '{"$bigint":"5"}' and got == 5 and type(got) is BigInt
    assert store(mem, BigInt(-5))[1] == '{"$bigint":"-5"}'
    assert store(mem, BigInt(0))[1] == '{"$bigint":"0"}'
    assert repr(BigInt(7)) == "BigInt(7)"


def test_huge_bigint_beyond_the_int_str_digit_limit(mem: Agent) -> None:
    n = 7 ** 20000  # about 16900 digits
    got, wire = store(mem, n)
    assert got == n and type(got) is BigInt
    assert load(mem, '{"$bigint":"-%s"}' % ("9" * 5000)) == -(10**5000 - 1)


def test_json_number_integers_outside_the_safe_range_stay_numbers(mem: Agent) -> None:
    got = load(mem, "9007199254740993")
    assert type(got) is JSONInt and got == 9007199254740993 and got.json == "9007199254740993"
    got = load(mem, "-0")
    assert type(got) is JSONInt and got == 0
    got, wire = store(mem, JSONInt(2**64))
    assert wire == "18446744073709551616"
    with pytest.raises(CodecError):
        JSONInt("01")


def test_floats_round_trip(mem: Agent) -> None:
    for f in (0.1, 1.5, -2.25, 1e300, 5e-324, 1.0, -0.0, 123456789.123, 1e16, 1e-7):
        got, wire = store(mem, f)
        assert wire == repr(f)
        assert got == f and type(got) is float
        assert str(got) == str(f)  # -0.0 stays -0.0


def test_number_text_is_kept(mem: Agent) -> None:
    for text in ("1.50", "1e-400", "0.1000000000000000055511151231257827", "1e+2", "2.0e-05"):
        got = load(mem, text)
        assert type(got) is JSONFloat and got.json == text
        assert got == float(text)
    # The library normalizes an exponent marker (1E2 -> 1e+2); the binding keeps what is stored.
    got = load(mem, "1E2")
    assert got == 100.0 and got.json == "1e+2"
    assert repr(JSONFloat("2.50")) == "JSONFloat('2.50')"
    with pytest.raises(CodecError):
        JSONFloat("1e400")
    with pytest.raises(CodecError):
        JSONFloat("NaN")


def test_other_numbers(mem: Agent) -> None:
    class Color(enum.IntEnum):
        RED = 1

    assert store(mem, Color.RED)[1] == "1"
    assert store(mem, Decimal("1.10"))[1] == "1.10"
    assert store(mem, Decimal("1E+2"))[1] == "1e+2"
    assert store(mem, Decimal("-0"))[1] == "-0"
    assert store(mem, True)[1] == "true"
    for bad in (Decimal("NaN"), Decimal("Infinity"), Decimal("1e400")):
        with pytest.raises(CodecError):
            mem.set_state({"n": bad})


# -- $map -----------------------------------------------------------------------------------


def test_dict_with_non_string_keys_is_a_map(mem: Agent) -> None:
    got, wire = store(mem, {1: "one", "two": 2, (1, 2): [3], None: False})
    assert wire == '{"$map":[[1,"one"],["two",2],[[1,2],[3]],[null,false]]}'
    assert isinstance(got, JSMap)
    assert got[1] == "one" and got["two"] == 2 and got[(1, 2)] == [3] and got[[1, 2]] == [3]
    assert got[None] is False
    assert got == {1: "one", "two": 2, (1, 2): [3], None: False}


def test_jsmap_keeps_its_form_and_order(mem: Agent) -> None:
    m = JSMap([("b", 1), ("a", 2)])
    got, wire = store(mem, m)
    assert wire == '{"$map":[["b",1],["a",2]]}'
    assert got == m and list(got) == ["b", "a"]
    assert store(mem, JSMap())[1] == '{"$map":[]}'
    unhashable = JSMap([({"k": [1]}, "dict key"), ([1, [2]], "list key")])
    got, wire = store(mem, unhashable)
    assert wire == '{"$map":[[{"k":[1]},"dict key"],[[1,[2]],"list key"]]}'
    assert got[{"k": [1]}] == "dict key" and got == unhashable
    # Keys compare as the library compares them: numbers by value (1 and 1.0 are one key, as
    # in JavaScript), everything else by JSON text (true is not 1; [1] is not [1.0]).
    got = load(mem, '{"$map":[[1.0,"float"],[true,"bool"],[[1],"list"],[[1.0],"list of float"]]}')
    assert len(got) == 4 and got[1] == "float" and got[True] == "bool" and got[[1.0]] == "list of float"
    assert list(got)[0] == 1.0 and type(list(got)[0]) is float
    with pytest.raises(CodecError, match="same key twice"):
        mem.set_state_json('{"m":{"$map":[[1,"int"],[1.0,"float"]]}}')
    with pytest.raises(CodecError, match="same key twice"):
        mem.set_state_json('{"m":{"$map":[[0,"zero"],[-0.0,"minus zero"]]}}')
    # A plain dict with only str keys is an object, not a map.
    assert store(mem, {"a": 1})[1] == '{"a":1}'


def test_jsmap_api() -> None:
    m = JSMap({1: "a"})
    m[[2]] = "b"
    m[1] = "c"
    assert m.pairs() == [(1, "c"), ([2], "b")]
    del m[[2]]
    assert len(m) == 1 and [2] not in m and object() not in m
    with pytest.raises(KeyError):
        m["missing"]
    assert m.copy() == m and repr(m) == "JSMap([(1, 'c')])"
    with pytest.raises(TypeError):
        hash(m)


# -- $set -----------------------------------------------------------------------------------


def test_sets_round_trip(mem: Agent) -> None:
    got, wire = store(mem, {3})
    assert wire == '{"$set":[3]}' and isinstance(got, JSSet) and got == {3}
    got, wire = store(mem, frozenset(["x"]))
    assert wire == '{"$set":["x"]}' and got == frozenset(["x"])
    assert store(mem, set())[1] == '{"$set":[]}'
    got, _ = store(mem, {1, "1", (1,), None, 2.5})
    assert got == {1, "1", (1,), None, 2.5}


def test_jsset_keeps_order_and_holds_unhashable_values(mem: Agent) -> None:
    got = load(mem, '{"$set":["b","a","c"]}')
    assert list(got) == ["b", "a", "c"]
    s = JSSet([[1], {"a": 1}, [1], 1, 1.0, -0.0, 0, True, [1.0]])
    assert list(s) == [[1], {"a": 1}, 1, -0.0, True, [1.0]]  # 1.0 is 1, 0 is -0.0; true is not 1
    got, wire = store(mem, s)
    assert wire == '{"$set":[[1],{"a":1},1,-0.0,true,[1.0]]}'
    assert [1] in got and {"a": 1} in got and [2] not in got and 1.0 in got and 0 in got
    got.add([2])
    got.discard([1])
    got.discard(1.0)
    assert list(got) == [{"a": 1}, -0.0, True, [1.0], [2]]
    assert (got | {"x"}) == JSSet([{"a": 1}, -0.0, True, [1.0], [2], "x"])
    with pytest.raises(CodecError, match="same value twice"):
        mem.set_state_json('{"s":{"$set":[1,1.0]}}')


def test_set_elements_that_encode_the_same_are_refused(mem: Agent) -> None:
    class Distinct(str):
        __eq__ = object.__eq__  # type: ignore[assignment]
        __hash__ = object.__hash__  # type: ignore[assignment]

    with pytest.raises(CodecError, match="same for the library"):
        mem.set_state({"s": {Distinct("a"), Distinct("a")}})
    with pytest.raises(CodecError, match="same for the library"):
        mem.set_state({"m": {Distinct("a"): 1, Distinct("a"): 2, 3: 4}})
    # Different ints that are one double: the same number for the library (and JavaScript).
    twins = {JSONInt(2**53), JSONInt(2**53 + 1)}
    assert len(twins) == 2
    with pytest.raises(CodecError, match="same for the library"):
        mem.set_state({"s": twins})


# -- $arraybuffer -----------------------------------------------------------------------------


def test_bytes_round_trip(mem: Agent) -> None:
    got, wire = store(mem, b"")
    assert wire == '{"$arraybuffer":""}' and got == b""
    data = bytes(range(256))
    got, wire = store(mem, data)
    assert wire == '{"$arraybuffer":"%s"}' % base64.b64encode(data).decode()
    assert got == data and type(got) is bytes
    assert store(mem, bytearray(b"\x00\x01\x02"))[1] == '{"$arraybuffer":"AAEC"}'
    assert store(mem, memoryview(b"abc"))[1] == '{"$arraybuffer":"YWJj"}'


# -- $typedarray ----------------------------------------------------------------------------


ARRAYS = [
    ("b", [-128, 0, 127], "Int8Array"),
    ("B", [0, 255], "Uint8Array"),
    ("h", [-32768, 32767], "Int16Array"),
    ("H", [0, 65535], "Uint16Array"),
    ("i", [-(2**31), 2**31 - 1], "Int32Array"),
    ("I", [0, 2**32 - 1], "Uint32Array"),
    ("l", [-(2**63), 2**63 - 1], "BigInt64Array"),
    ("L", [0, 2**64 - 1], "BigUint64Array"),
    ("q", [-(2**63), 5], "BigInt64Array"),
    ("Q", [2**64 - 1], "BigUint64Array"),
    ("f", [1.0, 2.0, -0.5], "Float32Array"),
    ("d", [0.1, -1e300], "Float64Array"),
]


@pytest.mark.parametrize("code,values,name", ARRAYS)
def test_array_round_trip(mem: Agent, code: str, values: list, name: str) -> None:
    arr = array.array(code, values)
    got, wire = store(mem, arr)
    fmt = TYPED_ARRAY_TYPES[name][0]
    le = struct.pack("<%d%s" % (len(values), fmt), *values)
    assert wire == '{"$typedarray":{"type":"%s","base64":"%s"}}' % (name, base64.b64encode(le).decode())
    assert isinstance(got, array.array) and got.tolist() == arr.tolist()
    assert got.itemsize == arr.itemsize


def test_float32_wire_form_of_the_brief(mem: Agent) -> None:
    got = load(mem, '{"$typedarray":{"type":"Float32Array","base64":"AAAAAAAAgD8="}}')
    assert got == array.array("f", [0.0, 1.0])


def test_typed_arrays_without_an_array_twin(mem: Agent) -> None:
    half = TypedArray.from_values("Float16Array", [1.0, -2.5, 65504.0])
    got, wire = store(mem, half)
    assert wire == '{"$typedarray":{"type":"Float16Array","base64":"ADwAwf97"}}'
    assert got == half and got.tolist() == [1.0, -2.5, 65504.0] and len(got) == 3
    with pytest.raises(ValueError):
        got.to_array()
    clamped = TypedArray("Uint8ClampedArray", b"\x00\xff")
    got, _ = store(mem, clamped)
    assert got == clamped and got.to_array() == array.array("B", [0, 255])
    # Every JavaScript type name, read raw, is lossless.
    for name in ("Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Float16Array",
                 "Int32Array", "Uint32Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array"):
        load(mem, '{"$typedarray":{"type":"%s","base64":"AAAAAAAAAAA="}}' % name)
        load(mem, '{"$typedarray":{"type":"%s","base64":""}}' % name)


def test_typed_array_validation() -> None:
    with pytest.raises(CodecError):
        TypedArray("Float32Array", b"\x00")
    with pytest.raises(CodecError):
        TypedArray("Foo", b"")
    with pytest.raises(CodecError):
        TypedArray.from_values("Uint8ClampedArray", [256])
    with pytest.raises(AttributeError):
        TypedArray("Int8Array").type = "x"  # type: ignore[misc]
    assert TypedArray.from_array(array.array("h", [1])) == TypedArray("Int16Array", b"\x01\x00")


# -- $regexp --------------------------------------------------------------------------------


def test_pattern_round_trip(mem: Agent) -> None:
    p = re.compile("a+b")
    got, wire = store(mem, p)
    assert wire == '{"$regexp":{"source":"a+b","flags":""}}' and got == p
    p = re.compile(r"^\d+$", re.IGNORECASE | re.MULTILINE | re.DOTALL)
    got, wire = store(mem, p)
    assert wire == '{"$regexp":{"source":"^\\\\d+$","flags":"ims"}}'
    assert isinstance(got, re.Pattern) and got == p


def test_regexp_flags_python_lacks_use_the_wrapper(mem: Agent) -> None:
    got = load(mem, '{"$regexp":{"source":"a+b","flags":"gi"}}')
    assert got == RegExp("a+b", "gi")
    assert got.compile().flags & re.IGNORECASE
    # Flags out of canonical order are kept as written.
    assert load(mem, '{"$regexp":{"source":"x","flags":"mi"}}') == RegExp("x", "mi")
    # A source Python cannot compile stays a RegExp.
    assert load(mem, '{"$regexp":{"source":"(","flags":""}}') == RegExp("(", "")
    got, wire = store(mem, RegExp("a", "dy"))
    assert wire == '{"$regexp":{"source":"a","flags":"dy"}}'
    for bad in ("gg", "uv", "x"):
        with pytest.raises(CodecError):
            RegExp("a", bad)
    for flag in (re.VERBOSE, re.ASCII):
        with pytest.raises(CodecError):
            mem.set_state({"r": re.compile("a", flag)})


# -- Tagged, plain JSON, and tag-shaped dicts --------------------------------------------------


def test_tagged_escape_hatch(mem: Agent) -> None:
    got, wire = store(mem, Tagged("$bigint", "12"))
    assert wire == '{"$bigint":"12"}' and got == BigInt(12)
    with pytest.raises(CodecError):
        Tagged("$nope", 1)


def test_tag_shaped_dicts_are_refused_but_tag_names_among_others_are_plain(mem: Agent) -> None:
    for tag in ("$date", "$bigint", "$map", "$set", "$arraybuffer", "$typedarray", "$regexp"):
        with pytest.raises(CodecError, match="tagged value"):
            mem.set_state({"x": {tag: "anything"}})
        got, wire = store(mem, {tag: "x", "other": 1})
        assert got == {tag: "x", "other": 1}
    assert store(mem, {"$other": 1})[1] == '{"$other":1}'


def test_plain_json(mem: Agent) -> None:
    value = {"s": "é\n\"\\\u0000\u2028😀", "l": [1, [2, [3]], {}], "t": (1, 2), "n": None, "b": False}
    got, wire = store(mem, value)
    assert got == {**value, "t": [1, 2]}
    assert decode(wire) == got


def test_decode_and_encode_value_helpers() -> None:
    assert decode('{"a":{"$bigint":"3"}}') == {"a": BigInt(3)}
    assert decode(b"[1]") == [1]
    assert encode_value([{1}, b"x"]) == '[{"$set":[1]},{"$arraybuffer":"eA=="}]'
