#!/usr/bin/env bash
# make test-pooler: the PostgreSQL variants of the workspace's tests (#[each_backend] declares
# each as NAME::sqlite and NAME::postgres: a test-name filter picks them, whichever file they
# are in) and the PostgreSQL backend's tests of its semantics, through PgBouncer
# (tests/pg/bouncer.sh) in front of the test server, in transaction mode and then in session
# mode. The server is the one tests/pg/with-server.sh started (AGENT_STATE_TEST_PG_DIR, its Unix
# socket's directory); each bouncer is stopped when its run ends, also on failure or interrupt.
# Without such a server the run is skipped with a notice, except under CI=true, where that is a
# failure. Then the Node binding, through the same pooler (tests/pg/pooler-node.js).
#
# Left out of the backend's tests (crates/agent_state/tests/postgres): crash::, freeze:: and
# failover:: (they start and stop servers of their own, never through the pooler), process:: (it
# finds its connections' server processes by application_name), pool::two_hundred_..
# (it counts the server's connections of this process: behind a pooler those are the
# pooler's), pool::round_trips_.. (it counts statements in the log of one server backend: behind
# a pooler they spread over its server connections).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cargo=${CARGO:-cargo}

if [[ -z ${AGENT_STATE_TEST_PG_DIR:-} || -z ${AGENT_STATE_TEST_PG_URI:-} ]]; then
    if [[ ${CI:-} == true ]]; then
        echo "pooler-suites.sh: no test server (AGENT_STATE_TEST_PG_DIR) under CI=true" >&2
        exit 1
    fi
    echo "pooler-suites.sh: skipped: no test server of tests/pg/with-server.sh (AGENT_STATE_TEST_PG_DIR unset)" >&2
    exit 0
fi
server_uri=$AGENT_STATE_TEST_PG_URI
server_dir=$AGENT_STATE_TEST_PG_DIR
server_port=${AGENT_STATE_PG_PORT:-5432}

dir=""
cleanup() { if [[ -n $dir ]]; then bash "$here/bouncer.sh" stop "$dir"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

bash "$here/../../bindings/node/build.sh" >/dev/null
for mode in transaction session; do
    dir=$(mktemp -d /tmp/agent-state-bouncer.XXXXXX)
    uri=$(bash "$here/bouncer.sh" start "$dir" "$server_dir" "$server_port" "$mode")
    echo "pooler-suites.sh: PgBouncer ($mode mode) at $uri" >&2
    (
        unset AGENT_STATE_TEST_PG_DIR
        export AGENT_STATE_TEST_PG_URI=$uri AGENT_STATE_TEST_PG_POOLER=$mode \
            AGENT_STATE_TEST_PG_SERVER_URI=$server_uri
        # The fleet test of schema evolution (10,000 agents, a minute or two against the
        # server) runs once, in test-rust: through the pooler it repeats the same statements.
        # So do the serve suite's tests of its cost with a thousand agents watched (scale::)
        # in session mode, where the server watches as it does directly; in transaction mode
        # they run, since the server's watch polls there.
        skip_scale=()
        if [[ $mode == session ]]; then skip_scale=(--skip scale::); fi
        "$cargo" test --workspace --test '*' -- ::postgres --skip schema_fleet:: "${skip_scale[@]}"
        "$cargo" test -p agent_state --test postgres -- --skip crash:: --skip freeze:: \
            --skip failover:: --skip process:: \
            --skip pool::two_hundred_handles_share_at_most_max_connections \
            --skip pool::round_trips_of_a_write_and_of_a_read_of_a_current_cache
        node "$here/pooler-node.js"
    )
    bash "$here/bouncer.sh" stop "$dir"
    dir=""
done
echo "pooler-suites.sh: every suite passed through PgBouncer, in transaction and in session mode" >&2
