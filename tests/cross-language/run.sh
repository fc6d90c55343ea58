#!/usr/bin/env bash
# The cross-language test (tests/cross-language/README.md): Node, Python, Go and Rust each write every
# codec type into one SQLite store, each reads what all three wrote and checks it in its own
# types, and the bytes stored for the same logical state are compared. Exits non-zero on any
# mismatch. Runs after `make build`; prepares what it needs with the project's own scripts:
# the Node addon (bindings/node/build.sh, a no-op when it is current), the Python binding's
# virtual environment (bindings/python/venv.sh: target/pyvenv) and Go (bindings/go/goenv.sh:
# caches under target/go, the checkout's library). --keep keeps the store and the encoders'
# texts (the directory is printed).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

keep=0
for arg in "$@"; do
    case "$arg" in
        --keep) keep=1 ;;
        *) echo "usage: tests/cross-language/run.sh [--keep]" >&2; exit 2 ;;
    esac
done

if [[ ! -f "$root/target/release/libagent_state.so" ]]; then
    echo "tests/cross-language/run.sh: $root/target/release/libagent_state.so is missing; run 'make build' first" >&2
    exit 1
fi

if ! command -v node >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "tests/cross-language/run.sh: installing nodejs (Debian)" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null
    else
        echo "tests/cross-language/run.sh: node is missing; install Node.js >= 20 (Debian: nodejs)" >&2
        exit 1
    fi
fi

echo "+ bash bindings/node/build.sh"
bash "$root/bindings/node/build.sh"

# shellcheck source=../../bindings/python/venv.sh
. "$root/bindings/python/venv.sh"
# shellcheck source=../../bindings/go/goenv.sh
. "$root/bindings/go/goenv.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-cross.XXXXXX")"
if [[ "$keep" == 1 ]]; then
    trap 'echo "kept: $work"' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi
store="$work/cross.db"

echo "+ cargo build (crates/agent_state/tests/cross_language.rs)"
cargo test -q -p agent_state --test cross_language --no-run

echo "+ go build (tests/cross-language/go)"
(cd "$here/go" && go vet . && go build -o "$work/crosslanguage" .)

# The Rust side (crates/agent_state/tests/cross_language.rs): a test of the core crate that does
# the step AGENT_STATE_CROSS names (its words on separate lines). Built in the test profile,
# which `make test` has built already.
rust_step() {
    AGENT_STATE_CROSS="$1" cargo test -q -p agent_state --test cross_language -- \
        --exact cross_language_step --nocapture
}

failed=0
step() {
    echo "+ $*"
    if ! "$@"; then
        failed=$((failed + 1))
    fi
}

# Every writer first (a writer that fails leaves its agents out: the readers say which).
step node "$here/node.js" write "$store" "$work"
step "$PY" "$here/cross.py" write "$store" "$work"
step "$work/crosslanguage" write "$store" "$work"
step rust_step "write
$store
$work"
# Then every reader, on every agent.
step node "$here/node.js" read "$store"
step "$PY" "$here/cross.py" read "$store"
step "$work/crosslanguage" read "$store"
step rust_step "read
$store"
# The same logical state, byte for byte.
step "$PY" "$here/cross.py" bytes "$store" "$work"

if [[ "$failed" != 0 ]]; then
    echo "tests/cross-language/run.sh: $failed step(s) failed" >&2
    exit 1
fi
echo "tests/cross-language/run.sh: passed (Node, Python, Go and Rust agree on every codec type)"
