#!/usr/bin/env bash
# Tests of the Node.js binding: `make test-node` runs this. Works from any directory.
#
#   1. Node >= 20 (installed from Debian's packages when missing, as root), and the test tools of
#      package-lock.json (typescript, @types/node) in bindings/node/node_modules: `npm ci` when
#      one is missing there or is of another version than the lock file's;
#   2. the addon, built with cargo and copied into the package (build.sh);
#   3. `node --test bindings/node/test/`: every *.test.js there (or only the files given as
#      arguments: `run-tests.sh bindings/node/test/surface.test.js`). Each case runs on SQLite, and on
#      PostgreSQL when AGENT_STATE_TEST_PG_URI names a server (tests/pg/with-server.sh sets it;
#      `make test` runs the suites inside it). Without one the PostgreSQL cases are skipped, and
#      under CI=true that is a failure, as tests/pg/each-backend.sh has it for the other bindings;
#   4. `tsc -p bindings/node`: index.d.ts and examples/conversation.ts type-check (strict), and
#      the example compiles into bindings/node/build/;
#   5. the compiled example twice on a new store: the second run finds what the first stored;
#   6. tests/cross-language/run.sh, when the checkout has it.
# Steps 4 to 6 run also when the suite failed; exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# ---------------------------------------------------------------------------- Node and npm
# shellcheck source=nodeenv.sh
. "$here/nodeenv.sh"
node_need npm
echo "node $(node --version), npm $(npm --version)"
node_tools

# ------------------------------------------------------------------------------- the addon
echo "+ bash bindings/node/build.sh"
bash "$here/build.sh"
# The tests load the package's own addon, the one just built.
unset AGENT_STATE_NODE_ADDON

# ------------------------------------------------------------------------------- the suite
if [ -n "${AGENT_STATE_TEST_PG_URI:-}" ]; then
    echo "== the cases run on SQLite and on PostgreSQL (AGENT_STATE_TEST_PG_URI is set)"
    pg_missing=0
elif [ "${CI:-}" = true ]; then
    echo "== PostgreSQL: no server (AGENT_STATE_TEST_PG_URI unset): a failure under CI=true" >&2
    pg_missing=1
else
    echo "== PostgreSQL: skipped (no server): the cases run on SQLite only"
    pg_missing=0
fi

failed=()
if [ $# -gt 0 ]; then
    echo "+ node --test $*"
    node --test "$@" || failed+=("node --test $*")
else
    echo "+ node --test bindings/node/test/"
    node --test "$here/test/" || failed+=("node --test bindings/node/test/")
fi

# ---------------------------------------------------------------------- types and example
echo "+ tsc -p bindings/node"
rm -rf "$here/build"
example="$here/build/examples/conversation.js"
if ! "$here/node_modules/.bin/tsc" -p "$here"; then
    failed+=("tsc -p bindings/node")
elif [ ! -f "$example" ]; then
    failed+=("tsc -p bindings/node (it wrote no $example)")
else
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-node.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    echo "+ node build/examples/conversation.js (twice, on a new store)"
    want_first='c1: nothing stored yet (runs 0)
onStateChanged: idle -> processing
onStateChanged: processing -> idle
c1: runs 1, status idle, lastReply ""'
    want_second='c1: stored at version 3 by an earlier run (runs 1, status idle)
onStateChanged: idle -> processing
onStateChanged: processing -> idle
c1: runs 2, status idle, lastReply ""'
    if first="$(cd "$tmp" && node "$example" "$tmp/conv.db")" &&
        second="$(cd "$tmp" && node "$example" "$tmp/conv.db")" &&
        printf '%s\n' "$first" "$second" | sed 's/^/    /' &&
        [ "$first" = "$want_first" ] && [ "$second" = "$want_second" ]; then
        echo "ok: the second run found the first run's state"
    else
        echo "run-tests.sh: the example failed or printed something else; expected:" >&2
        printf '%s\n' "$want_first" "$want_second" >&2
        failed+=("the example")
    fi
fi

# ------------------------------------------------------------------------ cross-language
if [ -f "$root/tests/cross-language/run.sh" ]; then
    echo "+ bash tests/cross-language/run.sh"
    bash "$root/tests/cross-language/run.sh" || failed+=("tests/cross-language/run.sh")
fi

if [ "$pg_missing" = 1 ]; then
    failed+=("the PostgreSQL cases (no server, under CI=true)")
fi
if [ ${#failed[@]} -gt 0 ]; then
    printf 'run-tests.sh: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "run-tests.sh: the Node.js binding's tests passed"
