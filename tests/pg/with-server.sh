#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL server (tests/pg/server.sh), its URI in
# AGENT_STATE_TEST_PG_URI, and stops the server when the command ends, also on failure or
# interrupt. When AGENT_STATE_TEST_PG_URI is already set, the command runs against that server.
#
# A server that cannot start is a failure under CI=true; elsewhere it is reported and the
# command runs without one (the PostgreSQL suites then say they were skipped).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [[ -n ${AGENT_STATE_TEST_PG_URI:-} ]]; then
    exec "$@"
fi

dir=$(mktemp -d /tmp/agent-state-pg.XXXXXX)
cleanup() { bash "$here/server.sh" stop "$dir"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if uri=$(bash "$here/server.sh" start "$dir"); then
    export AGENT_STATE_TEST_PG_URI=$uri
    export AGENT_STATE_TEST_PG_DIR=$dir
    echo "with-server.sh: PostgreSQL at $uri" >&2
elif [[ ${CI:-} == true ]]; then
    echo "with-server.sh: the PostgreSQL server did not start (a failure under CI=true)" >&2
    exit 1
else
    echo "with-server.sh: no PostgreSQL server; its suites will be skipped" >&2
fi
"$@"
