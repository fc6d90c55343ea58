#!/usr/bin/env bash
# The reliability and security suite of agent_state (what each test proves: README.md beside
# this file).
#
#   bash tests/reliability/run.sh quick   # `make test-reliability`, part of `make test` (~1-2 min)
#   bash tests/reliability/run.sh soak    # `make soak`: the long versions; prints the counts
#
# Needs target/release/libagent_state.so (`make build`), gcc, valgrind; soak also needs nightly
# Rust, and installs cargo-fuzz when it is missing. Everything built or written goes under
# target/reliability/ (and target/fuzz*, target/asan). Exits non-zero when anything failed; the
# last line is "N passed, M failed[, K skipped]".
#
# Environment: CI=true turns a missing JSONTestSuite corpus or C suite into a failure instead of a
# skip. RELIABILITY_SEED fixes the random seeds. Soak knobs: CRASH_KILLS (1200),
# SOAK_PROCS/SOAK_THREADS/SOAK_PATCHES (8/4/5000), FORK_ROUNDS (100), FUZZ_SECONDS per target (120),
# ABI_STEPS (400000), CAS_PROCS/CAS_TARGET (8/500), PG_SERVER_KILLS (30), PG_HANDLES (10000).
#
# PostgreSQL: the programs that can run there (crash, concurrency, cas, pg_handles, pg_server)
# also run against the server whose URI is in AGENT_STATE_TEST_PG_URI (`make test` and
# `make soak` run inside tests/pg/with-server.sh, which sets it); the server-kill test starts a
# server of its own (port PG_SERVER_PORT, 5544). Without a URI those checks are skipped with a
# notice (a failure under CI=true). RELIABILITY_ONLY_PG=1 runs only them.
set -uo pipefail

MODE=${1:-quick}
case "$MODE" in quick | soak) ;; *) echo "usage: $0 quick|soak" >&2; exit 2 ;; esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
HERE=tests/reliability
OUT=target/reliability
BIN=$OUT/bin
ASAN_BIN=$OUT/asan
LOGS=$OUT/logs
LIBDIR=target/release
export RELIABILITY_MODE=$MODE
export RELIABILITY_TMP=$ROOT/$OUT/tmp
CORPUS=${AGENT_JSON_CORPUS:-$ROOT/../shared/corpora/json-test-suite}
IS_CI=false
case "${CI:-}" in true | 1 | yes) IS_CI=true ;; esac

rm -rf "$RELIABILITY_TMP" "$LOGS"
mkdir -p "$BIN" "$ASAN_BIN" "$LOGS" "$RELIABILITY_TMP"

PASSED=0
FAILED=0
SKIPPED=0
FAILED_NAMES=()
SUMMARY=$LOGS/summary.txt
: >"$SUMMARY"

say() { printf '%s\n' "$*"; }

# run NAME TIMEOUT_SECONDS COMMAND...: runs a test, logs its output, counts it.
run() {
    local name=$1 limit=$2
    shift 2
    local log=$LOGS/$name.log start end rc
    say "=== $name"
    start=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    end=$(date +%s)
    # Show what the test printed, but keep the console short.
    if [ $rc -eq 0 ]; then
        grep -v '^ok ' "$log" | tail -n 25
        say "ok   $name ($((end - start)) s)"
        PASSED=$((PASSED + 1))
    else
        tail -n 60 "$log"
        [ $rc -eq 124 ] && say "(timed out after $limit s)"
        say "FAIL $name (exit $rc, $((end - start)) s; full log: $log)"
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
    fi
    return 0
}

skip() {
    say "=== $1"
    say "SKIP $1: $2"
    SKIPPED=$((SKIPPED + 1))
}

fail_now() {
    say "=== $1"
    say "FAIL $1: $2"
    FAILED=$((FAILED + 1))
    FAILED_NAMES+=("$1")
}

# ---- build ----------------------------------------------------------------------------------

if [ ! -f "$LIBDIR/libagent_state.so" ]; then
    say "building the release library (cargo build --release --lib)"
    cargo build --release --lib || { fail_now build "cargo build failed"; }
fi

CC=${CC:-gcc}
CFLAGS=(-std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -O1 -g -Iinclude)
LDFLAGS=(-L"$LIBDIR" -Wl,-rpath,"$ROOT/$LIBDIR" -lagent_state -lpthread)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
PROGRAMS=(crash concurrency fork hostile_json faults access abi_random cas pg_handles pg_server)

build_ok=true
for p in "${PROGRAMS[@]}"; do
    if ! "$CC" "${CFLAGS[@]}" "$HERE/$p.c" -o "$BIN/$p" "${LDFLAGS[@]}" >"$LOGS/build-$p.log" 2>&1 ||
        ! "$CC" "${CFLAGS[@]}" "${SAN[@]}" "$HERE/$p.c" -o "$ASAN_BIN/$p" "${LDFLAGS[@]}" >>"$LOGS/build-$p.log" 2>&1; then
        cat "$LOGS/build-$p.log"
        fail_now "build-$p" "does not compile"
        build_ok=false
    fi
done
$build_ok && say "built ${PROGRAMS[*]} (plain and ASan+UBSan) into $BIN and $ASAN_BIN"

# ASan/UBSan: the executable is linked with -fsanitize, so the runtime comes first and intercepts
# malloc/free for the (uninstrumented) Rust library too; no LD_PRELOAD is needed. LeakSanitizer
# is on. Any UBSan report aborts (-fno-sanitize-recover=all).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
VALGRIND=(valgrind --quiet --fair-sched=yes --error-exitcode=42 --leak-check=full
    --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible
    --suppressions="$HERE/valgrind.supp")

have_corpus=false
if [ -d "$CORPUS" ] && ls "$CORPUS"/n_*.json >/dev/null 2>&1; then
    have_corpus=true
fi

# RELIABILITY_ONLY_PG=1: only the PostgreSQL section (8), e.g. to measure its soak counts.
ONLY_PG=false
[ -n "${RELIABILITY_ONLY_PG:-}" ] && [ "${RELIABILITY_ONLY_PG}" != 0 ] && ONLY_PG=true
if ! $ONLY_PG; then

# ---- 1. crash safety ----------------------------------------------------------------------------

if [ "$MODE" = quick ]; then
    run crash 120 "$BIN/crash" 100
else
    run crash 3600 "$BIN/crash" "${CRASH_KILLS:-1200}"
fi

# ---- 2. no lost updates -------------------------------------------------------------------------

if [ "$MODE" = quick ]; then
    run lost-updates 120 "$BIN/concurrency" 4 4 500
    run lost-updates-hooks 120 "$BIN/concurrency" 4 4 500 hooks
else
    run lost-updates 3600 "$BIN/concurrency" "${SOAK_PROCS:-8}" "${SOAK_THREADS:-4}" 1000
    run lost-updates-hooks 7200 "$BIN/concurrency" "${SOAK_PROCS:-8}" "${SOAK_THREADS:-4}" "${SOAK_PATCHES:-5000}" hooks
fi

# Compare-and-set counters across processes: final counter == successes.
if [ "$MODE" = quick ]; then
    run cas 120 "$BIN/cas" 4 50
else
    run cas 3600 "$BIN/cas" "${CAS_PROCS:-8}" "${CAS_TARGET:-500}"
fi

# ---- 2b. fork safety: handles inherited across fork() --------------------------------------------

if [ "$MODE" = quick ]; then
    run fork 120 "$BIN/fork" 3 3 150
else
    run fork 3600 "$BIN/fork" "${FORK_ROUNDS:-100}" 3 150
fi

# ---- 3. hostile JSON ----------------------------------------------------------------------------

if $have_corpus; then
    run hostile-json 300 "$BIN/hostile_json" "$CORPUS" "$OUT/i_results.tsv"
else
    if $IS_CI; then
        fail_now hostile-json-corpus "the JSONTestSuite corpus is missing at $CORPUS (CI=true: a missing corpus is a failure)"
    else
        skip hostile-json-corpus "no JSONTestSuite corpus at $CORPUS (../shared is absent in a user's own clone); set AGENT_JSON_CORPUS to run it"
    fi
    run hostile-json-limits 300 "$BIN/hostile_json" - "$OUT/i_results.tsv"
fi

# ---- 4. fuzzing ---------------------------------------------------------------------------------

# Quick: every stored corpus input of the pure targets (and the JSONTestSuite files) replayed
# through the same checks on stable, no fuzzer; plus a seeded random ABI sequence in C.
FUZZ_EXTRA=""
$have_corpus && FUZZ_EXTRA=$CORPUS
run fuzz-corpus-replay 600 env AGENT_FUZZ_EXTRA_JSON="$FUZZ_EXTRA" CARGO_BUILD_JOBS=2 \
    cargo test --no-default-features --manifest-path fuzz/Cargo.toml --target-dir target/fuzz-replay \
    --test replay -- --nocapture
if [ "$MODE" = quick ]; then
    run abi-random 120 "$BIN/abi_random" 20000 "${RELIABILITY_SEED:-$(date +%s)}"
else
    run abi-random 3600 "$BIN/abi_random" "${ABI_STEPS:-400000}" "${RELIABILITY_SEED:-$(date +%s)}"
fi

if [ "$MODE" = soak ]; then
    if ! command -v cargo-fuzz >/dev/null 2>&1; then
        say "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
        cargo install cargo-fuzz --locked >"$LOGS/install-cargo-fuzz.log" 2>&1 ||
            { tail -20 "$LOGS/install-cargo-fuzz.log"; fail_now install-cargo-fuzz "cargo install cargo-fuzz failed"; }
    fi
    if command -v cargo-fuzz >/dev/null 2>&1; then
        rm -rf target/fuzz/artifacts # the counts below are this run's findings
        # The parser target also starts from the JSONTestSuite files.
        json_seeds=()
        $have_corpus && json_seeds=("$CORPUS")
        run fuzz-json_codec 3600 bash "$HERE/fuzz.sh" json_codec "${json_seeds[@]}"
        run fuzz-merge 3600 bash "$HERE/fuzz.sh" merge
        # Builds the whole library with the bundled SQLite under the fuzzer's instrumentation:
        # minutes the first time.
        run fuzz-abi_sequence 5400 bash "$HERE/fuzz.sh" abi_sequence -- --features abi
    fi
fi

# ---- 5. resource faults, 7. access --------------------------------------------------------------

run faults 300 "$BIN/faults"
run access 120 "$BIN/access"

# ---- 6. memory safety ---------------------------------------------------------------------------

# The reliability programs themselves under ASan+UBSan.
run asan-abi-random 300 "$ASAN_BIN/abi_random" 5000 1
run asan-faults 300 "$ASAN_BIN/faults"
run asan-access 300 "$ASAN_BIN/access"
run asan-crash 300 "$ASAN_BIN/crash" 10
run asan-lost-updates-hooks 300 "$ASAN_BIN/concurrency" 2 2 50 hooks
if [ "$MODE" = quick ]; then
    run asan-fork 300 "$ASAN_BIN/fork" 1 3 60
else
    run asan-fork 3600 "$ASAN_BIN/fork" 20 3 150
fi
if $have_corpus; then
    run asan-hostile-json 300 "$ASAN_BIN/hostile_json" "$CORPUS" "$OUT/i_results.asan.tsv"
else
    run asan-hostile-json 300 "$ASAN_BIN/hostile_json" - "$OUT/i_results.asan.tsv"
fi
# ... and under valgrind (memcheck: errors and leaks).
run valgrind-abi-random 600 "${VALGRIND[@]}" "$BIN/abi_random" 1500 1
run valgrind-access 600 "${VALGRIND[@]}" "$BIN/access"
if [ "$MODE" = quick ]; then
    run valgrind-fork 600 "${VALGRIND[@]}" "$BIN/fork" 1 2 30 always-close
else
    run valgrind-fork 3600 "${VALGRIND[@]}" "$BIN/fork" 5 3 150 always-close
fi

# The project's C test suite (tests/c) under ASan+UBSan; in soak also its full run under valgrind
# (`make test-valgrind` runs the quick one in `make test`). Its sources are every .c file of
# tests/c; main.c runs the tests of the others.
C_SUITE=tests/c/main.c
if [ -f "$C_SUITE" ]; then
    C_SUITE_SRC=(tests/c/*.c)
    if "$CC" -std=c99 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude "${SAN[@]}" "${C_SUITE_SRC[@]}" \
        -o "$ASAN_BIN/test_c" "${LDFLAGS[@]}" >"$LOGS/build-test_c.log" 2>&1; then
        if [ "$MODE" = quick ]; then
            run asan-c-suite 600 env AGENT_TEST_QUICK=1 "$ASAN_BIN/test_c"
        else
            run asan-c-suite 3600 "$ASAN_BIN/test_c"
            if "$CC" -std=c99 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude "${C_SUITE_SRC[@]}" \
                -o "$BIN/test_c" "${LDFLAGS[@]}" >>"$LOGS/build-test_c.log" 2>&1; then
                supp=(--suppressions="$HERE/valgrind.supp")
                [ -f tests/c/valgrind.supp ] && supp+=(--suppressions=tests/c/valgrind.supp)
                run valgrind-c-suite 7200 "${VALGRIND[@]}" "${supp[@]}" "$BIN/test_c"
            else
                cat "$LOGS/build-test_c.log"
                fail_now valgrind-c-suite "the C suite (tests/c) does not compile"
            fi
        fi
    else
        cat "$LOGS/build-test_c.log"
        fail_now asan-c-suite "the C suite (tests/c) does not compile with -fsanitize=address,undefined"
    fi
elif $IS_CI; then
    fail_now asan-c-suite "$C_SUITE is missing"
else
    skip asan-c-suite "$C_SUITE is missing"
fi

# The Rust tests under nightly's AddressSanitizer: rebuilds the bundled SQLite (minutes), so soak
# only.
if [ "$MODE" = soak ]; then
    run asan-rust-tests 5400 env RUSTFLAGS=-Zsanitizer=address RUSTDOCFLAGS=-Zsanitizer=address \
        ASAN_OPTIONS=detect_leaks=1 CARGO_BUILD_JOBS=2 \
        cargo +nightly test --target x86_64-unknown-linux-gnu --target-dir target/asan --lib --tests
fi

fi # ! $ONLY_PG

# ---- 8. PostgreSQL -------------------------------------------------------------------------------

# The same programs against one fresh agent each of the test server (AGENT_STATE_RELIABILITY_STORE),
# the server killed and restarted under load on a server of its own, and 10,000 handles.
PG_URI=${AGENT_STATE_TEST_PG_URI:-}
if [ -z "$PG_URI" ]; then
    if $IS_CI; then
        fail_now postgresql "AGENT_STATE_TEST_PG_URI is not set (CI=true: run under tests/pg/with-server.sh, as make test does)"
    else
        skip postgresql "AGENT_STATE_TEST_PG_URI is not set: the PostgreSQL checks are skipped (run under tests/pg/with-server.sh, as make test does)"
    fi
else
    PG=(env AGENT_STATE_RELIABILITY_STORE="$PG_URI")
    # pg_server: every second round freezes the server (SIGSTOP) instead of killing it; the
    # calls must give up by their own clock (README.md, Findings 6). PG_SERVER_FREEZE=0: kills only.
    export PG_SERVER_FREEZE=${PG_SERVER_FREEZE:-1}
    if [ "$MODE" = quick ]; then
        run pg-lost-updates 120 "${PG[@]}" "$BIN/concurrency" 4 4 200
        run pg-lost-updates-hooks 120 "${PG[@]}" "$BIN/concurrency" 2 2 200 hooks
        run pg-cas 120 "${PG[@]}" "$BIN/cas" 4 50
        run pg-crash 120 "${PG[@]}" "$BIN/crash" 50
        run pg-handles 300 "${PG[@]}" "$BIN/pg_handles" "${PG_HANDLES:-10000}" 4
        run pg-server 300 bash "$HERE/pg_server.sh" "$BIN/pg_server" "${PG_SERVER_KILLS:-3}"
        run asan-pg-crash 300 "${PG[@]}" "$ASAN_BIN/crash" 10
        run asan-pg-lost-updates-hooks 300 "${PG[@]}" "$ASAN_BIN/concurrency" 2 2 50 hooks
        run asan-pg-cas 300 "${PG[@]}" "$ASAN_BIN/cas" 2 20
    else
        run pg-lost-updates 3600 "${PG[@]}" "$BIN/concurrency" "${SOAK_PROCS:-8}" "${SOAK_THREADS:-4}" 1000
        run pg-lost-updates-hooks 7200 "${PG[@]}" "$BIN/concurrency" "${SOAK_PROCS:-8}" "${SOAK_THREADS:-4}" "${SOAK_PATCHES:-5000}" hooks
        run pg-cas 3600 "${PG[@]}" "$BIN/cas" "${CAS_PROCS:-8}" "${CAS_TARGET:-500}"
        run pg-crash 3600 "${PG[@]}" "$BIN/crash" "${CRASH_KILLS:-1200}"
        run pg-handles 1800 "${PG[@]}" "$BIN/pg_handles" "${PG_HANDLES:-10000}" 4
        run pg-server 3600 bash "$HERE/pg_server.sh" "$BIN/pg_server" "${PG_SERVER_KILLS:-30}" 3 3
        run asan-pg-crash 600 "${PG[@]}" "$ASAN_BIN/crash" 50
        run asan-pg-lost-updates-hooks 600 "${PG[@]}" "$ASAN_BIN/concurrency" 2 2 200 hooks
        run asan-pg-cas 600 "${PG[@]}" "$ASAN_BIN/cas" 4 50
        run asan-pg-handles 600 "${PG[@]}" "$ASAN_BIN/pg_handles" 2000 4
        run asan-pg-server 900 bash "$HERE/pg_server.sh" "$ASAN_BIN/pg_server" 4
    fi
fi

# ---- counts -------------------------------------------------------------------------------------

{
    say "reliability $MODE run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    for t in crash lost-updates lost-updates-hooks fork asan-fork valgrind-fork hostile-json \
        hostile-json-limits abi-random; do
        [ -f "$LOGS/$t.log" ] || continue
        grep -h -E '^(crash|concurrency|fork|hostile-json[a-z ]*|abi-random): .*(=|files)' "$LOGS/$t.log" |
            sed "s/^fork:/$t:/"
    done
    for t in cas pg-lost-updates pg-lost-updates-hooks pg-cas pg-crash pg-handles pg-server; do
        [ -f "$LOGS/$t.log" ] || continue
        grep -h -E '^(crash|concurrency|cas|pg-handles|pg-server): .*=' "$LOGS/$t.log" | sed -E "s/^[a-z-]+:/$t:/"
    done
    for t in json_codec merge abi_sequence; do
        f=$LOGS/fuzz-$t.log
        [ -f "$f" ] || continue
        execs=$(grep -h 'stat::number_of_executed_units' "$f" | awk '{s+=$2} END {print s+0}')
        crashes=$(ls target/fuzz/artifacts/$t 2>/dev/null | grep -c -E '^(crash|leak|timeout|oom)-' || true)
        say "fuzz $t: execs=$execs crash_artifacts=$crashes"
    done
    for t in asan-c-suite valgrind-c-suite asan-rust-tests; do
        [ -f "$LOGS/$t.log" ] || continue
        grep -h -E '^test result:|^[0-9]+ passed, [0-9]+ failed' "$LOGS/$t.log" | sed "s/^/$t: /"
    done
} >"$SUMMARY"
say ""
say "---- counts ($SUMMARY)"
cat "$SUMMARY"
if [ ${#FAILED_NAMES[@]} -gt 0 ]; then
    say "failed: ${FAILED_NAMES[*]}"
fi
if [ $SKIPPED -gt 0 ]; then
    say "$PASSED passed, $FAILED failed, $SKIPPED skipped"
else
    say "$PASSED passed, $FAILED failed"
fi
[ $FAILED -eq 0 ]
