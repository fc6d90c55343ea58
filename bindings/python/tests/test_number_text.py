"""Numbers read from the store print as the plain numbers they are: ``str()``, ``format()``,
f-strings, ``int()``, ``float()``, ``Decimal(str(x))``, ``json.dumps`` and comparisons of a
``BigInt``, ``JSONInt`` or ``JSONFloat`` give what the plain ``int`` or ``float`` gives (such
values end up in prompts, URLs and log lines); only ``repr()`` names the wrapper type."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, List, Union

import pytest

from agent_state import Agent, BigInt, JSONFloat, JSONInt

SPECS = ["", ",", ">10", "<12", "^9", "+", "_", "08", ".2f", ".3e", "x", "b", "n", "%"]


def _plain(value: Union[int, float]) -> Union[int, float]:
    return int(value) if isinstance(value, int) else float(value)


def _check_prints_as_plain(value: Union[int, float]) -> None:
    plain = _plain(value)
    assert type(plain) in (int, float) and type(value) is not type(plain)
    assert str(value) == str(plain)
    assert f"{value}" == f"{plain}"
    assert "%s" % value == "%s" % plain
    assert "{}".format(value) == "{}".format(plain)
    for spec in SPECS:
        if isinstance(plain, float) and spec in ("x", "b"):
            continue  # not float format types: the plain float raises too
        assert format(value, spec) == format(plain, spec), spec
    assert int(value) == int(plain) and type(int(value)) is int
    assert float(value) == float(plain) and type(float(value)) is float
    assert Decimal(str(value)) == Decimal(str(plain))
    assert json.dumps({"n": value}, default=str) == json.dumps({"n": plain})
    assert value == plain and hash(value) == hash(plain) and not value != plain
    assert value <= plain <= value and not value < plain
    assert {plain: "x"}[value] == "x"


def test_bigint_read_from_the_store_prints_as_its_digits(mem: Agent) -> None:
    mem.set_state({"user": 1234567890123456789})
    user = mem.get_state()["user"]
    assert type(user) is BigInt and repr(user) == "BigInt(1234567890123456789)"
    assert f"https://example.com/u/{user}" == "https://example.com/u/1234567890123456789"
    assert f"{user:,}" == "1,234,567,890,123,456,789"
    _check_prints_as_plain(user)
    _check_prints_as_plain(BigInt(-5))


def test_jsonint_prints_as_the_int(mem: Agent) -> None:
    mem.set_state_json('{"id": 9007199254740993, "zero": -0}')
    state = mem.get_state()
    big, zero = state["id"], state["zero"]
    assert type(big) is JSONInt and repr(big) == "JSONInt('9007199254740993')"
    assert f"id={big}" == "id=9007199254740993" and f"{big:>20}" == "    9007199254740993"
    assert str(zero) == "0" and repr(zero) == "JSONInt('-0')"  # Python's int has no -0
    for value in (big, zero, JSONInt(2**70)):
        _check_prints_as_plain(value)
    # Written back, each keeps its exact text.
    mem.replace_state(state)
    assert mem.get_state_json() == '{"id":9007199254740993,"zero":-0}'


def test_jsonfloat_prints_as_the_float(mem: Agent) -> None:
    mem.set_state_json('{"price": 0.10, "big": 1E2, "tiny": 1e-400, "x": 2.50}')
    state = mem.get_state()
    price = state["price"]
    assert type(price) is JSONFloat and repr(price) == "JSONFloat('0.10')"
    assert str(price) == "0.1" and f"{price:.2f}" == "0.10" and f"{price:>6}" == "   0.1"
    assert Decimal(str(price)) == Decimal("0.1") and Decimal(price.json) == Decimal("0.10")
    assert f"{state['big']}" == "100.0" and f"{state['tiny']}" == "0.0"
    values: List[Any] = [state[k] for k in ("price", "big", "tiny", "x")]
    for value in values + [JSONFloat("1.50"), JSONFloat(-2.5)]:
        assert type(value) is JSONFloat
        _check_prints_as_plain(value)
    mem.replace_state(state)
    assert mem.get_state_json() == '{"price":0.10,"big":1e+2,"tiny":1e-400,"x":2.50}'


@pytest.mark.parametrize("digits", [5000, 20000])
def test_a_bigint_beyond_the_int_str_digit_limit_prints_too(digits: int) -> None:
    value = BigInt(int("7" * 4000) * 10 ** (digits - 4000))
    assert len(str(value)) == digits and f"{value}" == str(value)
    assert str(value).startswith("7777") and repr(value) == f"BigInt({value})"
