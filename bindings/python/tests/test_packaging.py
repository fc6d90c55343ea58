"""Packaging: the installed package finds its bundled library with no environment variable,
Python does not take that library for a module, AGENT_STATE_LIBRARY overrides it, the package
is typed and documented, and its sources parse as Python 3.9. (The sdist, the wheel's tag and
LICENSE are checked by tests/install/run.sh.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agent_state

PACKAGE_DIR = Path(agent_state.__file__).resolve().parent
BUNDLED = PACKAGE_DIR / ".libs" / "libagent_state.so"


def run_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "AGENT_STATE_LIBRARY"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60
    )


def test_installed_package_uses_its_bundled_library(tmp_path: Path) -> None:
    if not BUNDLED.is_file():
        pytest.skip("running from a source tree: no library bundled next to the package")
    code = (
        "import agent_state\n"
        "print(agent_state.library_path())\n"
        "with agent_state.Agent(':memory:') as a: print(a.set_state({'ok': 1}))\n"
    )
    out = run_python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [str(BUNDLED), "{'ok': 1}"]


def test_bundled_library_is_not_taken_for_a_module() -> None:
    if not BUNDLED.is_file():
        pytest.skip("running from a source tree: no library bundled next to the package")
    modules = sorted(m.name for m in pkgutil.iter_modules(agent_state.__path__))
    # Exactly the package's Python sources: the bundled library is not listed as a module.
    sources = sorted(p.stem for p in Path(agent_state.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert modules == sources
    assert not any("agent_state" in m or m.startswith("lib") for m in modules)
    assert [m.name for m in pkgutil.walk_packages(agent_state.__path__, "agent_state.")] == [
        "agent_state." + name for name in modules
    ]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agent_state.libagent_state")


def test_environment_variable_overrides_the_library(tmp_path: Path) -> None:
    custom = tmp_path / "elsewhere" / "libcustom_agent_state.so"
    custom.parent.mkdir()
    shutil.copyfile(agent_state.library_path(), custom)
    code = "import agent_state\nprint(agent_state.library_path())\nprint(agent_state.library_version())\n"
    out = run_python(code, tmp_path, AGENT_STATE_LIBRARY=str(custom))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [str(custom), agent_state.library_version()]
    # A wrong path: importing works, the first use says what failed.
    code = "import agent_state\ntry:\n    agent_state.Agent(':memory:')\nexcept OSError as e:\n    print(e)\n"
    out = run_python(code, tmp_path, AGENT_STATE_LIBRARY=str(tmp_path / "missing.so"))
    assert out.returncode == 0, out.stderr
    assert "missing.so" in out.stdout and "cannot load" in out.stdout


def test_package_is_typed() -> None:
    assert (PACKAGE_DIR / "py.typed").is_file()


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for name in agent_state.__all__:
        obj = getattr(agent_state, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if not inspect.getdoc(obj):
                missing.append(name)
            if inspect.isclass(obj) and obj.__module__.startswith("agent_state"):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, (property, classmethod))):
                        continue
                    if not inspect.getdoc(member if not isinstance(member, classmethod) else member.__func__):
                        missing.append(f"{name}.{attr}")
    assert missing == []
    assert inspect.getdoc(agent_state)


def test_sources_are_python_39_syntax() -> None:
    for source in PACKAGE_DIR.glob("*.py"):
        ast.parse(source.read_text(encoding="utf-8"), filename=str(source), feature_version=(3, 9))
