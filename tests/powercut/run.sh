#!/usr/bin/env bash
# The power-cut test of the SQLite backend (what it models and checks: README.md beside this file).
#
#   bash tests/powercut/run.sh [--cuts N] [--lib PATH] [--mode full|normal|both] [--seed S]
#   bash tests/powercut/run.sh --self-test [--lib PATH]
#
# --cuts N     cuts per mode (default 1000; `make test-powercut`)
# --lib PATH   the libagent_state.so to test (default target/release/libagent_state.so): any
#              build, of any on-disk format; the writer loads it with dlopen, the checker with
#              ctypes, nothing is linked against it
# --mode M     full, normal or both (default both)
# --seed S     the run's seed (default: random, printed; the same seed replays the same cuts)
# --self-test  shows that the test can fail: a shim that drops file syncs under synchronous=full,
#              and a normal store held to full's promise, must both be caught (exit 0 if so)
# Other arguments are passed on to powercut.py (--events, --long-events, --fresh-every,
# --keep-failures, --max-failures, --progress; see its --help).
#
# Needs gcc and Python 3 (its sqlite3 module runs PRAGMA integrity_check). Builds the shim and
# the writer into target/powercut/; scratch stores go to a directory under /dev/shm when there is
# one (removed at exit), failing cuts' files to target/powercut/failures/. Exits non-zero when a
# cut failed. The last lines of each mode are its counts, the line starting with "|" a README
# table row: | mode | cuts | acknowledged writes checked | recoveries | failures |.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
HERE=tests/powercut
OUT=target/powercut
CUTS=1000
LIB=target/release/libagent_state.so
MODES=(full normal)
SEED=
SELF_TEST=false
EXTRA=()

while [ $# -gt 0 ]; do
    case "$1" in
        --cuts) CUTS=$2; shift 2 ;;
        --lib) LIB=$2; shift 2 ;;
        --mode)
            case "$2" in full | normal) MODES=("$2") ;; both) MODES=(full normal) ;;
                *) echo "run.sh: --mode full|normal|both" >&2; exit 2 ;; esac
            shift 2 ;;
        --seed) SEED=$2; shift 2 ;;
        --self-test) SELF_TEST=true; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) EXTRA+=("$1"); shift ;;
    esac
done

if [ ! -f "$LIB" ]; then
    echo "run.sh: no library at $LIB (build it: cargo build --release -p libagent_state)" >&2
    exit 2
fi
LIB=$(realpath "$LIB")
[ -n "$SEED" ] || SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')

mkdir -p "$OUT"
rm -rf "$OUT/failures"
CC=${CC:-cc}
$CC -std=gnu11 -Wall -Wextra -Werror -O2 -fPIC -shared "$HERE/shim.c" -o "$OUT/shim.so" -ldl -lpthread
$CC -std=gnu11 -Wall -Wextra -Werror -O2 -Iinclude "$HERE/writer.c" -o "$OUT/writer" -ldl

if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    WORK=$(mktemp -d /dev/shm/agent-powercut.XXXXXX)
else
    WORK=$(mktemp -d "$ROOT/$OUT/work.XXXXXX")
fi
trap 'rm -rf "$WORK"' EXIT

run_mode() { # MODE [ARGS...]
    local mode=$1
    shift
    python3 "$HERE/powercut.py" --lib "$LIB" --writer "$OUT/writer" --shim "$OUT/shim.so" \
        --mode "$mode" --seed "$SEED" --work "$WORK/$mode" --failures-dir "$OUT/failures" "$@"
}

if $SELF_TEST; then
    # Each must fail some cut: --expect-failures turns "caught" into exit 0.
    status=0
    echo "=== self-test 1: synchronous=full, and a shim that drops file syncs (a disk losing synced data)"
    run_mode full --cuts 60 --sabotage drop-sync --expect-failures --keep-failures 0 \
        ${EXTRA[@]+"${EXTRA[@]}"} | grep -v '^FAIL' || status=1
    echo "=== self-test 2: synchronous=normal held to full's promise (every acknowledged write durable)"
    run_mode normal --cuts 200 --expect-full --expect-failures --keep-failures 0 \
        ${EXTRA[@]+"${EXTRA[@]}"} | grep -v '^FAIL' || status=1
    exit $status
fi

status=0
for mode in "${MODES[@]}"; do
    echo "=== power cuts, synchronous=$mode"
    run_mode "$mode" --cuts "$CUTS" --progress 250 ${EXTRA[@]+"${EXTRA[@]}"} | tee "$WORK/$mode.out" || status=1
done
echo "=== power cuts of libagent_state $(sed -n 's/^powercut [a-z]*: library \([^ ]*\) .*/\1/p' "$WORK/${MODES[0]}.out" | head -n 1) ($LIB), seed $SEED"
echo "| synchronous | cuts | acknowledged writes checked | recoveries | failures |"
echo "|---|---:|---:|---:|---:|"
for mode in "${MODES[@]}"; do sed -n 's/^  \(| [a-z]* | .*\)/\1/p' "$WORK/$mode.out"; done
[ $status -eq 0 ] && echo "power cuts: no failures" || echo "power cuts: FAILED (files of failing cuts: $OUT/failures/)"
exit $status
