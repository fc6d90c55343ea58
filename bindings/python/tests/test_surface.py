"""The binding against the library's surface description (``include/agent_state_surface.json``,
generated from the core's own definitions of its open options and statuses): ``OpenOptions``
has exactly the surface's options (and its fixed defaults), ``errors.py`` exactly its statuses,
and the tables of the book's Python page (docs/src/getting-started/python.md) say the same.

The description is read from the checkout (``../../include/`` from this package's directory),
or from the file ``AGENT_STATE_SURFACE`` names (to try a changed one); outside a checkout the
tests are skipped."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional

import pytest

import agent_state
from agent_state import ConnectionOptions, OpenOptions, errors
from agent_state.options import Default

ROOT = Path(__file__).resolve().parents[3]
SURFACE = Path(os.environ.get("AGENT_STATE_SURFACE") or ROOT / "include" / "agent_state_surface.json")
# The book's Getting started page for Python holds the binding's tables (the README is short).
README = ROOT / "docs" / "src" / "getting-started" / "python.md"
CHECK_TABLES = ROOT / "tests" / "surface" / "check_tables.py"

#: The keys of OpenOptions that are the binding's own, not the library's options.
BINDING_ONLY = {"default"}


@pytest.fixture(scope="module")
def surface() -> Dict[str, Any]:
    if not SURFACE.is_file():
        pytest.skip(f"no surface description at {SURFACE} (not in a checkout of the repository)")
    loaded: Dict[str, Any] = json.loads(SURFACE.read_text("utf-8"))
    return loaded


def _default_of(options_type: Any, key: str) -> Optional[Default]:
    """The Default marker of ``key``'s Annotated type, or None."""
    assert key in options_type.__annotations__, f"{options_type.__name__} has no key {key!r}"
    markers = [m for m in getattr(options_type.__annotations__[key], "__metadata__", ()) if isinstance(m, Default)]
    assert len(markers) <= 1, key
    return markers[0] if markers else None


def test_open_options_are_the_surface_options(surface: Dict[str, Any]) -> None:
    want = [o["name"] for o in surface["options"]]
    have = [k for k in OpenOptions.__annotations__ if k not in BINDING_ONLY]
    missing = [name for name in want if name not in have]
    assert not missing, f"OpenOptions lacks the library's options {missing} (add them, with their Default)"
    unknown = [name for name in have if name not in want]
    assert not unknown, f"OpenOptions has {unknown}, which the library does not (or BINDING_ONLY lacks them)"
    assert len(have) == len(want)
    # The store functions' keys are some of them.
    assert set(ConnectionOptions.__annotations__) <= set(have)


def test_each_fixed_default_is_the_surface_default(surface: Dict[str, Any]) -> None:
    for option in surface["options"]:
        marker = _default_of(OpenOptions, option["name"])
        if option["default"] is None:
            assert marker is None, f"{option['name']} has no fixed default in the library, not {marker}"
            continue
        assert marker is not None, f"{option['name']}: say its default, Annotated[..., Default({option['default']!r})]"
        value = marker.value
        assert type(value) is type(option["default"]) and value == option["default"], (option["name"], value)
    for key in BINDING_ONLY:
        assert _default_of(OpenOptions, key) is None


def test_statuses_are_the_surface_statuses(surface: Dict[str, Any]) -> None:
    want = {s["name"]: s["code"] for s in surface["statuses"]}
    have = {name: value for name, value in vars(errors).items() if re.fullmatch(r"AGENT_(OK|ERR_[A-Z_]+)", name)}
    assert have == want
    for name, code in want.items():
        assert errors.status_name(code) == name
        assert getattr(agent_state, name) == code and name in agent_state.__all__
        if code:
            exc = errors.error_for_status(code, "m")
            assert type(exc) is not errors.AgentError, f"{name} has no exception class of its own"
            assert type(exc).default_status == code and exc.status_name == name
            assert type(exc).__name__ in agent_state.__all__


def _check_tables() -> ModuleType:
    if not CHECK_TABLES.is_file():
        pytest.skip(f"no {CHECK_TABLES} (not in a checkout of the repository)")
    spec = importlib.util.spec_from_file_location("check_tables", CHECK_TABLES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_tables_are_the_surface(surface: Dict[str, Any]) -> None:
    # tests/surface/check_tables.py's rules (the ones the main README is held to), against the
    # description this test reads.
    check = _check_tables()
    check.SURFACE = surface
    problems: List[str] = []
    kinds = []
    for line, header, rows in check.tables(README.read_text("utf-8")):
        key = [h.lower() for h in header[:2]]
        if key == ["key", "default"]:
            check.check_options(f"{README.name}:{line}", rows, problems)
            kinds.append("options")
        elif key == ["code", "name"]:
            check.check_statuses(f"{README.name}:{line}", rows, problems)
            # The exception column names the class of each status.
            for row in rows:
                code = int(check.unquote(row[0]))
                if code:
                    named = check.unquote(row[2]).split("`")[0]
                    assert named == type(errors.error_for_status(code, "m")).__name__, row
            kinds.append("statuses")
    assert problems == []
    assert sorted(kinds) == ["options", "statuses"]
