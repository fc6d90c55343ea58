"""The package's layout: no import cycle among its modules, and ``__all__`` is the public API
that the book's Python page (docs/src/getting-started/python.md) documents."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Dict, List, Set

import agent_state

PACKAGE_DIR = Path(agent_state.__file__).resolve().parent
# The book's Getting started page for Python names every public name (the README is short).
README = Path(__file__).resolve().parents[3] / "docs" / "src" / "getting-started" / "python.md"

#: The public API: what the book's Python page documents, and nothing else.
PUBLIC = {
    "Agent",
    "AsyncAgent",
    "OpenOptions",
    "ConnectionOptions",
    "AsyncHook",
    "ChangeFeed",
    "Hook",
    "Change",
    "Versioned",
    "LoggedChange",
    "AgentInfo",
    "list_agents",
    "delete_agent",
    "expire_agents",
    "list_agents_async",
    "delete_agent_async",
    "expire_agents_async",
    "StateChangedCallback",
    "ChangeCallback",
    "ValidatorCallback",
    "InitialStateCallback",
    "ChangeLogOption",
    "Synchronous",
    "library_version",
    "library_path",
    "encode_value",
    "decode",
    "BigInt",
    "JSONInt",
    "JSONFloat",
    "JSMap",
    "JSSet",
    "TypedArray",
    "RegExp",
    "Tagged",
    "watch",
    "Watch",
    "WatchEvent",
    "WatchKind",
} | set(agent_state.errors.__all__)  # the exceptions and the status constants (below, and test_surface.py)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, tree: ast.AST, modules: Set[str]) -> Set[str]:
    """The package modules that ``module`` imports when it runs, at any depth of its code
    (a function's import counts: it runs when the function does). Imports under ``if
    TYPE_CHECKING:`` are left out: they never run."""
    found: Set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:  # from . import name: a module, or a name of the package's __init__
                found.update(a.name if a.name in modules else "__init__" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "agent_state":
            parts = node.module.split(".")
            found.add(parts[1] if len(parts) > 1 else "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "agent_state":
                    found.add(parts[1] if len(parts) > 1 else "__init__")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


def import_graph() -> Dict[str, Set[str]]:
    sources = {p.stem: p for p in PACKAGE_DIR.glob("*.py")}
    modules = set(sources)
    return {name: _imports(name, ast.parse(path.read_text("utf-8")), modules) for name, path in sources.items()}


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or ``[]``."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def walk(node: str) -> List[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = walk(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = walk(node)
            if cycle:
                return cycle
    return []


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    tree = ast.parse("def f():\n    from .codec import x\nif TYPE_CHECKING:\n    from .agent import A\n")
    assert _imports("m", tree, {"codec", "agent"}) == {"codec"}


def test_no_import_cycle_among_the_modules() -> None:
    graph = import_graph()
    assert {"agent", "codec", "values", "_native"} <= set(graph)
    # Only the package's __init__ imports the modules for the public API; no module imports it.
    assert not [name for name, deps in graph.items() if "__init__" in deps]
    assert find_cycle(graph) == []


def test_all_is_the_documented_public_api() -> None:
    assert sorted(agent_state.__all__) == sorted(PUBLIC)
    assert len(agent_state.__all__) == len(set(agent_state.__all__))
    readme = README.read_text("utf-8")
    undocumented = [name for name in PUBLIC if not re.search(rf"`{re.escape(name)}\b", readme)]
    assert undocumented == []
    namespace: Dict[str, object] = {}
    exec("from agent_state import *", namespace)
    assert set(namespace) - {"__builtins__"} == PUBLIC
    for name in agent_state.__all__:
        assert getattr(agent_state, name) is namespace[name]


def test_errors_exports_the_exceptions_and_the_status_constants() -> None:
    for name in agent_state.errors.__all__:
        value = getattr(agent_state.errors, name)
        if name.startswith("AGENT_"):
            assert type(value) is int, name
        else:
            assert isinstance(value, type) and issubclass(value, agent_state.AgentError), name
    assert "AgentError" in agent_state.errors.__all__ and "BadHandleError" in agent_state.errors.__all__


def test_modules_export_only_public_names() -> None:
    # A module's __all__ names only what the package exports (private modules have none).
    for path in PACKAGE_DIR.glob("*.py"):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"agent_state.{path.stem}")
        exported = getattr(module, "__all__", None)
        if path.stem.startswith("_"):
            assert exported is None, path.stem
        elif exported is not None:
            assert set(exported) <= PUBLIC, (path.stem, set(exported) - PUBLIC)
            for name in exported:
                assert getattr(module, name) is getattr(agent_state, name)
