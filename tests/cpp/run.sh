#!/usr/bin/env bash
# Builds and runs the C++ wrapper's tests (bindings/cpp/agent_state.hpp and its parts in
# bindings/cpp/agent_state/); `make test-cpp` runs it after building the library.
#
# Three runs of the same tests, all of which must pass:
#   1. plain (-O1 -g), on SQLite and then on PostgreSQL through tests/pg/each-backend.sh
#      (skipped without a server in AGENT_STATE_TEST_PG_URI, a failure under CI=true),
#   2. the plain binary under valgrind (definite and indirect leaks are errors; the Rust std may
#      keep a few "still reachable" blocks, which are fine),
#   3. a build with -fsanitize=address,undefined (set AGENT_CPP_SKIP_ASAN=1 to skip it), on
#      SQLite and then on PostgreSQL as run 1 (a few seconds more).
# The conformance vectors also run on PostgreSQL when AGENT_STATE_TEST_PG_URI is set, and so
# do the public RFC 6902 suite's cases (tests/cpp/json_patch_cases.cpp, made by
# tests/conformance/json_patch/cases.py when ../shared/corpora/json-patch-tests is there; it
# writes target/conformance/json-patch/cpp-BACKEND.txt for compare.py), also under valgrind.
# Valgrind runs on SQLite only, and so does the conformance runner under the sanitizers.
# The last line is "N passed, M failed", N and M summed over the runs.
set -euo pipefail

# Every run below is on SQLite unless it says otherwise.
export AGENT_STATE_TEST_BACKEND=sqlite

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

LIBDIR="$ROOT/target/release"
OUT="$ROOT/target/cpp"
CXX="${CXX:-g++}"
CXXFLAGS=(-std=c++17 -Wall -Wextra -Werror -pedantic -Wshadow -Wconversion -Wsign-conversion
          -Wnon-virtual-dtor -Wold-style-cast -g -I"$ROOT/include" -I"$ROOT/bindings/cpp")
LDFLAGS=(-L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -lagent_state -lpthread)
# The tests: main.cpp runs the TESTs of the other files (harness.hpp); second_tu.cpp is a second
# translation unit including the wrapper (the ODR check). The conformance runner is apart.
SOURCES=()
for src in "$ROOT"/tests/cpp/*.cpp; do
    case $(basename "$src") in
    conformance.cpp | json_patch_cases.cpp) ;;
    *) SOURCES+=("$src") ;;
    esac
done
# The conformance runner (tests/conformance/README.md): C++ on top of the C runners' vector
# reader, which is compiled as C. The tests use its JSON reader too (surface.cpp reads the
# surface description with it).
CC="${CC:-cc}"
JSON_READER_C="$ROOT/tests/conformance/json_reader.c"
CONFORMANCE_C=("$JSON_READER_C" "$ROOT/tests/conformance/vector_text.c")
CONFORMANCE_VECTORS=("$ROOT"/tests/conformance/vectors/*.json)

if [[ ! -f "$LIBDIR/libagent_state.so" ]]; then
    echo "run.sh: $LIBDIR/libagent_state.so is missing; run 'make build' first" >&2
    exit 1
fi
mkdir -p "$OUT"

# The JSON test suite corpus, when present, feeds the Options::initial_state guard test.
CORPUS="$ROOT/../shared/corpora/json-test-suite"
if [[ -d "$CORPUS" ]]; then
    export AGENT_STATE_JSON_CORPUS="$CORPUS"
fi

total_passed=0
total_failed=0

# run LABEL COMMAND...: runs test binaries, echoes their output, adds up their summary lines
# (one per binary run: each-backend.sh runs one per backend).
run() {
    local label="$1"
    shift
    local log="$OUT/$label.log"
    local status=0
    echo "== $label: $*"
    "$@" >"$log" 2>&1 || status=$?
    cat "$log"
    local summaries summary passed=0 failed=0
    summaries="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" || true)"
    if [[ -z "$summaries" ]]; then
        echo "== $label: no summary line (exit status $status)"
        total_failed=$((total_failed + 1))
        return
    fi
    while read -r summary; do
        local p="${summary%% passed*}"
        local f="${summary#*, }"
        f="${f%% failed}"
        passed=$((passed + p))
        failed=$((failed + f))
    done <<<"$summaries"
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
    if [[ $status -ne 0 && $failed -eq 0 ]]; then
        echo "== $label: exit status $status"
        total_failed=$((total_failed + 1))
    fi
}

# build_conformance NAME FLAGS...: compiles the conformance runner into $OUT/NAME (with
# RUNNER=json_patch_cases, the RFC 6902 runner instead).
build_conformance() {
    local name="$1"
    local runner="${RUNNER:-conformance}"
    shift
    local objs=()
    for src in "${CONFORMANCE_C[@]}"; do
        local obj="$OUT/$name-$(basename "$src" .c).o"
        "$CC" -std=c99 -Wall -Wextra -Werror -pedantic -g "$@" -c "$src" -o "$obj"
        objs+=("$obj")
    done
    "$CXX" "${CXXFLAGS[@]}" -I"$ROOT/tests/conformance" "$@" "$ROOT/tests/cpp/$runner.cpp" \
        "${objs[@]}" -o "$OUT/$name" "${LDFLAGS[@]}"
}

# Each part of the wrapper (bindings/cpp/agent_state/*.hpp) compiles on its own, as the first
# include of a translation unit: it includes what it needs.
echo "== each part of bindings/cpp/agent_state/ compiles on its own"
for part in "$ROOT"/bindings/cpp/agent_state/*.hpp; do
    printf '#include "agent_state/%s"\n' "$(basename "$part")" |
        "$CXX" "${CXXFLAGS[@]}" -fsyntax-only -x c++ -
done

echo "== building $OUT/test_cpp"
"$CC" -std=c99 -Wall -Wextra -Werror -pedantic -g -O1 -c "$JSON_READER_C" -o "$OUT/test_cpp-json_reader.o"
"$CXX" "${CXXFLAGS[@]}" -O1 "${SOURCES[@]}" "$OUT/test_cpp-json_reader.o" -o "$OUT/test_cpp" "${LDFLAGS[@]}"
# On SQLite, then on PostgreSQL (tests/pg/each-backend.sh: the tests of SQLite files, paths,
# ":memory:" and SQLite's write lock say they are skipped there).
run plain bash "$ROOT/tests/pg/each-backend.sh" "$OUT/test_cpp"
echo "== building $OUT/conformance_cpp"
build_conformance conformance_cpp -O1
run conformance env AGENT_STATE_TEST_BACKEND=sqlite "$OUT/conformance_cpp" "${CONFORMANCE_VECTORS[@]}"
# The vectors on PostgreSQL too (tests/pg/each-backend.sh's rule: skipped without a server in
# AGENT_STATE_TEST_PG_URI, a failure under CI=true); under valgrind and the sanitizers on SQLite only.
if [[ -n "${AGENT_STATE_TEST_PG_URI:-}" ]]; then
    run conformance-postgres env AGENT_STATE_TEST_BACKEND=postgres "$OUT/conformance_cpp" \
        "${CONFORMANCE_VECTORS[@]}"
elif [[ "${CI:-}" == true ]]; then
    echo "== conformance-postgres: no server (AGENT_STATE_TEST_PG_URI unset): a failure under CI=true"
    total_failed=$((total_failed + 1))
else
    echo "== conformance-postgres: PostgreSQL: skipped (no server)"
fi

echo "== building $OUT/json_patch_cases"
RUNNER=json_patch_cases build_conformance json_patch_cases -O1
JSON_PATCH_CASES="$ROOT/target/conformance/json-patch-cases.json"
JSON_PATCH_RESULTS="$ROOT/target/conformance/json-patch"
if [[ -d "$ROOT/../shared/corpora/json-patch-tests" ]]; then
    python3 "$ROOT/tests/conformance/json_patch/cases.py" "$JSON_PATCH_CASES"
fi
run json-patch bash "$ROOT/tests/pg/each-backend.sh" "$OUT/json_patch_cases" "$JSON_PATCH_CASES" \
    "$JSON_PATCH_RESULTS"

if command -v valgrind >/dev/null 2>&1; then
    # The C suite's suppressions (tests/c/valgrind.supp): each entry says why it is not an error
    # of the library (here: memcheck's conditional-jump report inside rusqlite's bind_parameter).
    supp="--suppressions=$ROOT/tests/c/valgrind.supp"
    run valgrind env AGENT_TEST_QUICK=1 valgrind --quiet --fair-sched=yes --error-exitcode=42 --leak-check=full \
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect "$supp" \
        "$OUT/test_cpp"
    run conformance-valgrind valgrind --quiet --error-exitcode=42 --leak-check=full \
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect "$supp" \
        "$OUT/conformance_cpp" "${CONFORMANCE_VECTORS[@]}"
    run json-patch-valgrind valgrind --quiet --error-exitcode=42 --leak-check=full \
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect "$supp" \
        "$OUT/json_patch_cases" "$JSON_PATCH_CASES" "$JSON_PATCH_RESULTS"
else
    echo "== valgrind: not installed, FAILED to run"
    total_failed=$((total_failed + 1))
fi

if [[ "${AGENT_CPP_SKIP_ASAN:-0}" != 1 ]]; then
    echo "== building $OUT/test_cpp_asan"
    ASAN_FLAGS=(-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)
    "$CC" -std=c99 -Wall -Wextra -Werror -pedantic -g "${ASAN_FLAGS[@]}" -c "$JSON_READER_C" \
        -o "$OUT/test_cpp_asan-json_reader.o"
    "$CXX" "${CXXFLAGS[@]}" "${ASAN_FLAGS[@]}" "${SOURCES[@]}" "$OUT/test_cpp_asan-json_reader.o" \
        -o "$OUT/test_cpp_asan" "${LDFLAGS[@]}"
    run asan env AGENT_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        bash "$ROOT/tests/pg/each-backend.sh" "$OUT/test_cpp_asan"
    echo "== building $OUT/conformance_cpp_asan"
    build_conformance conformance_cpp_asan -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
        -fno-sanitize-recover=undefined
    run conformance-asan env ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$OUT/conformance_cpp_asan" "${CONFORMANCE_VECTORS[@]}"
else
    echo "== asan: skipped (AGENT_CPP_SKIP_ASAN=1)"
fi

echo "$total_passed passed, $total_failed failed"
[[ $total_failed -eq 0 ]]
