#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: `server.sh start DIR` creates a cluster in DIR
# (a fresh directory), starts it on a Unix socket in DIR only (no TCP port: no clash with other
# servers), and prints its connection URI; `server.sh stop DIR` stops it at once
# (`-m immediate`) and removes DIR; `server.sh kill DIR` stops it the same way but keeps the
# cluster, and `server.sh restart DIR` starts it again (the reliability tests' server crash).
#
# Replication, for the failover tests: `server.sh standby PRIMARY DIR` makes DIR a streaming
# standby of the running server in PRIMARY (pg_basebackup -R) and starts it on its own socket
# (same port number, another directory); `server.sh sync PRIMARY on|off` makes the primary's
# commits wait for the standby (synchronous_standby_names = '*') or not; `server.sh caught-up
# PRIMARY` waits until the standby has replayed everything the primary wrote; `server.sh promote
# DIR` promotes a standby and waits until it takes writes.
#
# PostgreSQL refuses to run as root: when root, initdb and pg_ctl run as the `postgres` user
# on a directory it owns. On a machine without PostgreSQL, `start` installs Debian's
# `postgresql` package first (the project's scripts install what the tests need).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT=${AGENT_STATE_PG_PORT:-5432}

install_postgres() {
    if find_bin >/dev/null; then
        return 0
    fi
    echo "server.sh: PostgreSQL not found; installing Debian's postgresql package" >&2
    if [[ $(id -u) -ne 0 ]]; then
        echo "server.sh: installing PostgreSQL needs root" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    # The package starts (and enables) a system cluster; the tests do not use it.
    if command -v pg_lsclusters >/dev/null; then
        pg_lsclusters -h 2>/dev/null | while read -r version cluster _; do
            pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
        done
    fi
    find_bin >/dev/null
}

uri_of() {
    echo "postgresql:///postgres?host=$1&port=$PORT&user=postgres"
}

start_server() {
    local dir=$1 bin
    bin=$(find_bin)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
        -o "-c listen_addresses='' -k $dir -p $PORT -c max_connections=300 -c fsync=on" \
        start >/dev/null
}

case ${1:-} in
start)
    dir=$2
    install_postgres
    bin=$(find_bin)
    mkdir -p "$dir"
    chmod 755 "$dir"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$dir"
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale --no-sync \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    start_server "$dir" || { cat "$dir/log" >&2; exit 1; }
    uri_of "$dir"
    ;;
restart)
    start_server "$2" || { cat "$2/log" >&2; exit 1; }
    ;;
kill)
    as_owner "$(find_bin)/pg_ctl" -D "$2/data" -m immediate -w stop >/dev/null
    ;;
stop)
    dir=$2
    if [[ -f $dir/data/postmaster.pid ]]; then
        as_owner "$(find_bin)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
standby)
    primary=$2 dir=$3
    bin=$(find_bin)
    mkdir -p "$dir"
    chmod 755 "$dir"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$dir"
    fi
    as_owner "$bin/pg_basebackup" -D "$dir/data" -R -h "$primary" -p "$PORT" -U postgres \
        -c fast -X stream --no-sync >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    start_server "$dir" || { cat "$dir/log" >&2; exit 1; }
    uri_of "$dir"
    ;;
sync)
    primary=$2
    names=''
    [[ $3 == on ]] && names='*'
    as_owner psql -q -h "$primary" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "ALTER SYSTEM SET synchronous_standby_names = '$names'" -c "SELECT pg_reload_conf()" >/dev/null
    ;;
caught-up)
    primary=$2
    for _ in $(seq 1 600); do
        lag=$(as_owner psql -qAt -h "$primary" -p "$PORT" -U postgres -d postgres -c \
            "SELECT count(*) FILTER (WHERE replay_lsn = pg_current_wal_lsn()), count(*) FROM pg_stat_replication")
        if [[ $lag =~ ^([1-9][0-9]*)\|\1$ ]]; then
            exit 0
        fi
        sleep 0.1
    done
    echo "server.sh: the standby of $primary did not catch up" >&2
    exit 1
    ;;
promote)
    as_owner "$(find_bin)/pg_ctl" -D "$2/data" -w -t 60 promote >/dev/null
    ;;
uri)
    uri_of "$2"
    ;;
*)
    echo "usage: server.sh start|stop|kill|restart|uri DIR | standby PRIMARY DIR | sync PRIMARY on|off | caught-up PRIMARY | promote DIR" >&2
    exit 2
    ;;
esac
