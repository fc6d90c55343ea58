"""Reading the cross-language conformance vectors (tests/conformance/README.md) for the Python
runner: the vector files, the canonical text of their JSON values, native Python values built
from a description, and where each vector's store lives."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import agent_state
import backends
from agent_state import BigInt, JSMap, JSONFloat, JSONInt, JSSet, RegExp, TypedArray
from agent_state.errors import status_name

ROOT = Path(__file__).resolve().parents[3]
VECTOR_DIR = ROOT / "tests" / "conformance" / "vectors"
BINDING_VALUES = ROOT / "tests" / "conformance" / "binding_values.json"

_encode_str = json.encoder.encode_basestring  # the library's string escaping


class Num(str):
    """A number of a vector file, kept as the exact text it was written with."""


def load(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"), parse_int=Num, parse_float=Num)


def vectors(*paths: Path) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """(id, vector) of every vector of the files, in file order."""
    for path in paths:
        for vector in load(path)["vectors"]:
            yield f"{path.stem}: {vector['name']}", vector


def runs_here(vector: Dict[str, Any]) -> bool:
    return "runners" not in vector or "python" in vector["runners"]


def skip_reason(vector: Dict[str, Any]) -> Optional[str]:
    """Why this run skips the vector (another runner's, or another backend's), or None."""
    if not runs_here(vector):
        return str(vector.get("runners_why", "for other runners"))
    if not backends.runs_on_backend(vector):
        return f"not on {backends.BACKEND}: {vector.get('backends_why', '')}"
    return None


def canonical(value: Any) -> str:
    """A vector's JSON value as compact text: members in order, numbers as written, strings
    escaped as the library escapes them."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, Num):
        return str(value)
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, dict):
        return "{" + ",".join(_encode_str(k) + ":" + canonical(v) for k, v in value.items()) + "}"
    return "[" + ",".join(canonical(v) for v in value) + "]"


def text_form(value: Any) -> str:
    """A text form: a string, or pieces (strings and [string, count] pairs) concatenated."""
    if isinstance(value, str):
        return value
    return "".join(p if isinstance(p, str) else p[0] * int(p[1]) for p in value)


def expected(obj: Dict[str, Any], field: str) -> Any:
    """The expected text of ``field`` (a JSON value) or ``field``_text; None when neither."""
    if field in obj:
        return canonical(obj[field])
    if field + "_text" in obj:
        return text_form(obj[field + "_text"])
    return None


def native_input(op: Dict[str, Any]) -> Tuple[bool, Any]:
    """(True, a native value) for an op with a JSON "input" (decoded with the binding's own
    decoder) or a "value" description; (False, raw text or bytes) for "input_text"/"input_hex"."""
    if "input" in op:
        return True, agent_state.decode(canonical(op["input"]))
    if "value" in op:
        return True, build(op["value"])
    if "input_hex" in op:
        return False, bytes.fromhex(op["input_hex"])
    return False, text_form(op["input_text"])


def options(vector_options: Dict[str, Any]) -> Dict[str, Any]:
    """The open options as Agent keyword arguments, each decoded by the binding."""
    return {key: agent_state.decode(canonical(value)) for key, value in vector_options.items()}


def build(desc: Dict[str, Any]) -> Any:
    """The native Python value a binding-values description stands for (see the README)."""
    ((kind, arg),) = desc.items()
    if kind == "null":
        return None
    if kind in ("bool", "string"):
        return arg
    if kind == "int":
        return int(arg)
    if kind == "float":
        return float(arg)
    if kind == "number":  # a number with an exact text
        return JSONFloat(arg) if any(c in arg for c in ".eE") else JSONInt(arg)
    if kind == "array":
        return [build(d) for d in arg]
    if kind == "object":
        return {key: build(d) for key, d in arg}
    if kind == "map":
        return JSMap([(build(k), build(v)) for k, v in arg])
    if kind == "set":
        return JSSet([build(d) for d in arg])
    if kind == "date":
        return _date(arg)
    if kind == "bytes":
        return base64.b64decode(arg)
    if kind == "bigint":
        return BigInt(int(arg))
    if kind == "typedarray":
        return TypedArray(arg["type"], base64.b64decode(arg["base64"]))
    if kind == "regexp":
        return RegExp(arg["source"], arg["flags"])
    if kind == "nest":  # depth objects {"a": ...} around the leaf
        value = build(arg["leaf"])
        for _ in range(int(arg["depth"])):
            value = {"a": value}
        return value
    if kind == "in_arrays":  # count arrays around the leaf
        value = build(arg["leaf"])
        for _ in range(int(arg["count"])):
            value = [value]
        return value
    raise ValueError(f"unknown value description {kind!r}")


def _date(text: str) -> dt.datetime:
    """A date description: RFC 3339 in UTC with 3, 6 or 9 fraction digits. A datetime holds
    microseconds, so nonzero digits beyond the sixth are an error here (vectors give those to
    Go only) rather than truncated by the runner, which would take the place of the binding's
    own reading rule under test."""
    head, dot, fraction = text.partition(".")
    if not dot or not fraction.endswith("Z") or len(fraction) - 1 not in (3, 6, 9):
        raise ValueError(f"date description {text!r}: not YYYY-MM-DDTHH:MM:SS.fZ with 3, 6 or 9 digits")
    digits = fraction[:-1]
    if digits[6:].strip("0"):
        raise ValueError(f"date description {text!r}: a datetime cannot hold nanoseconds")
    micro = int(digits[:6].ljust(6, "0"))
    return dt.datetime.fromisoformat(head).replace(microsecond=micro, tzinfo=dt.timezone.utc)


def native_mismatch(got: Any, want: Any, where: str = "") -> Optional[str]:
    """Where a value read differs from the native value expected (None when it does not): by
    type and ==, recursively; a datetime must also be in UTC (timezone.utc, as the binding
    reads one)."""
    if type(got) is not type(want):
        return f"{where or 'the value'}: {got!r} is a {type(got).__name__}, want {want!r}"
    if isinstance(want, dict):
        if sorted(got) != sorted(want):
            return f"{where or 'the value'}: members {sorted(got)}, want {sorted(want)}"
        for key in want:
            found = native_mismatch(got[key], want[key], f"{where}/{key}")
            if found:
                return found
        return None
    if isinstance(want, list):
        if len(got) != len(want):
            return f"{where or 'the value'}: {len(got)} items, want {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            found = native_mismatch(g, w, f"{where}/{k}")
            if found:
                return found
        return None
    if isinstance(want, dt.datetime) and got.tzinfo is not dt.timezone.utc:
        return f"{where or 'the value'}: {got!r} is not in timezone.utc"
    if got != want:
        return f"{where or 'the value'}: got {got!r}, want {want!r}"
    return None


def status_of(exc: BaseException) -> str:
    """The status name a failure stands for. Python raises TypeError where a value of the wrong
    Python type is given (a list as a state), before the library sees it: the vectors' status
    for it is AGENT_ERR_INVALID_ARGUMENT."""
    if isinstance(exc, agent_state.AgentError):
        return status_name(exc.status)
    if isinstance(exc, TypeError):
        return "AGENT_ERR_INVALID_ARGUMENT"
    raise exc


def store_location(tmp_path: Path) -> Tuple[str, Dict[str, Any]]:
    """Where a vector's store lives (backends.py): a fresh SQLite file in the test's temporary
    directory and no extra options, or the PostgreSQL server and a fresh ``agent_id``, which
    every open of the vector adds to its options."""
    if backends.POSTGRES:
        return backends.server_store()
    return str(tmp_path / "store.db"), {}


def has_member(state: Any, name: str) -> bool:
    return isinstance(state, dict) and name in state


__all__: List[str] = [
    "VECTOR_DIR",
    "BINDING_VALUES",
    "vectors",
    "runs_here",
    "skip_reason",
    "canonical",
    "expected",
    "native_input",
    "options",
    "build",
    "native_mismatch",
    "status_of",
    "store_location",
    "has_member",
]
