#!/usr/bin/env bash
# Changes pushed to a fleet: `agent-state serve` with one WebSocket watch stream on each of many
# agents (one client process, Rust), on SQLite or PostgreSQL. Run as `bench/live/run.sh --fleet`.
#
#   bench/live/run.sh --fleet [--smoke] [--backend sqlite|postgres] [--out FILE.json]
#                             [--agents N] [--idle S] [--rate R] [--seconds S] [--threads T]
#                             [--perf DIR] [--no-build]
#
# 1. The agents are created first (fleet.py seed, the Python binding): a nested state each.
# 2. The client opens one stream per agent (examples/fleet_subscribers.rs of
#    crates/agent-state-serve) and every stream has its snapshot.
# 3. Idle: nothing is written for S s (after 2 s for what the connections left to settle). The
#    server's CPU time (utime + stime) as % of one core, its thread count, and on PostgreSQL the
#    transactions the database ran (pg_stat_database) and the scans of the library's tables
#    (pg_stat_user_tables): a watcher that queried per agent would show here.
# 4. Load: another process (fleet.py write) merges R nested patches a second, each into an agent
#    drawn at random, for S s; the delivery latency (from the stamp the writer puts in each
#    patch just before committing it, to the client's receipt) and the server's CPU.
# 5. End: every stream's copy is compared with its agent's stored state and version.
#
# Full: 10,000 agents, idle 60 s (two of the server's 30-s ping intervals: every stream pings
# at the same instants, so an idle window must hold whole intervals to carry its share of the
# pings), 200 changes/s for 30 s. --smoke: 100 agents, idle 3 s, 50/s
# for 2 s (its figures mean nothing; its checks hold all the same). --backend postgres runs on
# the server at AGENT_STATE_TEST_PG_URI (tests/pg/with-server.sh sets it); without one it says
# it was skipped and writes that into the JSON. Prints a markdown table and writes the figures
# as JSON (default target/bench/live-fleet-BACKEND.json); the targets (idle under 2% of a core,
# p99 under 100 ms) are marked PASS or MISS and never fail the run. Exits non-zero when a
# check fails: a copy that differs, a version gap, a stream that never connected, a change
# delivered while nothing was written, a writer that failed. --perf DIR: the server's profile
# of each phase (perf record, 499 Hz with call graphs) into DIR/PHASE.data and its report
# DIR/PHASE.txt, PHASE connect, idle and load (the sampling costs the server a little CPU of
# its own). --no-build: the binaries are built. AGENT_STATE_BIN runs another server binary.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mode=full backend=sqlite out="" build=1 threads=0 perf_dir=""
agents="" idle="" rate="" seconds=""
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) mode=smoke ;;
        --backend) backend="$2"; shift ;;
        --out) out="$2"; shift ;;
        --agents) agents="$2"; shift ;;
        --idle) idle="$2"; shift ;;
        --rate) rate="$2"; shift ;;
        --seconds) seconds="$2"; shift ;;
        --threads) threads="$2"; shift ;;
        --perf) perf_dir="$2"; shift ;;
        --no-build) build=0 ;;
        -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/live/run.sh --fleet: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
if [ "$mode" = smoke ]; then
    : "${agents:=100}" "${idle:=3}" "${rate:=50}" "${seconds:=2}"
else
    : "${agents:=10000}" "${idle:=60}" "${rate:=200}" "${seconds:=30}"
fi
case "$backend" in sqlite|postgres) ;; *) echo "bench/live/run.sh --fleet: --backend sqlite or postgres" >&2; exit 2 ;; esac
: "${out:=$root/target/bench/live-fleet-$backend.json}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$(dirname "$out")"
label="$mode, $backend: $agents agents, one stream each; idle $idle s; $rate changes/s for $seconds s"

if [ "$backend" = postgres ] && [ -z "${AGENT_STATE_TEST_PG_URI:-}" ]; then
    why="no PostgreSQL server (AGENT_STATE_TEST_PG_URI is not set; tests/pg/with-server.sh sets it)"
    printf '{"backend": "postgres", "mode": "%s", "skipped": "%s"}\n' "$mode" "$why" >"$out"
    echo "### Changes pushed to a fleet ($label)"
    echo
    echo "skipped: $why"
    exit 0
fi

cd "$root"
if [ "$build" = 1 ]; then
    echo "bench/live: building agent-state, the library and the fleet client" >&2
    cargo build --release -p agent-state-cli -p libagent_state >&2
    cargo build --release -p agent_state_serve --example fleet_subscribers >&2
fi
# shellcheck source=../../bindings/python/venv.sh
. "$root/bindings/python/venv.sh"
bin="${AGENT_STATE_BIN:-$root/target/release/agent-state}"
subs_bin="$root/target/release/examples/fleet_subscribers"
[ -x "$subs_bin" ] || { echo "bench/live: $subs_bin is missing (build it)" >&2; exit 3; }

# shellcheck source=lib.sh
. "$here/lib.sh"
raise_fds "$agents"

# A prefix of its own: on a server the bench did not start, earlier runs' agents stay apart.
prefix="fleet-$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')-"
if [ "$backend" = postgres ]; then
    store="$AGENT_STATE_TEST_PG_URI"
    command -v psql >/dev/null || fail "psql is missing (the PostgreSQL figures read the server's statistics)"
else
    store="$tmp/store.db"
fi
# The database's transactions and the scans of the library's tables so far, "XACTS SCANS"
# (PostgreSQL flushes a backend's counts within about a second of its going idle).
pg_counts() {
    psql -XAtq -F ' ' "$store" -c "SELECT
        (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()),
        (SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables
          WHERE relname LIKE 'agent\\_%')"
}

# perf_start PHASE / perf_stop PHASE: the server's profile of a phase, with --perf.
perf_start() {
    [ -n "$perf_dir" ] || return 0
    perf record -q -F 499 -g -p "$server" -o "$perf_dir/$1.data" >/dev/null 2>&1 &
    perf_pid=$!
    children+=("$perf_pid")
}
perf_stop() {
    [ -n "$perf_dir" ] || return 0
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    perf report -i "$perf_dir/$1.data" --stdio --no-children --percent-limit 1 \
        >"$perf_dir/$1.txt" 2>/dev/null || true
    echo "bench/live: the server's profile while $1: $perf_dir/$1.txt" >&2
}
if [ -n "$perf_dir" ]; then
    command -v perf >/dev/null || fail "--perf: perf is missing"
    mkdir -p "$perf_dir"
    perf_dir="$(cd "$perf_dir" && pwd)"
fi

echo "bench/live: creating $agents agents ($backend)" >&2
"$PY" "$here/fleet.py" seed --store "$store" --prefix "$prefix" --agents "$agents" \
    --out "$tmp/seed.json" >/dev/null
# A stream each, and the ramp's connections besides.
start_server "$store" --max-streams $((agents + 64)) --max-http-connections 1024
echo "bench/live: server $server at $url; $agents streams" >&2

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
perf_start connect
open_control
thread_args=()
[ "$threads" = 0 ] || thread_args=(--threads "$threads")
"$subs_bin" --url "$url" --token-file "$tmp/token" --prefix "$prefix" --expect "$agents" \
    --ready-file "$tmp/ready.json" "${thread_args[@]}" <&3 >"$tmp/subscribers.json" &
subs=$!
children+=("$subs")
# The client gives up after 60 s and 50 ms a stream; this waits a little longer.
wait_for "the streams' snapshots" "$subs" $((120 + agents * 6 / 100)) test -s "$tmp/ready.json"
alive "while the streams connected"
threads_ready="$(status_kb "$server" Threads)"
rss_ready="$(status_kb "$server" VmRSS)"
perf_stop connect

writer_rc=0
if grep -q '"ok":true' "$tmp/ready.json"; then
    sleep 2  # what the connections left (a backend's statistics, a page cache) settles
    say "mark idle_start"
    cpu_i0="$(cpu_ticks "$server")" t_i0="$(date +%s%3N)"
    pg_i0="$([ "$backend" = postgres ] && pg_counts || echo "")"
    perf_start idle
    sleep "$idle"
    cpu_i1="$(cpu_ticks "$server")" t_i1="$(date +%s%3N)"
    pg_i1="$([ "$backend" = postgres ] && pg_counts || echo "")"
    threads_idle="$(status_kb "$server" Threads)"
    say "mark idle_end"
    perf_stop idle
    alive "while idle"

    perf_start load
    cpu_w0="$(cpu_ticks "$server")" t_w0="$(date +%s%3N)"
    "$PY" "$here/fleet.py" write --store "$store" --prefix "$prefix" --agents "$agents" \
        --rate "$rate" --seconds "$seconds" --out "$tmp/writer.json" >/dev/null || writer_rc=$?
    cpu_w1="$(cpu_ticks "$server")" t_w1="$(date +%s%3N)"
    threads_load="$(status_kb "$server" Threads)"
    perf_stop load
    say "mark written"
    alive "during the writes"
else
    echo "bench/live: not every stream connected: $(cat "$tmp/ready.json")" >&2
    echo '{}' >"$tmp/writer.json"
    writer_rc=1
    cpu_i0=0 cpu_i1=0 t_i0=0 t_i1=0 pg_i0="" pg_i1="" threads_idle="" threads_load=""
    cpu_w0=0 cpu_w1=0 t_w0=0 t_w1=0
fi
say final
subs_rc=0
wait "$subs" || subs_rc=$?
alive "while the streams settled"
rss_end="$(status_kb "$server" VmRSS)"
hwm="$(status_kb "$server" VmHWM)"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
stop_server
[ -s "$tmp/subscribers.json" ] || fail "the subscribers wrote no figures (exit $subs_rc)"

"$PY" "$here/fleet_report.py" --mode "$mode" --backend "$backend" --label "$label" --out "$out" \
    --subscribers "$tmp/subscribers.json" --seed "$tmp/seed.json" --writer "$tmp/writer.json" \
    --writer-rc "$writer_rc" --server-rc "$server_rc" --server-err "$tmp/server.err" --hz "$hz" \
    --idle "cpu=$cpu_i0:$cpu_i1,ms=$t_i0:$t_i1" --load "cpu=$cpu_w0:$cpu_w1,ms=$t_w0:$t_w1" \
    --pg-idle "$pg_i0:$pg_i1" \
    --threads "ready=$threads_ready,idle=$threads_idle,load=$threads_load" \
    --rss-kb "ready=$rss_ready,end=$rss_end,hwm=$hwm" \
    --load-start "$load_start" --load-end "$load_end"
