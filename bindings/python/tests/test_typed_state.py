"""Typed state at run time: dataclass and pydantic model instances as patches (the fields they
set) and as whole states (all their fields), the state read back as a model
(``get_state_as``), the mapping of ``UUID``, ``Enum``, ``Decimal`` and ``pathlib`` paths in
both directions, the ``default`` encoder, and ``Agent[ConvState]`` at run time. (What type
checkers see is tests/typing_check.py's, which run-tests.sh checks with mypy.)"""

from __future__ import annotations

import asyncio
import dataclasses
import decimal
import enum
import pathlib
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple, TypedDict

import pydantic
import pytest

from agent_state import Agent, AsyncAgent, CodecError, JSONFloat, Versioned, encode_value

Where = Callable[[Any], Tuple[Any, Dict[str, Any]]]


class Status(enum.Enum):
    IDLE = "idle"
    BUSY = "busy"


class Level(enum.Enum):
    LOW = 1
    HIGH = (2, "high")


@dataclasses.dataclass
class Reply:
    text: str = ""
    tokens: int = 0


@dataclasses.dataclass
class Conv:
    status: Status = Status.IDLE
    last_reply: Reply = dataclasses.field(default_factory=Reply)
    at: int = 0
    session: Optional[uuid.UUID] = None
    budget: decimal.Decimal = decimal.Decimal("0.00")
    workdir: pathlib.PurePosixPath = pathlib.PurePosixPath("/srv")
    history: List[Reply] = dataclasses.field(default_factory=list)


class PReply(pydantic.BaseModel):
    text: str = ""
    tokens: int = 0


class PConv(pydantic.BaseModel):
    status: Status = Status.IDLE
    last_reply: PReply = PReply()
    at: int = 0
    session: Optional[uuid.UUID] = None
    budget: decimal.Decimal = decimal.Decimal("0.00")


class ConvState(TypedDict):
    status: str
    at: int


SESSION = uuid.UUID("12345678-1234-5678-1234-567812345678")


# -- dataclasses -----------------------------------------------------------------------------


def test_a_dataclass_replaces_with_all_its_fields(mem: Agent) -> None:
    conv = Conv(status=Status.BUSY, session=SESSION, budget=decimal.Decimal("12.50"), history=[Reply("hi", 2)])
    mem.replace_state(conv)
    assert mem.get_state_json() == (
        '{"status":"busy","last_reply":{"text":"","tokens":0},"at":0,'
        '"session":"12345678-1234-5678-1234-567812345678","budget":12.50,"workdir":"/srv",'
        '"history":[{"text":"hi","tokens":2}]}'
    )
    assert mem.get_state_as(Conv) == conv  # every field converted back by its type
    assert mem.replace_state_if(mem.get_state_versioned().version, Conv()).state["status"] == "idle"


def test_a_dataclass_patch_writes_the_fields_not_at_their_default(mem: Agent) -> None:
    mem.replace_state({"status": "busy", "at": 7, "kept": True})
    merged = mem.set_state(Conv(status=Status.IDLE, at=9, last_reply=Reply("done")))
    # status is at its default (not written), at is not; the nested dataclass is a whole value
    # (merged as an object: all its fields).
    assert merged == {"status": "busy", "at": 9, "kept": True, "last_reply": {"text": "done", "tokens": 0}}
    state, version = mem.set_state_if(mem.get_state_versioned().version, Conv(session=SESSION))
    assert state["session"] == str(SESSION) and state["at"] == 9


def test_a_dataclass_inside_a_value_is_an_object(mem: Agent) -> None:
    mem.set_state({"replies": [Reply("a", 1)], "last": Reply()})
    assert mem.get_state() == {"replies": [{"text": "a", "tokens": 1}], "last": {"text": "", "tokens": 0}}


@pytest.mark.any_backend
def test_a_dataclass_as_initial_state(open_agent: Callable[..., Agent], db_path: Any) -> None:
    assert open_agent(initial_state=Conv(at=3)).get_state()["at"] == 3
    # The class itself is a callable: an initial-state hook building the default instance.
    assert open_agent(db_path.with_name("other.db"), initial_state=Reply).get_state() == {"text": "", "tokens": 0}


def test_get_state_as_a_dataclass(mem: Agent) -> None:
    mem.replace_state_json('{"status": "busy", "at": 4, "budget": 0.10, "unknown": "ignored"}')
    conv = mem.get_state_as(Conv)
    assert conv == Conv(status=Status.BUSY, at=4, budget=decimal.Decimal("0.10"))
    assert type(conv.budget) is decimal.Decimal and str(conv.budget) == "0.10"  # the exact digits
    mem.replace_state({"tokens": 1})  # text has a default: fine
    assert mem.get_state_as(Reply) == Reply("", 1)

    @dataclasses.dataclass
    class Required:
        needed: int

    mem.replace_state({})
    with pytest.raises(TypeError):
        mem.get_state_as(Required)
    with pytest.raises(TypeError, match="a dataclass or a pydantic model class"):
        mem.get_state_as(dict)


# -- pydantic --------------------------------------------------------------------------------


def test_a_pydantic_patch_writes_the_fields_set(mem: Agent) -> None:
    mem.replace_state({"status": "busy", "at": 7})
    merged = mem.set_state(PConv(at=8))  # only at was set explicitly
    assert merged == {"status": "busy", "at": 8}
    merged = mem.set_state(PConv(status=Status.IDLE, last_reply=PReply(text="ok")))
    assert merged == {"status": "idle", "at": 8, "last_reply": {"text": "ok"}}  # nested: set fields


def test_a_pydantic_model_replaces_with_all_its_fields(mem: Agent) -> None:
    mem.replace_state(PConv(session=SESSION, budget=decimal.Decimal("1.25")))
    assert mem.get_state_json() == (
        '{"status":"idle","last_reply":{"text":"","tokens":0},"at":0,'
        '"session":"12345678-1234-5678-1234-567812345678","budget":1.25}'
    )
    model = mem.get_state_as(PConv)
    assert model == PConv(session=SESSION, budget=decimal.Decimal("1.25"))
    assert model.status is Status.IDLE and model.session == SESSION


def test_pydantic_v1_models(mem: Agent) -> None:
    v1 = pytest.importorskip("pydantic.v1")

    class Old(v1.BaseModel):
        status: str = "idle"
        at: int = 0

    assert mem.replace_state(Old(at=1)) == {"status": "idle", "at": 1}
    assert mem.set_state(Old(status="busy")) == {"status": "busy", "at": 1}  # the field set
    assert mem.get_state_as(Old) == Old(status="busy", at=1)


@pytest.mark.any_backend
def test_async_agent_takes_and_gives_models(tmp_path: Any, store_of: Where) -> None:
    target, extra = store_of(tmp_path / "conv.db")

    async def main() -> None:
        async with AsyncAgent[ConvState].open(target, **extra) as agent:
            assert await agent.set_state(PConv(at=2)) == {"at": 2}
            assert (await agent.get_state_as(PConv)).at == 2
            assert (await agent.replace_state(Reply("x"))) == {"text": "x", "tokens": 0}

    asyncio.run(main())


def test_importing_the_package_does_not_import_pydantic(run_python: Callable[..., Any]) -> None:
    done = run_python(
        """
        import sys, agent_state
        agent = agent_state.Agent(":memory:")
        agent.set_state({"n": 1})
        print("pydantic" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# -- UUID, Enum, Decimal, paths --------------------------------------------------------------


def test_the_mapping_of_uuid_enum_decimal_and_paths(mem: Agent) -> None:
    values = {
        "uuid": SESSION,
        "enum": Status.BUSY,
        "enum_tuple": Level.HIGH,
        "enum_int": Level.LOW,
        "decimal": decimal.Decimal("0.10"),
        "decimal_exp": decimal.Decimal("1E+3"),
        "path": pathlib.PurePosixPath("/var/lib/agent"),
        "relative": pathlib.Path("data") / "conv.db",
    }
    mem.replace_state(values)
    assert mem.get_state_json() == (
        '{"uuid":"12345678-1234-5678-1234-567812345678","enum":"busy","enum_tuple":[2,"high"],'
        '"enum_int":1,"decimal":0.10,"decimal_exp":1e+3,"path":"/var/lib/agent","relative":"data/conv.db"}'
    )
    for value in values.values():  # encode_value writes the same
        assert encode_value(value) in mem.get_state_json()
    read = mem.get_state()
    # Read back: strings, the enum's value, numbers (a JSONFloat keeps the decimal's digits).
    assert read["uuid"] == str(SESSION) and uuid.UUID(read["uuid"]) == SESSION
    assert Status(read["enum"]) is Status.BUSY and Level(read["enum_int"]) is Level.LOW
    assert type(read["decimal"]) is JSONFloat and decimal.Decimal(read["decimal"].json) == decimal.Decimal("0.10")
    assert pathlib.PurePosixPath(read["path"]) == values["path"]


# -- the default encoder ---------------------------------------------------------------------


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents


def _money(value: Any) -> Any:
    if isinstance(value, Money):
        return {"cents": value.cents, "currency": "EUR"}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


@pytest.mark.any_backend
def test_the_default_encoder_stands_in_for_unknown_values(open_agent: Callable[..., Agent], db_path: Any) -> None:
    agent = open_agent(default=_money, initial_state={"price": Money(100)})
    assert agent.get_state() == {"price": {"cents": 100, "currency": "EUR"}}
    assert agent.set_state({"total": [Money(5)]}) == {
        "price": {"cents": 100, "currency": "EUR"},
        "total": [{"cents": 5, "currency": "EUR"}],
    }
    agent.replace_state({"price": Money(7)})
    assert agent.get_state_json() == '{"price":{"cents":7,"currency":"EUR"}}'
    # Known types keep their own mapping; the default is not asked about them.
    agent.replace_state({"id": SESSION})
    assert agent.get_state() == {"id": str(SESSION)}
    # It refuses by raising: a CodecError, nothing written, its exception the cause.
    with pytest.raises(CodecError, match=r"a value of type object cannot be stored \(default raised TypeError") as info:
        agent.set_state({"x": object()})
    assert isinstance(info.value.__cause__, TypeError)
    assert agent.get_state() == {"id": str(SESSION)}
    # The initial-state hook's answer is encoded with it too.
    hooked = open_agent(db_path.with_name("hooked.db"), default=_money, initial_state=lambda: {"price": Money(1)})
    assert hooked.get_state() == {"price": {"cents": 1, "currency": "EUR"}}


def test_a_default_returning_what_it_was_given_is_refused(open_agent: Callable[..., Agent]) -> None:
    agent = open_agent(default=lambda value: value)
    with pytest.raises(CodecError, match="returned the value it was given"):
        agent.set_state({"x": object()})
    with pytest.raises(CodecError, match="cannot be stored"):
        open_agent().set_state({"x": Money(1)})  # without a default: refused as before
    with pytest.raises(TypeError, match="default must be callable"):
        open_agent(default=5)


def test_encode_value_takes_a_default() -> None:
    assert encode_value({"m": Money(3)}, default=_money) == '{"m":{"cents":3,"currency":"EUR"}}'
    with pytest.raises(CodecError):
        encode_value({"m": Money(3)})


# -- generics at run time --------------------------------------------------------------------


def test_subscripted_classes_work_at_run_time(open_agent: Callable[..., Agent]) -> None:
    typed = Agent[ConvState](":memory:")
    try:
        assert isinstance(typed, Agent) and typed.set_state({"status": "x", "at": 1}) == {"status": "x", "at": 1}
    finally:
        typed.close()
    alias: Any = Versioned[ConvState]
    assert alias({"status": "x", "at": 1}, 2) == Versioned({"status": "x", "at": 1}, 2)
