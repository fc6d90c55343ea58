#!/usr/bin/env bash
# make test-cache-statement: the PostgreSQL tests again with the library's statements prepared
# (the URI parameter default_query_exec_mode=cache_statement; test-rust and test-pooler run
# them in the default mode, exec): the PostgreSQL variants of the workspace's tests
# (#[each_backend]: NAME::postgres) and the backend's tests of its semantics, crash, freeze and
# failover included (the servers those start get the mode from
# AGENT_STATE_TEST_PG_EXEC_MODE); then the backend's tests through PgBouncer in session mode
# (tests/pg/bouncer.sh), the pooler mode cache_statement is for. The tests' own connections
# behind the library's back go to AGENT_STATE_TEST_PG_SERVER_URI, the server's URI as
# tests/pg/with-server.sh gave it (the raw client refuses the library's parameter). The
# backend's unit tests (cargo test -p agent_state --lib, in test-rust) run both modes
# themselves.
#
# Without a server of tests/pg/with-server.sh the run is skipped with a notice, except under
# CI=true, where that is a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cargo=${CARGO:-cargo}

if [[ -z ${AGENT_STATE_TEST_PG_DIR:-} || -z ${AGENT_STATE_TEST_PG_URI:-} ]]; then
    if [[ ${CI:-} == true ]]; then
        echo "cache-statement.sh: no test server (AGENT_STATE_TEST_PG_DIR) under CI=true" >&2
        exit 1
    fi
    echo "cache-statement.sh: skipped: no test server of tests/pg/with-server.sh (AGENT_STATE_TEST_PG_DIR unset)" >&2
    exit 0
fi
server_uri=$AGENT_STATE_TEST_PG_URI
server_dir=$AGENT_STATE_TEST_PG_DIR
server_port=${AGENT_STATE_PG_PORT:-5432}
with_mode() {
    if [[ $1 == *\?* ]]; then echo "$1&default_query_exec_mode=cache_statement"
    else echo "$1?default_query_exec_mode=cache_statement"; fi
}

dir=""
cleanup() { if [[ -n $dir ]]; then bash "$here/bouncer.sh" stop "$dir"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

(
    export AGENT_STATE_TEST_PG_URI=$(with_mode "$server_uri") \
        AGENT_STATE_TEST_PG_SERVER_URI=$server_uri AGENT_STATE_TEST_PG_EXEC_MODE=cache_statement
    echo "cache-statement.sh: $AGENT_STATE_TEST_PG_URI" >&2
    # The fleet test of schema evolution (10,000 agents) runs once, in test-rust; so do the
    # serve suite's tests of its cost with a thousand agents watched (scale::), which prepared
    # statements do not change.
    "$cargo" test --workspace --test '*' -- ::postgres --skip schema_fleet:: --skip scale::
    "$cargo" test -p agent_state --test postgres
)

dir=$(mktemp -d /tmp/agent-state-bouncer.XXXXXX)
uri=$(bash "$here/bouncer.sh" start "$dir" "$server_dir" "$server_port" session)
echo "cache-statement.sh: PgBouncer (session mode) at $uri" >&2
(
    unset AGENT_STATE_TEST_PG_DIR
    export AGENT_STATE_TEST_PG_URI=$(with_mode "$uri") AGENT_STATE_TEST_PG_POOLER=session \
        AGENT_STATE_TEST_PG_SERVER_URI=$server_uri
    # Left out as in tests/pg/pooler-suites.sh (servers of their own, or counts of the
    # server's own connections and log).
    "$cargo" test -p agent_state --test postgres -- --skip crash:: --skip freeze:: \
        --skip failover:: --skip process:: \
        --skip pool::two_hundred_handles_share_at_most_max_connections \
        --skip pool::round_trips_of_a_write_and_of_a_read_of_a_current_cache
)
bash "$here/bouncer.sh" stop "$dir"
dir=""
echo "cache-statement.sh: the PostgreSQL suites passed with default_query_exec_mode=cache_statement, directly and through PgBouncer in session mode" >&2
