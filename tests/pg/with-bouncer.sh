#!/usr/bin/env bash
# with-bouncer.sh MODE COMMAND...: runs COMMAND with a throwaway PgBouncer (tests/pg/bouncer.sh,
# pool_mode MODE) in front of the test server tests/pg/with-server.sh started
# (AGENT_STATE_TEST_PG_DIR), its URI in AGENT_STATE_TEST_PG_POOLER_URI, and stops it when the
# command ends, also on failure or interrupt. Without such a server (or when the bouncer cannot
# start, outside CI=true) the command runs without one, and says so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=$1
shift

if [[ -z ${AGENT_STATE_TEST_PG_DIR:-} ]]; then
    echo "with-bouncer.sh: no test server of tests/pg/with-server.sh (AGENT_STATE_TEST_PG_DIR unset): no PgBouncer" >&2
    exec "$@"
fi
dir=$(mktemp -d /tmp/agent-state-bouncer.XXXXXX)
cleanup() { bash "$here/bouncer.sh" stop "$dir"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
if uri=$(bash "$here/bouncer.sh" start "$dir" "$AGENT_STATE_TEST_PG_DIR" "${AGENT_STATE_PG_PORT:-5432}" "$mode"); then
    export AGENT_STATE_TEST_PG_POOLER_URI=$uri
    echo "with-bouncer.sh: PgBouncer ($mode mode) at $uri" >&2
elif [[ ${CI:-} == true ]]; then
    echo "with-bouncer.sh: PgBouncer did not start (a failure under CI=true)" >&2
    exit 1
else
    echo "with-bouncer.sh: PgBouncer did not start; running without it" >&2
fi
"$@"
