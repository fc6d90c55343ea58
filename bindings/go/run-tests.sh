#!/usr/bin/env bash
# Tests of the Go binding (make test-go): go vet and go test -race over package agentstate (on
# SQLite, then on PostgreSQL when AGENT_STATE_TEST_PG_URI is set),
# linked against the checkout's build (goenv.sh sets -tags=agentstate_inrepo; the package's
# default, an installed library found with pkg-config, is tested by tests/install/run.sh).
# Works on a fresh machine: installs Go from the system packages when it is missing, builds the
# C library when it is not built yet, and keeps every Go cache under target/go.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

# shellcheck source=goenv.sh
. "$here/goenv.sh"

if [ ! -f "$root/target/release/libagent_state.so" ] || [ ! -f "$root/target/release/libagent_state.a" ]; then
    echo "run-tests.sh: building the C library" >&2
    (cd "$root" && cargo build --release --lib)
fi

# Every run is on SQLite but the last (backend_test.go says how the tests choose).
export AGENT_STATE_TEST_BACKEND=sqlite

cd "$here"
go version
echo "+ gofmt -l ."
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
    echo "run-tests.sh: not gofmt-formatted: $unformatted" >&2
    exit 1
fi
echo "+ go vet ./...  (GOFLAGS=$GOFLAGS)"
go vet ./...
echo "+ go vet -tags agentstate_static ./..."
go vet -tags agentstate_static ./...
echo "+ go test -race -count=1 ./...  (SQLite)"
go test -race -count=1 -timeout 170s ./...
# The codec against encoding/json on generated input (codec_fuzz_test.go; the seed corpus in
# testdata/fuzz runs in every go test): a short fuzzing run, so that make test explores a little.
echo "+ go test -run '^\$' -fuzz '^FuzzCodecAgainstEncodingJSON\$' -fuzztime 10s"
go test -count=1 -run '^$' -fuzz '^FuzzCodecAgainstEncodingJSON$' -fuzztime 10s .
# Static linking (libagent_state.a) builds and runs too; a short run, without -race.
echo "+ go test -tags agentstate_static -count=1 -run 'TestVersion|TestLinkMode|Example' ./..."
go test -tags agentstate_static -count=1 -run 'TestVersion|TestLinkMode|Example' ./...
# The package's tests again on PostgreSQL (backend_test.go), when AGENT_STATE_TEST_PG_URI names
# a server: tests/pg/each-backend.sh skips the run without one (a failure under CI=true).
echo "+ go test -race -count=1 .  (PostgreSQL)"
AGENT_STATE_TEST_BACKENDS=postgres bash "$root/tests/pg/each-backend.sh" \
    go test -race -count=1 -timeout 170s .
echo "run-tests.sh: Go binding tests passed"
