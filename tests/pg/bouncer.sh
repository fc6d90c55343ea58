#!/usr/bin/env bash
# A throwaway PgBouncer in front of the test server (tests/pg/server.sh), for the suites that
# run through a connection pooler:
#
#   bouncer.sh start DIR SERVER_SOCKET_DIR SERVER_PORT MODE
#       writes a configuration in DIR (created, owned by the `postgres` user when root), starts
#       Debian's pgbouncer on it with `pool_mode = MODE` (transaction or session), listening on
#       127.0.0.1 at a free port (no other address) and on a Unix socket in DIR, forwarding every
#       database to the server's Unix socket in SERVER_SOCKET_DIR at SERVER_PORT as `postgres`
#       (trust), and prints the URI to reach it over TCP.
#   bouncer.sh stop DIR
#       stops that pgbouncer (by the pid in DIR/pgbouncer.pid) and removes DIR.
#
# pgbouncer refuses to run as root, as PostgreSQL does: when root, it runs as `postgres`. On a
# machine without it, `start` installs Debian's `pgbouncer` package first (root only).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

find_bouncer() {
    local b
    for b in /usr/sbin/pgbouncer /usr/bin/pgbouncer; do
        if [[ -x $b ]]; then
            echo "$b"
            return 0
        fi
    done
    command -v pgbouncer
}

install_bouncer() {
    if find_bouncer >/dev/null; then
        return 0
    fi
    echo "bouncer.sh: pgbouncer not found; installing Debian's pgbouncer package" >&2
    if [[ $(id -u) -ne 0 ]]; then
        echo "bouncer.sh: installing pgbouncer needs root" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq pgbouncer >&2
    find_bouncer >/dev/null
}

start_bouncer() {
    local dir=$1 sockdir=$2 sport=$3 mode=$4 bin port pool_size attempt
    bin=$(find_bouncer)
    case $mode in
    transaction) pool_size=20 ;;
    # A client holds its server connection for its whole session: room for every client the
    # suites keep open at once (the server allows 300).
    session) pool_size=150 ;;
    *)
        echo "bouncer.sh: MODE is transaction or session, not '$mode'" >&2
        return 2
        ;;
    esac
    mkdir -p "$dir"
    chmod 755 "$dir"
    # trust: no password is checked, but the user must be in the auth_file.
    echo '"postgres" ""' >"$dir/userlist.txt"
    if [[ $(id -u) -eq 0 ]]; then
        chown -R postgres: "$dir"
    fi
    # The port is free when chosen, but another process may take it before pgbouncer binds it:
    # a few tries.
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$sockdir port=$sport user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = $mode
max_client_conn = 400
default_pool_size = $pool_size
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
        [[ $(id -u) -eq 0 ]] && chown postgres: "$dir/pgbouncer.ini"
        if as_owner "$bin" -d -q "$dir/pgbouncer.ini" 2>>"$dir/start.log"; then
            # -d returns once daemonized; wait until it accepts connections.
            for _ in $(seq 100); do
                if [[ -S $dir/.s.PGSQL.$port ]] && [[ -f $dir/pgbouncer.pid ]]; then
                    echo "$port"
                    return 0
                fi
                sleep 0.05
            done
        fi
        stop_bouncer_process "$dir"
        echo "bouncer.sh: pgbouncer did not start on port $port (try $attempt)" >&2
    done
    cat "$dir/start.log" "$dir/pgbouncer.log" >&2 2>/dev/null || true
    return 1
}

stop_bouncer_process() {
    local dir=$1 pid
    [[ -f $dir/pgbouncer.pid ]] || return 0
    pid=$(cat "$dir/pgbouncer.pid")
    if [[ -n $pid ]] && kill "$pid" 2>/dev/null; then
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pgbouncer.pid"
}

case ${1:-} in
start)
    [[ $# -eq 5 ]] || { echo "usage: bouncer.sh start DIR SERVER_SOCKET_DIR SERVER_PORT MODE" >&2; exit 2; }
    install_bouncer
    port=$(start_bouncer "$2" "$3" "$4" "$5")
    echo "postgresql://postgres@127.0.0.1:$port/postgres?sslmode=disable"
    ;;
stop)
    [[ $# -eq 2 ]] || { echo "usage: bouncer.sh stop DIR" >&2; exit 2; }
    stop_bouncer_process "$2"
    rm -rf "$2"
    ;;
*)
    echo "usage: bouncer.sh start DIR SERVER_SOCKET_DIR SERVER_PORT MODE | stop DIR" >&2
    exit 2
    ;;
esac
