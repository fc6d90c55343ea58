"""The Python side of the cross-language test (tests/cross-language/run.sh calls it, with the
interpreter of target/pyvenv, where bindings/python/venv.sh installs the package):

  cross.py write STORE OUT   writes the agents "python" (canonical(), the same logical value as
                             values.js's) and "python-extra", and OUT/python.json (encode_value)
  cross.py read STORE        reads every agent and checks the Python type and value of each
                             member (decoding.py's types: datetime, BigInt, bytes, JSMap,
                             JSSet, array.array, TypedArray, re.Pattern, RegExp, JSONInt)
  cross.py bytes STORE OUT   checks that the agents "node", "python", "go" and "rust" hold the
                             same bytes, read from the SQLite file itself (sqlite3) and through
                             the library, and that those are the bytes each language's encoder
                             wrote (OUT/node.json, OUT/python.json, OUT/go.json, OUT/rust.json)
"""

from __future__ import annotations

import array
import datetime as dt
import os
import re
import sqlite3
import sys
from typing import Any, Callable, Dict, List

State = Dict[str, Any]

import agent_state
from agent_state import BigInt, JSMap, JSONInt, JSSet, RegExp, TypedArray, encode_value
from agent_state.values import ARRAY_TYPECODES

UTC = dt.timezone.utc


def date(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
         us: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


def typed(name: str, values: List[Any]) -> "array.array[Any]":
    return array.array(ARRAY_TYPECODES[name], values)


def canonical() -> State:
    """values.js's canonical(), in Python's types (members in the same order)."""
    return {
        "arrays": [1, "two", None, True, [3, [4]], {"five": 5}],
        # A plain int beyond 2**53 - 1 is written as a $bigint; BigInt forces it for small ones.
        "bigints": {
            "beyondSafe": 2**53 + 1,
            "huge": 2**200,
            "negHuge": -(3**100),
            "small": BigInt(7),
            "zero": BigInt(0),
        },
        "bytes": {"buffer": bytes([0, 1, 2, 127, 128, 255]), "empty": b""},
        "dates": {
            "epoch": date(1970, 1, 1),
            "far": date(9999, 12, 31, 23, 59, 59, us=999000),
            "millis": date(2026, 11, 30, 3, 6, 44, us=123000),
            "old": date(1969, 7, 20, 20, 17, 40),
        },
        "maps": {
            "empty": JSMap(),
            "numberKeys": JSMap([(1, "one"), (2.5, "two and a half"), (-3, "minus three")]),
            "objectKeys": JSMap([({"id": 1}, "first"), ([1, 2], "pair"), (None, "nothing"), (True, "yes")]),
            "stringKeys": JSMap([("a", 1), ("b", {"c": [1, 2]})]),
        },
        "nested": {
            "deep": {"deeper": {"set": JSSet([date(2026, 1, 2, 3, 4, 5, us=6000), typed("Uint8Array", [1, 2])])}},
            "list": [JSMap([("k", JSSet([BigInt(1)]))]), {"re": RegExp("x", "g"), "when": date(1970, 1, 1)}],
        },
        "numbers": {"float": 1.5, "int": 42, "maxSafe": 2**53 - 1, "negative": -7, "small": 0.001},
        "regexps": {
            "dotAll": re.compile("a.b", re.S),
            "global": RegExp("a+b", "gi"),
            "multiline": re.compile("^line$", re.M),
            "plain": re.compile("^x$"),
            "sticky": RegExp(r"\d+", "y"),
            "unicode": RegExp(r"\p{L}+", "u"),
        },
        "sets": {
            "empty": JSSet(),
            "mixed": JSSet([1, "1", [1], {"a": 1}, None, BigInt(2)]),
            "numbers": JSSet([3, 1, 2]),
            "strings": JSSet(["b", "a"]),
        },
        "strings": {
            "ascii": "hello",
            "escapes": 'quote " backslash \\ newline \n tab \t',
            "unicode": "h\u00e9llo w\u00f6rld \u2713 \U0001F600",
        },
        "tagLike": {"$date": "not a date", "note": "two members: plain data, not a tagged value"},
        "typed": {
            "BigInt64Array": typed("BigInt64Array", [-(2**63), 2**63 - 1]),
            "BigUint64Array": typed("BigUint64Array", [0, 2**64 - 1]),
            "DataView": TypedArray("DataView", bytes([1, 2, 3, 4])),
            "Float32Array": typed("Float32Array", [1.5, -0.25, float("inf")]),
            "Float64Array": typed("Float64Array", [0.1, -1e300, -0.0, float("-inf")]),
            "Int16Array": typed("Int16Array", [-32768, 0, 32767]),
            "Int32Array": typed("Int32Array", [-2147483648, 2147483647]),
            "Int8Array": typed("Int8Array", [-128, -1, 0, 127]),
            "Uint16Array": typed("Uint16Array", [0, 65535]),
            "Uint32Array": typed("Uint32Array", [0, 4294967295]),
            "Uint8Array": typed("Uint8Array", [0, 1, 255]),
            "Uint8ClampedArray": TypedArray.from_values("Uint8ClampedArray", [0, 128, 255]),
            "empty": typed("Float64Array", []),
        },
    }


def canonical_read() -> State:
    """What get_state() gives for the canonical state: the same, but every $bigint a BigInt."""
    state = canonical()
    state["bigints"] = {k: BigInt(v) for k, v in state["bigints"].items()}
    return state


def python_extra() -> State:
    return {
        "float16": TypedArray.from_values("Float16Array", [1.0, -2.0]),
        "micros": date(2026, 11, 30, 3, 6, 44, us=123456),
        "tupleList": (1, 2, 3),
    }


EXPECTED: Dict[str, Callable[[], State]] = {
    "node": canonical_read,
    "python": canonical_read,
    "go": canonical_read,
    "rust": canonical_read,
    "node-rules": lambda: {
        # 2 ** 60 as JavaScript writes it: the digits beyond 2 ** 53 are gone.
        "beyondSafe": JSONInt("1152921504606847000"),
        "buffer": typed("Uint8Array", [1, 2, 3]),
        "negZero": 0,
        "view": typed("Uint16Array", [1, 2]),
        "window": TypedArray("DataView", bytes([1, 0, 2, 0])),
    },
    "python-extra": lambda: {
        "float16": TypedArray("Float16Array", bytes([0x00, 0x3C, 0x00, 0xC0])),
        "micros": date(2026, 11, 30, 3, 6, 44, us=123456),
        "tupleList": [1, 2, 3],
    },
    "go-extra": lambda: {
        "float16": TypedArray("Float16Array", bytes([0x00, 0x3C, 0x00, 0xC0])),
        "nanos": date(2026, 11, 30, 3, 6, 44, us=123456),  # .123456789Z, truncated
        "struct": {"at": date(2026, 11, 30), "name": "ada", "tags": ["x", "y"]},
    },
}


def same(got: Any, want: Any, path: str, problems: List[str]) -> None:
    """Strict comparison: the same Python type (exactly) and the same value, recursively."""
    where = path or "/"
    if type(got) is not type(want):
        problems.append(f"{where}: got {type(got).__name__} {got!r}, want {type(want).__name__} {want!r}")
        return
    if isinstance(want, dict):
        if list(got) != list(want):
            problems.append(f"{where}: members {list(got)}, want {list(want)}")
            return
        for k in want:
            same(got[k], want[k], f"{path}/{k}", problems)
    elif isinstance(want, list):
        if len(got) != len(want):
            problems.append(f"{where}: {len(got)} items, want {len(want)}")
            return
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{path}/{i}", problems)
    elif isinstance(want, JSMap):
        gp, wp = got.pairs(), want.pairs()
        if len(gp) != len(wp):
            problems.append(f"{where}: {len(gp)} entries, want {len(wp)}")
            return
        for i, ((gk, gv), (wk, wv)) in enumerate(zip(gp, wp)):
            same(gk, wk, f"{path}/<key {i}>", problems)
            same(gv, wv, f"{path}/<value {i}>", problems)
    elif isinstance(want, JSSet):
        same(list(got), list(want), f"{path}/<set>", problems)
    elif isinstance(want, array.array):
        if got.typecode != want.typecode or got.tobytes() != want.tobytes():
            problems.append(f"{where}: got {got!r}, want {want!r}")
    elif isinstance(want, re.Pattern):
        if got.pattern != want.pattern or got.flags != want.flags:
            problems.append(f"{where}: got {got!r}, want {want!r}")
    elif isinstance(want, dt.datetime):
        if got != want or got.utcoffset() != dt.timedelta(0):
            problems.append(f"{where}: got {got!r}, want {want!r}")
    elif isinstance(want, (JSONInt,)):
        if got.json != want.json:
            problems.append(f"{where}: got {got!r}, want {want!r}")
    elif isinstance(want, float):
        if repr(got) != repr(want):
            problems.append(f"{where}: got {got!r}, want {want!r}")
    elif got != want:  # int, BigInt, str, bool, None, bytes, TypedArray, RegExp
        problems.append(f"{where}: got {got!r}, want {want!r}")


def write(store: str, out: str) -> int:
    for agent_id, state in (("python", canonical()), ("python-extra", python_extra())):
        with agent_state.Agent(store, agent_id=agent_id) as agent:
            agent.replace_state(state)
    with open(os.path.join(out, "python.json"), "w", encoding="utf-8") as f:
        f.write(encode_value(canonical()))
    print("python: wrote the agents python, python-extra")
    return 0


def read(store: str) -> int:
    failed = 0
    for agent_id, expected in EXPECTED.items():
        with agent_state.Agent(store, agent_id=agent_id, read_only=True) as agent:
            state, version = agent.get_state_versioned()
        problems: List[str] = []
        if version == 0:
            problems.append("nothing stored")
        else:
            same(state, expected(), "", problems)
        if problems:
            failed += 1
            print(f"FAIL python read {agent_id}:")
            for p in problems:
                print(f"    {p}")
        else:
            print(f"ok   python read {agent_id}")
    # The Python rule: a plain int beyond 2**53 - 1 is written as a $bigint, so it keeps its
    # digits; JavaScript's number did not (node-rules above).
    return 1 if failed else 0


def first_difference(a: bytes, b: bytes) -> str:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    lo = max(0, i - 60)
    return f"at byte {i}:\n      {a[lo:i + 60]!r}\n      {b[lo:i + 60]!r}"


def stored_bytes(store: str) -> Dict[str, bytes]:
    """Each agent's state as the SQLite file holds it (crates/agent_state/src/backends/sqlite:
    the head row agent_state holds the version, the version of the last full copy (base) and,
    for a small state, that copy (value); a larger one's is the row of agent_base). Every agent
    here was last written by a replacement, which stores a full copy: base = version."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT s.agent, s.version, s.base, coalesce(s.value, b.value) FROM agent_state s "
            "LEFT JOIN agent_base b ON b.agent = s.agent"
        ).fetchall()
    finally:
        con.close()
    out = {}
    for agent, version, base, value in rows:
        if version != base or value is None:
            raise SystemExit(f"agent {agent}: version {version}, full copy at {base}: expected a replacement's full copy")
        out[agent] = bytes(value) if not isinstance(value, str) else value.encode()
    return out


def compare_bytes(store: str, out: str) -> int:
    failed = 0
    stored = stored_bytes(store)
    reference = stored.get("node")
    if reference is None:
        print("FAIL bytes: the agent node is not stored")
        return 1
    for agent_id in ("node", "python", "go", "rust"):
        raw = stored.get(agent_id)
        with agent_state.Agent(store, agent_id=agent_id, read_only=True) as agent:
            through_library = agent.get_state_json().encode()
        checks = [
            (raw is not None, f"the agent {agent_id} is not stored"),
            (raw == through_library, f"agent {agent_id}: the file's bytes and the library's differ"
             + ("" if raw is None else " " + first_difference(raw, through_library))),
            (raw == reference, f"agent {agent_id} and agent node hold different bytes"
             + ("" if raw is None else " " + first_difference(raw, reference))),
        ]
        bad = [msg for ok, msg in checks if not ok]
        if bad:
            failed += 1
            for msg in bad:
                print(f"FAIL bytes: {msg}")
        else:
            print(f"ok   bytes of agent {agent_id} = agent node's ({len(reference)} bytes, file and library alike)")
    for lang in ("node", "python", "go", "rust"):
        with open(os.path.join(out, f"{lang}.json"), "rb") as f:
            encoded = f.read()
        if encoded != reference:
            failed += 1
            print(f"FAIL bytes: {lang}'s encoder wrote other bytes than the store holds {first_difference(encoded, reference)}")
        else:
            print(f"ok   bytes: {lang}'s encoder wrote exactly the stored bytes")
    return 1 if failed else 0


def main(argv: List[str]) -> int:
    if len(argv) >= 2 and argv[0] == "write" and len(argv) == 3:
        return write(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "read":
        return read(argv[1])
    if len(argv) == 3 and argv[0] == "bytes":
        return compare_bytes(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
