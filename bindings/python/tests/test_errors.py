"""Every exception type: the status mapping, and a real way to provoke each one."""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import agent_state
from agent_state import (
    Agent,
    AgentError,
    AuthError,
    CallCancelledError,
    BusyError,
    BadHandleError,
    CodecError,
    ConflictError,
    GapError,
    HookError,
    InvalidArgumentError,
    JSONError,
    PanicError,
    RejectedError,
    StateTooLargeError,
    StorageError,
    UnavailableError,
)
from agent_state.errors import error_for_status, status_name

ALL = {
    1: InvalidArgumentError,
    2: BadHandleError,
    3: JSONError,
    4: CodecError,
    5: StateTooLargeError,
    6: StorageError,
    7: BusyError,
    8: HookError,
    9: ConflictError,
    10: RejectedError,
    11: GapError,
    12: UnavailableError,
    13: AuthError,
    14: CallCancelledError,
    99: PanicError,
}


def test_status_mapping_and_names_match_the_library() -> None:
    lib = agent_state._native.library()
    for status, cls in ALL.items():
        err = error_for_status(status, "m")
        assert type(err) is cls and isinstance(err, AgentError)
        assert err.status == status == cls.default_status
        assert err.status_name == lib.agent_status_name(status).decode()
        assert status_name(status) == err.status_name
        assert str(err) == f"m [{err.status_name}]"
    unknown = error_for_status(42, "odd")
    assert type(unknown) is AgentError and unknown.status == 42
    assert unknown.status_name == "AGENT_ERR_UNKNOWN" == lib.agent_status_name(42).decode()
    assert issubclass(CodecError, ValueError) and issubclass(InvalidArgumentError, ValueError)


def test_closed_error_is_a_deprecated_alias_of_bad_handle_error() -> None:
    # BadHandleError is the name, as the C status's and the other bindings' (ErrBadHandle,
    # Status::bad_handle); ClosedError, its earlier name, is the same class, with a warning.
    assert BadHandleError.__name__ == "BadHandleError"
    assert "ClosedError" not in agent_state.__all__ and "ClosedError" not in agent_state.errors.__all__
    with pytest.warns(DeprecationWarning, match="ClosedError is deprecated: use BadHandleError") as seen:
        assert agent_state.ClosedError is BadHandleError
    assert seen[0].filename == __file__  # points at the code that used the name
    with pytest.warns(DeprecationWarning):
        from agent_state import ClosedError
    assert ClosedError is BadHandleError
    with pytest.warns(DeprecationWarning):
        assert agent_state.errors.ClosedError is BadHandleError
    with pytest.raises(AttributeError, match="ClosedErrors"):
        agent_state.ClosedErrors  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        agent_state.errors.Nope  # type: ignore[attr-defined]


def test_errcheck_reads_the_message_of_the_failing_call() -> None:
    lib = agent_state._native.library()
    with pytest.raises(BadHandleError) as e:
        lib.agent_close(12345)
    assert e.value.message.startswith("agent_close: ")
    with pytest.raises(InvalidArgumentError) as e:
        lib.agent_buffer_copy(None, 3, agent_state._native.AgentBuffer())
    assert e.value.message.startswith("agent_buffer_copy: ")


def test_invalid_argument(tmp_path: Path, mem: Agent) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        Agent(tmp_path / "a.db", synchronous="sometimes")
    assert e.value.message.startswith("agent_open: ") and "synchronous" in e.value.message
    with pytest.raises(InvalidArgumentError):
        Agent(tmp_path / "b.db", max_value_bytes=1)
    with pytest.raises(InvalidArgumentError):
        mem.set_state({1: "not an object"})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgumentError):
        mem.replace_state(agent_state.JSMap({"a": 1}))
    with pytest.raises(InvalidArgumentError) as e:
        mem.set_state_json("[1]")  # the library's own check
    assert e.value.message.startswith("agent_set_state: ")
    with pytest.raises(TypeError):
        mem.set_state(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        mem.set_state([("a", 1)])  # type: ignore[arg-type]
    assert mem.get_state() == {}


def test_closed(mem: Agent) -> None:
    mem.close()
    with pytest.raises(BadHandleError):
        mem.get_state()


def test_json_error(mem: Agent) -> None:
    with pytest.raises(JSONError) as e:
        mem.set_state_json("{")
    assert e.value.status == 3 and e.value.message.startswith("agent_set_state: ")
    with pytest.raises(JSONError):
        mem.set_state_json('{"a":"\ud800"}')  # lone surrogate, passed through as bad UTF-8
    with pytest.raises(JSONError):
        mem.replace_state_json(b'{"a":"\xff"}')
    assert mem.get_state() == {}


class _Opaque:
    pass


def _cyclic_list() -> list:
    x: list = []
    x.append(x)
    return x


def _cyclic_dict() -> dict:
    x: dict = {}
    x["self"] = {"up": x}
    return x


UNENCODABLE = [
    lambda: None,
    len,
    _Opaque(),
    object(),
    _cyclic_list(),
    _cyclic_dict(),
    math.nan,
    math.inf,
    -math.inf,
    dt.datetime(2026, 1, 1),  # naive
    dt.date(2026, 1, 1),
    dt.time(12, 0),
    {"$date": "2026-11-30T03:06:44.123Z"},  # tag-shaped dict: ambiguous
    {"$set": [1]},
    {"$bigint": "x"},
    "lone \ud800 surrogate",
    {"k\udfff": 1},
    range(3),
    iter([1]),
    complex(1, 2),
    __import__("re").compile(b"bytes"),
    __import__("re").compile("x", __import__("re").VERBOSE),
    __import__("array").array("u", "ab"),
]


@pytest.mark.parametrize("value", UNENCODABLE, ids=lambda v: type(v).__name__)
def test_codec_error_before_any_call_into_c(mem: Agent, monkeypatch, value) -> None:
    calls = []

    @mem.on_state_changed
    def hook(n, p, d):
        calls.append(n)

    mem.set_state({"keep": 1})
    calls.clear()

    def no_library():
        raise AssertionError("the library was called")

    monkeypatch.setattr(agent_state._native, "library", no_library)
    for call in (
        lambda: mem.set_state({"v": value}),
        lambda: mem.replace_state({"v": value}),
        lambda: mem.set_state({"deep": {"er": [value]}}),
        lambda: mem.set_state({"deep": _nested(70)}),  # nesting beyond 64 levels
    ):
        with pytest.raises(CodecError) as e:
            call()
        assert e.value.status == agent_state.AGENT_ERR_CODEC
    monkeypatch.undo()
    assert mem.get_state() == {"keep": 1}
    assert calls == []


def test_codec_error_messages_name_the_place(mem: Agent) -> None:
    with pytest.raises(CodecError) as e:
        mem.set_state({"a": {"b": [1, object()]}})
    assert e.value.message.endswith("at /a/b/1")
    with pytest.raises(CodecError, match="circular"):
        mem.set_state({"a": _cyclic_list()})
    with pytest.raises(CodecError, match="naive"):
        mem.set_state({"d": dt.datetime(2026, 1, 1)})
    with pytest.raises(CodecError, match="out of range in UTC"):
        mem.set_state({"d": dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(-dt.timedelta(hours=2)))})


def test_codec_error_from_the_library(mem: Agent) -> None:
    mem.set_state({"keep": 1})
    cases = [
        {"d": agent_state.Tagged("$date", "2026-11-30T03:06:44Z")},
        {"d": agent_state.Tagged("$date", "2026-11-30T03:06:44.1234Z")},  # 3, 6 or 9 digits only
        {"b": agent_state.Tagged("$bigint", "01")},
        {"n": agent_state.JSONInt("1" + "0" * 400)},  # beyond the range of a double
    ]
    for patch in cases:
        with pytest.raises(CodecError) as e:
            mem.set_state(patch)
        assert e.value.message.startswith("agent_set_state: codec error")
    with pytest.raises(CodecError):
        mem.set_state_json('{"a":1,"a":2}')  # duplicate member names
    assert mem.get_state() == {"keep": 1}


def _nested(depth: int) -> list:
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


def test_state_too_large(open_agent) -> None:
    a = open_agent(max_value_bytes=64)
    a.set_state({"small": 1})
    with pytest.raises(StateTooLargeError) as e:
        a.set_state({"big": "x" * 100})
    assert e.value.status == 5 and "max_value_bytes" in e.value.message
    # The input is small but the merged state would be too large.
    a.set_state({"s1": "y" * 20})
    with pytest.raises(StateTooLargeError):
        a.set_state({"s2": "z" * 30})
    assert a.get_state() == {"small": 1, "s1": "y" * 20}


def test_storage_error(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"this is not an sqlite database" * 100)
    with pytest.raises(StorageError) as e:
        Agent(foreign)
    assert e.value.status == 6
    assert foreign.read_bytes() == b"this is not an sqlite database" * 100
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("create table t(x)")
    with pytest.raises(StorageError, match="not an agent store"):
        Agent(other)
    with pytest.raises(StorageError):
        Agent(tmp_path)  # a directory


_CORRUPT = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("UPDATE agent_state SET value = ? WHERE agent = ''", (b'{"a":',))
conn.commit()
conn.close()
"""


def test_storage_error_for_a_corrupt_stored_state(open_agent, db_path: Path) -> None:
    open_agent().set_state({"a": 1})
    # Another process (see test_busy_error_when_another_process_holds_the_lock for why).
    subprocess.run([sys.executable, "-c", _CORRUPT, str(db_path)], check=True, timeout=60)
    a = open_agent()
    with pytest.raises(StorageError, match="corrupt"):
        a.get_state()
    with pytest.raises(StorageError):
        a.set_state({"b": 1})


def test_replace_state_repairs_a_corrupt_stored_state(open_agent, db_path: Path) -> None:
    open_agent().set_state({"a": 1})
    subprocess.run([sys.executable, "-c", _CORRUPT, str(db_path)], check=True, timeout=60)
    a = open_agent()
    assert a.replace_state({"fresh": True}) == {"fresh": True}
    assert a.get_state() == {"fresh": True}


_HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def test_busy_error_when_another_process_holds_the_lock(open_agent, db_path: Path) -> None:
    # Another *process*: a second SQLite library in this process (Python's sqlite3 module)
    # would not see the library's POSIX locks, which are per process.
    a = open_agent(busy_timeout_ms=0)
    a.set_state({"x": 1})
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(BusyError) as e:
            a.set_state({"x": 2})
        assert e.value.status == 7 and e.value.message.startswith("agent_set_state: busy")
        assert a.get_state() == {"x": 1}  # WAL: readers are not blocked
    finally:
        holder.communicate("\n", timeout=30)
    assert a.set_state({"x": 3}) == {"x": 3}


def test_busy_error_inside_own_initial_state_hook(mem: Agent) -> None:
    inner = []

    def initial():
        try:
            mem.get_state()
        except BusyError as e:
            inner.append(e)
            raise
        return {}

    mem.set_initial_state_hook(initial)
    with pytest.raises(HookError) as e:
        mem.get_state()
    assert isinstance(e.value.__cause__, BusyError)
    assert e.value.exceptions == inner
    assert inner[0].message.startswith("agent_get_state: busy")


def test_hook_error(mem: Agent) -> None:
    @mem.on_state_changed
    def fail(n, p, d):
        raise ValueError("from the hook")

    with pytest.raises(HookError) as e:
        mem.set_state({"committed": True})
    assert e.value.status == 8
    assert isinstance(e.value.__cause__, ValueError)
    assert str(e.value.__cause__) == "from the hook"
    assert e.value.message.startswith("agent_set_state: hook failed")
    assert mem.get_state() == {"committed": True}


def test_panic_error_mapping() -> None:
    err = error_for_status(99, "agent_x: internal error")
    assert isinstance(err, PanicError) and err.status_name == "AGENT_ERR_PANIC"


def test_library_not_found_is_a_clear_error(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_STATE_LIBRARY", str(tmp_path / "missing.so"))
    assert agent_state.library_path() == str(tmp_path / "missing.so")
