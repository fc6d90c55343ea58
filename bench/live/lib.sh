# shellcheck shell=bash
# Sourced by bench/live/run.sh (one agent, many subscribers) and bench/live/fleet.sh (many
# agents, one subscriber each): a scratch directory removed at exit with the processes started,
# waiting for a condition, the server's CPU time and memory, its start and its stop.
#
# Sets `tmp` (the scratch directory) and `children` (the pids to stop at exit); start_server
# sets `server` (its pid) and `url`; stop_server sets `server_rc`.

tmp="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-live.XXXXXX")"
children=()
cleanup() {
    local p
    for p in "${children[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${children[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "bench/live: $*" >&2; exit 3; }

# Raises the open-file limit for N sockets (each subscriber is one in the client process and
# one in the server), or fails saying so.
raise_fds() {
    ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $(($1 + 256)) ]; then
        fail "ulimit -n is $(ulimit -n) (hard limit $(ulimit -Hn)), too few for $1 subscribers"
    fi
}

# Waits (deadline in seconds) until the command succeeds; fails when process $2 is gone.
wait_for() {
    local what="$1" pid="$2" secs="$3"; shift 3
    local end=$((SECONDS + secs))
    until "$@"; do
        kill -0 "$pid" 2>/dev/null || fail "$what: the process exited"
        [ "$SECONDS" -lt "$end" ] || fail "$what: not after $secs s"
        sleep 0.05
    done
}

hz="$(getconf CLK_TCK)"
# A process's CPU time, utime + stime, in clock ticks (fields 14 and 15 of /proc/PID/stat;
# the command name, field 2, may hold spaces: cut after its closing parenthesis).
cpu_ticks() {
    local stat rest f
    stat="$(cat "/proc/$1/stat")"
    rest="${stat##*) }"
    read -r -a f <<<"$rest"
    echo $((f[11] + f[12]))
}

# A field of /proc/PID/status (VmRSS, VmHWM in kB; Threads).
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# Fails, with the server's last words, when it is gone.
alive() {
    kill -0 "$server" 2>/dev/null && return 0
    tail -n 20 "$tmp/server.err" >&2 || true
    fail "the server exited $1"
}

# start_server STORE [serve's options...]: a private token file in $tmp/token (as serve
# requires), the server on a free loopback port; waits for its listening line.
start_server() {
    local store="$1"; shift
    (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token")
    "$bin" serve "$store" --listen 127.0.0.1:0 --token-file "$tmp/token" "$@" \
        >"$tmp/server.out" 2>"$tmp/server.err" &
    server=$!
    children+=("$server")
    wait_for "the server's listening line" "$server" 30 grep -qs 'listening on http://' "$tmp/server.out"
    url="$(sed -n 's/.*listening on \(http:\/\/[^ ]*\).*/\1/p' "$tmp/server.out" | head -n 1)"
}

# PROTOCOL.md: SIGTERM stops it (exit 0). Given 10 s, then killed.
stop_server() {
    local end
    kill -TERM "$server"
    end=$((SECONDS + 10))
    while kill -0 "$server" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.05; done
    kill -0 "$server" 2>/dev/null && { echo "bench/live: the server ignored SIGTERM for 10 s" >&2; kill -KILL "$server"; }
    server_rc=0
    wait "$server" || server_rc=$?
    if [ -s "$tmp/server.err" ]; then
        echo "bench/live: the server's standard error (last 20 lines):" >&2
        tail -n 20 "$tmp/server.err" >&2
    fi
}

# The client's standard input: a FIFO this shell holds open read-write on descriptor 3 (so
# opening it blocks nobody and the client never sees an end of input early). `say LINE`
# writes a line to it.
open_control() {
    mkfifo "$tmp/control"
    exec 3<>"$tmp/control"
}
say() { echo "$*" >&3; }
