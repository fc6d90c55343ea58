#!/usr/bin/env bash
# The live-state server under load: N WebSocket subscribers on one agent (one client process)
# while another process (writer.py, the Python binding) writes R changes a second for S seconds.
# Checks that every subscriber's final copy equals the stored state and that each saw
# consecutive versions; reports delivery latency, the server's RSS and CPU time.
#
#   bench/live/run.sh [--smoke] [--client rust|js] [--out FILE.json] [--subscribers N]
#                     [--rate R] [--seconds S] [--workers W] [--no-build]
#
# Full: 1,000 subscribers, 200 writes/s for 30 s. --smoke: 20 subscribers, 50 writes/s for 2 s
# (its figures mean nothing; its correctness checks hold all the same). --client: rust (the
# default: examples/live_subscribers.rs of crates/agent-state-serve, a few µs per message, so
# the server is what is measured) or js (subscribers.mjs through the real JS client, ~40 µs of
# JavaScript per message: at 1,000 x 200/s it saturates a small machine itself). --workers: the
# client's threads (default: one per CPU). --no-build: the binaries are already built.
# Prints a markdown table and writes the figures as JSON (default target/bench/live.json).
# Exits non-zero when a correctness check fails (a copy differs, a version gap, a subscriber
# that never connected, a harness failure), not for slow latency. AGENT_STATE_BIN runs another
# server binary; NODE another node (20+; run with --experimental-websocket).
#
#   bench/live/run.sh --fleet [--smoke] [--backend sqlite|postgres] ...
#
# runs the fleet mode instead: one stream on each of 10,000 agents (bench/live/fleet.sh, which
# says its options).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for arg in "$@"; do
    if [ "$arg" = --fleet ]; then
        rest=()
        for a in "$@"; do [ "$a" = --fleet ] || rest+=("$a"); done
        exec bash "$here/fleet.sh" "${rest[@]}"
    fi
done
root="$(cd "$here/../.." && pwd)"
mode=full
client=rust
out="$root/target/bench/live.json"
n="" rate="" seconds="" workers=0 build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) mode=smoke ;;
        --client) client="$2"; shift ;;
        --out) out="$2"; shift ;;
        --subscribers) n="$2"; shift ;;
        --rate) rate="$2"; shift ;;
        --seconds) seconds="$2"; shift ;;
        --workers) workers="$2"; shift ;;
        --no-build) build=0 ;;
        -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/live/run.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
if [ "$mode" = smoke ]; then
    : "${n:=20}" "${rate:=50}" "${seconds:=2}"
else
    : "${n:=1000}" "${rate:=200}" "${seconds:=30}"
fi
case "$client" in rust|js) ;; *) echo "bench/live/run.sh: --client rust or js" >&2; exit 2 ;; esac
label="$mode, $client client: $n subscribers, $rate writes/s for $seconds s"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$(dirname "$out")"
agent=live-bench

cd "$root"
if [ "$build" = 1 ]; then
    echo "bench/live: building agent-state and the library" >&2
    cargo build --release -p agent-state-cli >&2
    cargo build --release -p libagent_state >&2
    [ "$client" = js ] || cargo build --release -p agent_state_serve --example live_subscribers >&2
fi
# shellcheck source=../../bindings/python/venv.sh
. "$root/bindings/python/venv.sh"
bin="${AGENT_STATE_BIN:-$root/target/release/agent-state}"
node_bin="${NODE:-node}"
subs_bin="$root/target/release/examples/live_subscribers"
if [ "$client" = js ]; then
    command -v "$node_bin" >/dev/null || { echo "bench/live: node is missing" >&2; exit 3; }
else
    [ -x "$subs_bin" ] || { echo "bench/live: $subs_bin is missing (build it)" >&2; exit 3; }
fi

# shellcheck source=lib.sh
. "$here/lib.sh"
# 1,000 subscribers are 1,000 sockets in each of the client process and the server.
raise_fds "$n"

store="$tmp/store.db"
"$PY" "$here/writer.py" seed --store "$store" --agent "$agent" >"$tmp/seed.json"
start_server "$store"
echo "bench/live: server $server at $url; $n subscribers, $rate writes/s for $seconds s" >&2

# RSS every 500 ms while the server runs (a sampler, not a synchronisation).
(
    while kill -0 "$server" 2>/dev/null; do
        kb="$(status_kb "$server" VmRSS 2>/dev/null || true)"
        [ -z "$kb" ] || echo "$(date +%s%3N) $kb"
        sleep 0.5
    done
) >"$tmp/rss" &
children+=("$!")
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
rss_start="$(status_kb "$server" VmRSS)"
cpu_start="$(cpu_ticks "$server")"

if [ "$client" = js ]; then
    "$node_bin" --experimental-websocket --no-warnings "$here/subscribers.mjs" --url "$url" \
        --agent "$agent" --token-file "$tmp/token" --n "$n" --workers "$workers" \
        --ready-file "$tmp/ready.json" --out "$tmp/subscribers.json" &
else
    # Its standard input is the control FIFO: the `final` line goes through it.
    open_control
    threads=()
    [ "$workers" = 0 ] || threads=(--threads "$workers")
    "$subs_bin" --url "$url" --agent "$agent" --token-file "$tmp/token" --subscribers "$n" \
        --ready-file "$tmp/ready.json" "${threads[@]}" <&3 >"$tmp/subscribers.json" &
fi
subs=$!
children+=("$subs")
wait_for "the subscribers' snapshots" "$subs" 120 test -s "$tmp/ready.json"
rss_ready="$(status_kb "$server" VmRSS)"
cpu_ready="$(cpu_ticks "$server")"
t_ready="$(date +%s%3N)"

writer_rc=0
if grep -q '"ok":true' "$tmp/ready.json"; then
    "$PY" "$here/writer.py" write --store "$store" --agent "$agent" --rate "$rate" \
        --seconds "$seconds" --out "$tmp/writer.json" >/dev/null || writer_rc=$?
else
    echo "bench/live: not every subscriber connected: $(cat "$tmp/ready.json")" >&2
    echo '{}' >"$tmp/writer.json"
    writer_rc=1
fi
alive "during the writes"
cpu_written="$(cpu_ticks "$server")"
t_written="$(date +%s%3N)"
if [ "$client" = js ]; then
    kill -USR2 "$subs"
else
    # The stored version the writer ended at: every subscriber must reach it (without one, the
    # subscribers read it from the server).
    final="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("final_version") or "")' \
        "$tmp/writer.json" 2>/dev/null || true)"
    say "final $final"
fi
subs_rc=0
wait "$subs" || subs_rc=$?
alive "while the subscribers settled"
cpu_end="$(cpu_ticks "$server")"
t_end="$(date +%s%3N)"
rss_end="$(status_kb "$server" VmRSS)"
hwm="$(status_kb "$server" VmHWM)"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
stop_server
[ -s "$tmp/subscribers.json" ] || fail "the subscribers wrote no figures (exit $subs_rc)"

"$PY" "$here/report.py" --mode "$mode" --out "$out" --subscribers "$tmp/subscribers.json" \
    --writer "$tmp/writer.json" --writer-rc "$writer_rc" --rss "$tmp/rss" \
    --rss-kb "start=$rss_start,ready=$rss_ready,end=$rss_end,hwm=$hwm" \
    --marks "ready=$t_ready,written=$t_written,end=$t_end" \
    --cpu-ticks "start=$cpu_start,ready=$cpu_ready,written=$cpu_written,end=$cpu_end" --hz "$hz" \
    --load-start "$load_start" --load-end "$load_end" \
    --server-rc "$server_rc" --server-err "$tmp/server.err" --label "$label"
