#!/usr/bin/env bash
# Tests of the Python binding: `make test-python` (which builds the library first) runs this.
#
# venv.sh makes the virtual environment under target/pyvenv and (re)installs the package
# itself (`pip install ./bindings/python`, which runs `cargo build --release --lib`, a no-op after
# `make build`, and bundles target/release's library); this script
# always reinstalls it (the library was just built), adds pytest, hypothesis, mypy and pydantic,
# checks the package and tests/typing_check.py with `mypy --strict`, then runs the suite. Exits
# non-zero on any failure (a type error included). Works on a fresh Debian machine with Python 3.9+
# (PYTHON=python3.x picks another interpreter).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

if [[ ! -f "$ROOT/target/release/libagent_state.so" ]]; then
  echo "run-tests.sh: $ROOT/target/release/libagent_state.so is missing; run 'make build' first (or 'make test-python')" >&2
  exit 1
fi

# Always reinstall the package: it bundles the library just built.
AGENT_STATE_REINSTALL=1
# shellcheck source=venv.sh
. "$ROOT/bindings/python/venv.sh"
unset AGENT_STATE_REINSTALL

export PIP_DISABLE_PIP_VERSION_CHECK=1
# pydantic: the package takes pydantic models as states without depending on pydantic; the
# suite checks that with pydantic installed. mypy 1.11+ knows TypeVar defaults (typed state).
if ! "$PY" -c 'import pytest, hypothesis, mypy, pydantic' >/dev/null 2>&1; then
  "$PY" -m pip install --quiet "pytest>=7" "hypothesis>=6" "mypy>=1.11,<2" "pydantic>=2,<3"
fi

# The package's types, as its users' type checkers see them (it ships py.typed), for the oldest
# Python it supports. The cache stays in target/.
"$PY" -m mypy --strict --python-version 3.9 --cache-dir "$ROOT/target/mypy_cache" \
  "$ROOT/bindings/python/src/agent_state"
# Typed state as a user's code sees it, against the installed package: tests/typing_check.py
# asserts types and which lines are errors. For this interpreter's version: mypy reads the
# installed pydantic's code for the models there, written for the interpreter it was installed
# for (recent pydantic releases need Python 3.10 and use its syntax).
"$PY" -m mypy --strict --cache-dir "$ROOT/target/mypy_cache" "$ROOT/bindings/python/tests/typing_check.py"

# Run from a directory outside the source tree, so the installed package (with its bundled
# library, and no AGENT_STATE_LIBRARY) is what the tests import.
unset AGENT_STATE_LIBRARY
cd "$ROOT/bindings/python/tests"
# Once on SQLite, once on PostgreSQL when AGENT_STATE_TEST_PG_URI names a server
# (tests/pg/each-backend.sh; tests/backends.py and conftest.py say which tests run there).
exec bash "$ROOT/tests/pg/each-backend.sh" "$PY" -m pytest -p no:cacheprovider \
  -c "$ROOT/bindings/python/pyproject.toml" --rootdir "$ROOT/bindings/python" "$@" .
