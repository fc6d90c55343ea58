"""The cross-language conformance vectors (tests/conformance/README.md) through the Python
binding: tests/conformance/vectors/*.json, which the C, C++ and Go runners run too, and
tests/conformance/binding_values.json, which Go runs too.

Inputs given as JSON go through the binding's value API (decoded with agent_state.decode into
dicts first), text inputs through the *_json calls. Results are compared by their canonical
JSON text: the library's text for the *_json calls, agent_state.encode_value of what the value
API returned otherwise (so a round trip through Python values must give the library's text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from agent_state import Agent, Change, encode_value

from conformance_support import (
    BINDING_VALUES,
    VECTOR_DIR,
    build,
    canonical,
    expected,
    has_member,
    native_input,
    native_mismatch,
    options,
    skip_reason,
    status_of,
    store_location,
    vectors,
)

ALL = list(vectors(*sorted(VECTOR_DIR.glob("*.json")), BINDING_VALUES))


def _params() -> List[Any]:
    params = []
    for name, v in ALL:
        why = skip_reason(v)
        params.append(pytest.param(v, id=name, marks=() if why is None else pytest.mark.skip(reason=why)))
    return params


class Mismatch(AssertionError):
    pass


def _same(what: str, want: Optional[str], got: str) -> None:
    if want is not None and want != got:
        raise Mismatch(f"{what}: got {got[:400]}, want {want[:400]}")


def _text(value: Any) -> str:
    """The canonical text of a result: the library's own text, or the encoding of a value."""
    return value if isinstance(value, str) else encode_value(value)


class VectorRun:
    def __init__(self, vector: Dict[str, Any], location: Tuple[str, Dict[str, Any]]) -> None:
        self.vector = vector
        # the store: a path, and the options that name it on a server (agent_id) added to every
        # open's (the same for every handle of the vector)
        self.path, self.store_options = location
        self.agent: Optional[Agent] = None
        self.events: List[Tuple[str, str, str, int]] = []

    def open(self, vector_options: Dict[str, Any]) -> None:
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        agent = Agent(self.path, **options(vector_options), **self.store_options)
        self.agent = agent
        fail_when = self.vector.get("hook_fails_when")
        reject_when = self.vector.get("validator_rejects")
        if self.vector.get("hooks") or fail_when:

            @agent.on_change
            def record(c: Change) -> None:
                patch = "null" if c.patch is None else encode_value(c.patch)
                self.events.append((encode_value(c.next), encode_value(c.prev), patch, c.version))
                if fail_when and has_member(c.next, fail_when):
                    raise RuntimeError(f"the hook fails on the member {fail_when}")

        if reject_when:

            @agent.set_validator
            def gate(c: Change) -> None:
                if has_member(c.next, reject_when):
                    raise ValueError(f"the state may not have the member {reject_when}")

    def run(self) -> None:
        try:
            status, message = "AGENT_OK", ""
            try:
                self.open(self.vector.get("open", {}))
            except Exception as e:
                status, message = status_of(e), str(e)
            self.check_status("open", self.vector.get("open_status", "AGENT_OK"), self.vector.get("open_message"), status, message)
            if "open_status" in self.vector:
                return
            for k, op in enumerate(self.vector.get("ops", [])):
                try:
                    self.run_op(op)
                except Mismatch as e:
                    raise Mismatch(f"op {k + 1} ({op['op']}): {e}") from None
        finally:
            if self.agent is not None:
                self.agent.close()

    @staticmethod
    def check_status(what: str, want: str, part: Optional[str], got: str, message: str) -> None:
        if got != want:
            raise Mismatch(f"{what}: got {got} ({message}), want {want}")
        if got != "AGENT_OK" and part and part not in message:
            raise Mismatch(f"{what}: message {message!r} does not contain {part!r}")

    def run_op(self, op: Dict[str, Any]) -> None:
        kind = op["op"]
        if kind == "events":
            self.check_events(op["events"])
            return
        status, message = "AGENT_OK", ""
        result: Any = None
        version: Optional[int] = None
        try:
            result, version = self.call(kind, op)
        except Mismatch:
            raise
        except Exception as e:
            status, message = status_of(e), str(e)
        self.check_status(kind, op.get("status", "AGENT_OK"), op.get("message"), status, message)
        if status == "AGENT_OK":
            self.check_result(kind, op, result)
        if "version" in op:
            assert self.agent is not None
            now = version if version is not None else self.agent.get_state_versioned().version
            if now != int(op["version"]):
                raise Mismatch(f"version {now}, want {op['version']}")

    def call(self, kind: str, op: Dict[str, Any]) -> Tuple[Any, Optional[int]]:
        agent = self.agent
        assert agent is not None
        if kind == "reopen":
            self.open(op.get("open", self.vector.get("open", {})))
            return None, None
        if kind == "get":
            state, version = agent.get_state_versioned()
            _same("the library's text", expected(op, "expect"), agent.get_state_json())
            return state, version
        if kind in ("encode", "map_get", "map_set", "map_delete", "set_has"):
            return self.value_op(kind, op), None
        if kind in ("patch", "patch_if"):
            # A JSON Patch goes in as its text: a vector may give what is not a list (which the
            # value form refuses with a TypeError before the library sees it).
            text = canonical(op["input"]).encode() if "input" in op else native_input(op)[1]
            if kind == "patch":
                return agent.patch_state_json(text), None
            state, version = agent.patch_state_if_json(int(op["if_version"]), text)
            return state, version
        native, value = native_input(op)
        if kind in ("set", "replace"):
            if not native:
                return (agent.set_state_json if kind == "set" else agent.replace_state_json)(value), None
            return (agent.set_state if kind == "set" else agent.replace_state)(value), None
        if kind in ("set_if", "replace_if"):
            if not native:
                raise Mismatch("the Python binding has no raw-JSON compare-and-set")
            write = agent.set_state_if if kind == "set_if" else agent.replace_state_if
            state, version = write(int(op["if_version"]), value)
            return state, version
        raise Mismatch(f"unknown op {kind}")

    def value_op(self, kind: str, op: Dict[str, Any]) -> Any:
        """The binding-values ops without a store: encode, and the JSMap/JSSet lookups."""
        if kind == "encode":
            return encode_value(build(op["value"]))
        if kind == "set_has":
            found = build(op["value"]) in build(op["set"])
            if found != op["found"]:
                raise Mismatch(f"found {found}, want {op['found']}")
            return None
        m = build(op["map"])
        key = build(op["key"])
        if kind == "map_set":
            m[key] = build(op["value"])
            return m
        found = key in m
        if found != op.get("found", found):
            raise Mismatch(f"found {found}, want {op['found']}")
        if kind == "map_delete":
            if found:
                del m[key]
            return m
        return m[key] if found else None

    def check_result(self, kind: str, op: Dict[str, Any], result: Any) -> None:
        if "native" in op:
            # The value read, in Python's terms: compared natively instead of re-encoded, as a
            # read that truncates (nanoseconds into a datetime) cannot give the stored text back.
            if kind != "get" or "python" not in op["native"]:
                raise Mismatch('"native" is for a get op, with a "python" description')
            found = native_mismatch(result, build(op["native"]["python"]))
            if found:
                raise Mismatch(f"native result: {found}")
            return
        if kind in ("reopen", "set_has") or (kind in ("map_get", "map_delete") and not op["found"] and "expect" not in op):
            return
        _same("result", expected(op, "expect"), _text(result) if kind != "map_get" else encode_value(result))

    def check_events(self, want: List[Dict[str, Any]]) -> None:
        if len(want) != len(self.events):
            raise Mismatch(f"{len(self.events)} deliveries, want {len(want)}")
        for k, (w, (n, p, patch, version)) in enumerate(zip(want, self.events)):
            _same(f"delivery {k + 1} next", expected(w, "next"), n)
            _same(f"delivery {k + 1} prev", expected(w, "prev"), p)
            _same(f"delivery {k + 1} patch", expected(w, "patch"), patch)
            if version != int(w["version"]):
                raise Mismatch(f"delivery {k + 1} version {version}, want {w['version']}")
        self.events.clear()


@pytest.mark.any_backend  # store_location puts the store on the run's backend
@pytest.mark.parametrize("vector", _params())
def test_conformance(vector: Dict[str, Any], tmp_path: Path) -> None:
    VectorRun(vector, store_location(tmp_path)).run()


def test_every_vector_file_is_read() -> None:
    # The runner cannot pass by reading nothing: five vector files and the binding values.
    files = {p.name for p in VECTOR_DIR.glob("*.json")}
    assert {"cas.json", "codec.json", "errors.json", "hooks.json", "merge.json"} <= files, files
    assert len(ALL) >= 100 and all(canonical(v["name"]) for _, v in ALL)
