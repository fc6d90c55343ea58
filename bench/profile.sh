#!/usr/bin/env bash
# Instructions per call of the write path, by phase, with callgrind (counts, not seconds:
# repeatable whatever else the machine does). Two runs of N and 2N calls; the difference divided
# by N leaves out the setup.
#
#   bash bench/profile.sh set 1024 1000
#   bash bench/profile.sh set 1024 1000 ',"change_log":{"keep_last":1000}'
#   bash bench/profile.sh replace 16384 200
#   bash bench/profile.sh whole 16384 100
#   bash bench/profile.sh open 2 100
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode=${1:?usage: profile.sh set|replace|whole|open SIZE N [EXTRA_OPTIONS]}
size=${2:?size}
n=${3:?calls}
extra=${4:-}
cargo build --release --lib --quiet
mkdir -p target/profile
cc -O2 -Iinclude bench/profile/writes.c -o target/profile/writes \
    -Ltarget/release -Wl,-rpath,"$root/target/release" -lagent_state
phases='PROGRAM TOTALS|agent_state::agent::Agent>::set_state_if |agent_state::agent::Agent>::replace_state_if |agent_state::agent::Agent::open |accept::patch |accept::state |Snapshot::merge_entries|Snapshot::merge |Sqlite::begin_write |entries::<impl agent_state::backends::sqlite::Sqlite>::write_state |Sqlite>::log_change |Sqlite::commit |Hooks::deliver_all |drop_in_place<agent_state::hooks::StateChange> |sqlite3_prepare_v3 |sqlite3_close |agent_state::agent::Agent::close '
run() {
    valgrind --tool=callgrind --callgrind-out-file="target/profile/cg.$1" \
        target/profile/writes "$mode" "$size" "$1" "$extra" >/dev/null 2>&1
    callgrind_annotate --inclusive=yes "target/profile/cg.$1" 2>/dev/null |
        grep -E "$phases" | sed -E 's/^ *([0-9,]+) +\([^)]*\) +(\?\?\?:)?(.*) \[.*/\1 \3/' | tr -d ,
}
declare -A one two
while read -r count name; do one[$name]=$count; done < <(run "$n")
while read -r count name; do two[$name]=$count; done < <(run $((2 * n)))
echo "instructions per call: $mode, $size B, $n calls${extra:+, options $extra}"
for name in "${!two[@]}"; do
    printf '%10d  %s\n' $(( (two[$name] - ${one[$name]:-0}) / n )) "$name"
done | sort -rn | awk '$1 > 0'
