#!/usr/bin/env bash
# The measurements behind .cargo/config.toml's LIBSQLITE3_FLAGS (a write-cost target: "compile
# the bundled SQLite for this job, each flag justified by a measurement"). Builds
# libagent_state.so once per set of flags (in its own CARGO_TARGET_DIR, target/sqlite-flags, so
# that the everyday builds in target/ are not invalidated), then runs round.c's cases against
# every build in alternating rounds (the starting build rotating) and prints each build's median
# per case, and the ratio to the first build. With --strace, also counts the fsync and fdatasync
# calls of 200 set_state calls at synchronous full for each build (strace must be installed).
#
#   bash bench/sqlite_flags/run.sh [--rounds N] [--strace] NAME='FLAGS' NAME='FLAGS' ...
#
# e.g. bash bench/sqlite_flags/run.sh base='' fdatasync='-DHAVE_FDATASYNC=1'
# The store files live in $BENCH_DIR (default: a new directory under target/, on disk). Each
# round's operation counts: OPS_FULL (default 300), OPS_NORMAL (5000), OPS_GET (1000000).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rounds=9
with_strace=0
variants=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --strace) with_strace=1; shift ;;
        *=*) variants+=("$1"); shift ;;
        *) echo "usage: run.sh [--rounds N] [--strace] NAME='FLAGS' ..." >&2; exit 2 ;;
    esac
done
[[ ${#variants[@]} -ge 1 ]] || { echo "run.sh: name at least one build, NAME='FLAGS'" >&2; exit 2; }

work="$root/target/sqlite-flags"
mkdir -p "$work/variants"
export CARGO_TARGET_DIR="$work/cargo"
# Every build from one snapshot of the sources (the committed tree, `git archive HEAD`), so that
# the builds differ by their flags only, whatever is edited in the working tree meanwhile.
src="$work/src"
head="$(git -C "$root" rev-parse HEAD)"
if [[ "$(cat "$work/src.commit" 2>/dev/null)" != "$head" ]]; then
    rm -rf "$src" "$work"/variants/*
    mkdir -p "$src"
    git -C "$root" archive --format=tar HEAD | tar -x -C "$src"
    printf '%s' "$head" >"$work/src.commit"
fi
names=()
for v in "${variants[@]}"; do
    name="${v%%=*}"
    flags="${v#*=}"
    names+=("$name")
    lib="$work/variants/$name.so"
    if [[ -f "$lib" && "$(cat "$work/variants/$name.flags" 2>/dev/null)" == "$flags" ]]; then
        echo "run.sh: $name: built already ($flags)" >&2
        continue
    fi
    echo "run.sh: building $name: LIBSQLITE3_FLAGS='$flags'" >&2
    # Set, even when empty: the environment overrides .cargo/config.toml's [env].
    LIBSQLITE3_FLAGS="$flags" cargo build --release -p libagent_state --manifest-path "$src/Cargo.toml" >&2
    cp "$CARGO_TARGET_DIR/release/libagent_state.so" "$lib"
    printf '%s' "$flags" >"$work/variants/$name.flags"
done

cc -std=c99 -O2 -Wall -Wextra -Werror -o "$work/round" "$here/round.c" -ldl
bench_dir="${BENCH_DIR:-$(mktemp -d "$root/target/sqlite-flags/stores.XXXXXX")}"
results="$work/results.txt"
: >"$results"
for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ${#names[@]}; k++)); do
        name="${names[$(((r + k) % ${#names[@]}))]}"
        # Each build keeps its stores from round to round: the WAL reaches its steady state
        # (checkpointed and reused, its size no longer changing: where fdatasync can skip the
        # inode's update), and round 0, which starts from empty files, is not counted.
        d="$bench_dir/$name"
        mkdir -p "$d"
        "$work/round" "$work/variants/$name.so" "$d" "${OPS_FULL:-300}" "${OPS_NORMAL:-5000}" "${OPS_GET:-1000000}" | sed "s/^/$r $name /" >>"$results"
    done
done

if [[ $with_strace == 1 ]]; then
    for name in "${names[@]}"; do
        d="$bench_dir/strace-$name"
        rm -rf "$d"
        mkdir -p "$d"
        # 200 writes at full (and 5 of warm-up), no other case: OPS_NORMAL/OPS_GET at 1.
        strace -f -c -e trace=fsync,fdatasync -o "$d.strace" "$work/round" "$work/variants/$name.so" "$d" 200 1 1 >/dev/null
        echo "strace, $name, 205 set_state at full + opening: $(awk '$NF ~ /^(fsync|fdatasync)$/ {printf "%s %s calls; ", $NF, $4}' "$d.strace")"
    done
fi
rm -rf "$bench_dir"

python3 - "$results" "${names[@]}" <<'PY'
import statistics, sys
path, names = sys.argv[1], sys.argv[2:]
figures = {}
paired = {}
for line in open(path):
    r, name, case, ns = line.split()
    if r == "0":
        continue
    figures.setdefault(case, {}).setdefault(name, []).append(float(ns))
    paired.setdefault(case, {}).setdefault(r, {})[name] = float(ns)
print("| case | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for case, by in figures.items():
    cells = []
    for n in names:
        m = statistics.median(by[n])
        q = statistics.quantiles(by[n], n=4)
        spread = "IQR %.0f–%.0f" % (q[0], q[2])
        if n == names[0]:
            cells.append("%.1f ns (%s)" % (m, spread))
            continue
        # Paired: the first build's time over this one's in the same round, then the median
        # of those ratios, with their interquartile range.
        ratios = [p[names[0]] / p[n] for p in paired[case].values()]
        rq = statistics.quantiles(ratios, n=4)
        cells.append("%.1f ns (%s); paired %.3f× (IQR %.3f–%.3f)"
                     % (m, spread, statistics.median(ratios), rq[0], rq[2]))
    print("| %s | %s |" % (case, " | ".join(cells)))
print("\nmedian of %d rounds per build (after round 0); paired: the median over the rounds of the first build's time / this build's in the same round (above 1: faster); IQR: interquartile range"
      % len(figures[next(iter(figures))][names[0]]))
PY
