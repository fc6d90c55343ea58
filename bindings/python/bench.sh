#!/usr/bin/env bash
# Benchmark of the Python binding (bench.py) in the binding's virtual environment:
#   bindings/python/bench.sh [--smoke] [--out FILE] [--only fig10|overhead|async|loop-lag|pg-async]...
# bench/run.sh (make bench, make bench-smoke) calls it under tests/pg/with-server.sh: the
# pg-async part (the async binding's throughput) runs against the server at
# AGENT_STATE_TEST_PG_URI, and says it was skipped when that is unset. Needs `make build`
# first; venv.sh creates target/pyvenv and (re)installs the package when the installed copy is
# missing or stale. pytest is not needed here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=venv.sh
. "$here/venv.sh"

# The installed package, with its bundled library (bench.py's directory holds no package).
unset AGENT_STATE_LIBRARY
exec "$VENV/bin/python" "$here/bench.py" "$@"
