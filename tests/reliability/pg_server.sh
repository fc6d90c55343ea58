#!/usr/bin/env bash
# Runs pg_server (the server killed and restarted under load) on a PostgreSQL server of its own:
# a fresh directory from mktemp, port $PG_SERVER_PORT (default 5544; the socket lives in that
# directory, so the port only names it), stopped and removed at the end, also on failure or
# interrupt. Other suites sharing the main test server are not disturbed.
#
#   bash tests/reliability/pg_server.sh PG_SERVER_BINARY ROUNDS [PROCS THREADS BUSY_TIMEOUT_MS]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
export AGENT_STATE_PG_PORT=${PG_SERVER_PORT:-5544}
dir=$(mktemp -d /tmp/agent-state-pgkill.XXXXXX)
child=
cleanup() {
    [ -n "$child" ] && kill "$child" 2>/dev/null
    bash tests/pg/server.sh stop "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
uri=$(bash tests/pg/server.sh start "$dir") || { echo "pg_server.sh: the server did not start" >&2; exit 1; }
echo "pg_server.sh: own server at $uri"
prog=$1
shift
# In the background, so that a TERM (run.sh's timeout) reaches the trap at once.
AGENT_STATE_RELIABILITY_STORE=$uri "$prog" "$1" "$dir" "${@:2}" &
child=$!
wait "$child"
rc=$?
child=
exit $rc
