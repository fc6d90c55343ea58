#!/usr/bin/env bash
# Runs the READMEs' code examples (`make test-readme`, after `make build`): tests/readme/run.py
# extracts every fenced block and compiles and runs the c, cpp, python, go and ts ones, each in
# a fresh temporary directory (tests/readme/README.md has the markers). This script prepares
# what they need, as the binding's own test scripts do: the Python binding's virtual
# environment with the package installed from this checkout (bindings/python/venv.sh:
# target/pyvenv), Go with its caches under target/go and the in-repo build tag
# (bindings/go/goenv.sh), and for TypeScript Node (installed from the system packages when
# missing, as root), the Node addon (bindings/node/build.sh, a no-op when current) and the
# package's devDependencies, typescript and @types/node (`npm ci` in bindings/node when
# node_modules lacks a package of package-lock.json, or holds another version). Blocks marked
# postgres run when AGENT_STATE_TEST_PG_URI names a server (tests/pg/with-server.sh sets it).
# Arguments go to run.py (--list, --keep, FILE...).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

if [[ ! -f "$root/target/release/libagent_state.so" ]]; then
    echo "tests/readme/run.sh: $root/target/release/libagent_state.so is missing; run 'make build' first" >&2
    exit 1
fi

# shellcheck source=../../bindings/python/venv.sh
. "$root/bindings/python/venv.sh"
export README_PYTHON="$PY"

# shellcheck source=../../bindings/go/goenv.sh
. "$root/bindings/go/goenv.sh"

# shellcheck source=../../bindings/node/nodeenv.sh
. "$root/bindings/node/nodeenv.sh"
node_need npm
bash "$root/bindings/node/build.sh"
# The TypeScript compiler and Node's types, as bindings/node/run-tests.sh has them.
node_tools

exec python3 "$root/tests/readme/run.py" "$@"
