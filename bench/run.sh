#!/usr/bin/env bash
# make bench (full) / make bench-smoke (smoke): agent_state against what users would write
# instead, through the C ABI (SQLite and PostgreSQL), the Python binding, the Go binding and the
# Node binding, in one run. Prints the tables and keeps the raw figures in target/bench/*.json;
# a full run also writes them into the book (docs/src/performance.md, bench/book.py).
#
# The PostgreSQL bench runs against the server at AGENT_STATE_TEST_PG_URI, or else a throwaway
# one (tests/pg/with-server.sh), and through a throwaway PgBouncer in front of it
# (tests/pg/with-bouncer.sh); with no server to be had outside CI, it says it was skipped. So
# does the Python bench's PostgreSQL part (the async binding's throughput: 100 coroutines
# against 100 threads), run under its own throwaway server the same way.
#
# Full mode takes a few minutes. Smoke mode runs a few hundred operations per case, so the
# harness cannot rot; its figures mean nothing and its PASS/MISS marks are not checked.
set -euo pipefail

mode="${1:-full}"
case "$mode" in
    full) smoke_flag="" ;;
    smoke) smoke_flag="--smoke" ;;
    *) echo "usage: bench/run.sh full|smoke" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/target/bench"
mkdir -p "$out"
cd "$root"

echo "== C ABI ($mode): cargo bench -p agent_state_ffi --bench abi"
cargo build --release --lib
cargo bench -p agent_state_ffi --bench abi -- $smoke_flag --out "$out/abi.json" | tee "$out/abi.md"

echo
echo "== C ABI, awaited calls ($mode): cargo bench -p agent_state_ffi --bench submit"
cargo bench -p agent_state_ffi --bench submit -- $smoke_flag --out "$out/submit.json" | tee "$out/submit.md"

echo
echo "== C ABI, PostgreSQL ($mode): cargo bench -p agent_state_ffi --bench postgres"
rm -f "$out/postgres.json"
# With a PgBouncer in transaction mode in front of that server (tests/pg/with-bouncer.sh): the
# rows through a pooler.
bash "$root/tests/pg/with-server.sh" bash "$root/tests/pg/with-bouncer.sh" transaction \
    cargo bench -p agent_state_ffi --bench postgres -- $smoke_flag --out "$out/postgres.json" \
    | tee "$out/postgres.md"

echo
echo "== Python binding ($mode)"
# Under a PostgreSQL server for the async binding's coroutines-against-threads rows (the SQLite
# rows do not use it); without one they say they were skipped.
bash "$root/tests/pg/with-server.sh" "$root/bindings/python/bench.sh" $smoke_flag \
    --out "$out/python.json" | tee "$out/python.md"

echo
echo "== Go binding ($mode)"
# shellcheck source=../bindings/go/goenv.sh
. "$root/bindings/go/goenv.sh"
# Figure 11's contender, encoding/json + database/sql, runs over a minimal cgo driver on the
# system's SQLite (bindings/go/internal/sqlitedriver, tag agentstate_benchsql): it needs the
# SQLite headers, installed here when missing (as goenv.sh installs Go); without them the Go
# bench says it did not run that contender.
go_tags="agentstate_inrepo"
if [ ! -f /usr/include/sqlite3.h ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench/run.sh: installing libsqlite3-dev for the Go contender" >&2
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y libsqlite3-dev; } >&2 || true
fi
if [ -f /usr/include/sqlite3.h ]; then go_tags="$go_tags,agentstate_benchsql"; fi
(cd "$root/bindings/go" && GOFLAGS="-mod=readonly -tags=$go_tags" \
    go run ./cmd/agentstate-bench ${smoke_flag:+-smoke} -out "$out/go.json") | tee "$out/go.md"

echo
echo "== Node binding ($mode): bench/node/bench.js"
# Its contender is a read-merge-write by hand on better-sqlite3 (version 12: 13 crashes on
# Node 20), installed once into bench/node/node_modules from the committed package-lock.json
# (again when the installed version is not the locked one); without it, or without Node, the
# bench says what did not run. The addon is the one build.sh puts in the package.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    bash "$root/bindings/node/build.sh"
    node_bench="$here/node"
    if ! (cd "$node_bench" && node -e '
const fs = require("fs");
const want = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages["node_modules/better-sqlite3"].version;
const have = JSON.parse(fs.readFileSync("node_modules/better-sqlite3/package.json", "utf8")).version;
require("better-sqlite3");
process.exit(want === have ? 0 : 1);' 2>/dev/null); then
        echo "+ npm ci (bench/node: better-sqlite3)" >&2
        (cd "$node_bench" && npm ci --no-audit --no-fund --loglevel=error) >&2 \
            || echo "bench/run.sh: npm ci in bench/node failed: the hand-written contender will not run" >&2
    fi
    node "$node_bench/bench.js" $smoke_flag --out "$out/node.json" | tee "$out/node.md"
else
    echo "Node binding: not run (no node or npm on PATH)" | tee "$out/node.md"
fi

echo
echo "== agent-state serve under load ($mode): bench/live/run.sh (live delivery)"
# 1,000 WebSocket subscribers (one process, Rust) on one agent while the Python binding writes
# 200 changes a second for 30 s; fails on a wrong copy or a version gap, never on latency.
bash "$root/bench/live/run.sh" $smoke_flag --out "$out/live.json" | tee "$out/live.md"

echo
echo "== Changes pushed to a fleet ($mode): bench/live/run.sh --fleet, on SQLite and PostgreSQL"
# 10,000 agents, one watch stream each (one Rust client process): the server idle, then 200
# nested merge patches a second from the Python binding; fails on a wrong copy or a version
# gap, never on CPU or latency (bench/summary.py marks those targets).
rm -f "$out/live-fleet-sqlite.json" "$out/live-fleet-postgres.json"
bash "$root/bench/live/run.sh" --fleet $smoke_flag --backend sqlite \
    --out "$out/live-fleet-sqlite.json" | tee "$out/live-fleet-sqlite.md"
bash "$root/tests/pg/with-server.sh" bash "$root/bench/live/run.sh" --fleet $smoke_flag --no-build \
    --backend postgres --out "$out/live-fleet-postgres.json" | tee "$out/live-fleet-postgres.md"

echo
echo "== The write-cost targets (\"Write what changed\"), \"Writes at the floor\" and the async binding (\"Never block an event loop\"): every figure, from the runs above ($mode)"
python3 "$here/summary.py" "$out" "$mode" | tee "$out/summary.md"

# A full run's figures go into the book: the generated part of docs/src/performance.md (between
# its bench:begin and bench:end markers), stamped with the date, this machine and the commit
# (bench/book.py). A smoke run's figures mean nothing and never touch the page.
if [ "$mode" = full ]; then
    python3 "$here/book.py" "$out"
fi

echo
echo "bench: raw figures in $out (abi.json, submit.json, postgres.json, python.json, go.json, node.json, live.json, live-fleet-sqlite.json, live-fleet-postgres.json; summary.md)"
