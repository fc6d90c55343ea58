#!/usr/bin/env bash
# Tests of the Python binding: `make test-python` (which builds the library first) runs this.
#
# Creates a virtual environment under target/pyvenv, installs pytest, hypothesis and the
# package itself (`pip install ./bindings/python`, which bundles target/release's library),
# then runs the suite. Exits non-zero on any failure. Works on a fresh Debian machine with
# Python 3.9+ (PYTHON=python3.x picks another interpreter).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/target/pyvenv"
LIB="$ROOT/target/release/libagent_state.so"

if [[ ! -f "$LIB" ]]; then
  echo "run-tests.sh: $LIB is missing; run 'make build' first (or 'make test-python')" >&2
  exit 1
fi

# A venv made by another interpreter (or a broken one) is rebuilt.
want="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [[ -x "$VENV/bin/python" ]]; then
  have="$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
  if [[ "$have" != "$want" ]] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$VENV"
  fi
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  mkdir -p "$ROOT/target"
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    # Debian splits venv/ensurepip out of the interpreter package.
    if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
      echo "run-tests.sh: installing python3-venv (Debian) to create the virtual environment" >&2
      apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python${want}-venv" >/dev/null \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      "$PYTHON" -m venv "$VENV"
    else
      echo "run-tests.sh: '$PYTHON -m venv' failed; install the venv module (Debian: python3-venv)" >&2
      exit 1
    fi
  fi
fi

PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$PY" -c 'import pytest, hypothesis' >/dev/null 2>&1; then
  "$PY" -m pip install --quiet "pytest>=7" "hypothesis>=6"
fi
# Always reinstall the package: it bundles the library just built.
"$PY" -m pip install --quiet --force-reinstall --no-deps ./bindings/python

# Run from a directory outside the source tree, so the installed package (with its bundled
# library, and no AGENT_STATE_LIBRARY) is what the tests import.
unset AGENT_STATE_LIBRARY
cd "$ROOT/bindings/python/tests"
exec "$PY" -m pytest -p no:cacheprovider -c "$ROOT/bindings/python/pyproject.toml" \
  --rootdir "$ROOT/bindings/python" "$@" .
