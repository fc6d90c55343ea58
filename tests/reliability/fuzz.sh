#!/usr/bin/env bash
# Runs one cargo-fuzz target for FUZZ_SECONDS (default 120): bash tests/reliability/fuzz.sh
# TARGET [extra seed dir] [-- cargo fuzz options, e.g. --features abi]. New inputs go to
# target/fuzz/corpus/TARGET (the repo's small fuzz/corpus/TARGET seeds the run and is not
# written); crashes, timeouts and leaks go to target/fuzz/artifacts/TARGET. Exits non-zero on a
# finding. Called by run.sh soak.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=$1
shift
seeds=()
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    seeds+=("$1")
    shift
fi
[ "${1:-}" = "--" ] && shift
corpus_dir=target/fuzz/corpus/$target
artifacts=target/fuzz/artifacts/$target
mkdir -p "$corpus_dir" "$artifacts"
exec cargo +nightly fuzz run "$target" "$@" --fuzz-dir fuzz --target-dir target/fuzz \
    "$corpus_dir" "fuzz/corpus/$target" "${seeds[@]}" -- \
    -max_total_time="${FUZZ_SECONDS:-120}" -timeout=15 -artifact_prefix="$artifacts/" \
    -print_final_stats=1
