#!/usr/bin/env bash
# Runs a test command once per storage backend: `each-backend.sh CMD ARGS...` runs CMD with
# AGENT_STATE_TEST_BACKEND=sqlite, then with AGENT_STATE_TEST_BACKEND=postgres against the
# server in AGENT_STATE_TEST_PG_URI (tests/pg/with-server.sh sets it; `make test` runs the
# suites inside it). The suites read AGENT_STATE_TEST_BACKEND to choose where their stores
# live (tests/conformance/README.md, "Where the stores live").
#
# Without AGENT_STATE_TEST_PG_URI the PostgreSQL run is skipped, with a line saying so; under
# CI=true that is a failure. AGENT_STATE_TEST_BACKENDS (default "sqlite postgres") picks the
# runs, e.g. AGENT_STATE_TEST_BACKENDS=postgres for the PostgreSQL run alone.
# Both runs happen even when the first fails; the exit status is non-zero if either failed.
set -uo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: each-backend.sh CMD [ARGS...]" >&2
    exit 2
fi

failed=()
for backend in ${AGENT_STATE_TEST_BACKENDS:-sqlite postgres}; do
    case $backend in
    sqlite) label=SQLite ;;
    postgres)
        label=PostgreSQL
        if [[ -z ${AGENT_STATE_TEST_PG_URI:-} ]]; then
            if [[ ${CI:-} == true ]]; then
                echo "== PostgreSQL: no server (AGENT_STATE_TEST_PG_URI unset): a failure under CI=true" >&2
                failed+=("$label (no server)")
            else
                echo "== PostgreSQL: skipped (no server): $*"
            fi
            continue
        fi
        ;;
    *)
        echo "each-backend.sh: unknown backend '$backend' in AGENT_STATE_TEST_BACKENDS" >&2
        exit 2
        ;;
    esac
    echo "== $label: $*"
    if ! AGENT_STATE_TEST_BACKEND=$backend "$@"; then
        echo "== $label: FAILED: $*"
        failed+=("$label")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "each-backend.sh: failed on ${failed[*]}: $*" >&2
    exit 1
fi
