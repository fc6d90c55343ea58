# Sourced by the install tests (run.sh, wheel.sh, node.sh): their counters and check helpers.
# The sourcing script sets $tmp (a scratch directory) first, and calls `finish NAME` at the end.

passed=0
failed=0
say() { printf '== %s\n' "$*"; }
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$1"; }
not_ok() { failed=$((failed + 1)); printf 'FAIL %s\n' "$1"; }
# check NAME COMMAND...: runs COMMAND, output in $tmp/log, shown when it fails.
check() {
    local name="$1" start=$SECONDS
    shift
    if "$@" >"$tmp/log" 2>&1; then
        ok "$name ($((SECONDS - start)) s)"
    else
        not_ok "$name ($((SECONDS - start)) s)"
        sed 's/^/     | /' "$tmp/log" | tail -40
    fi
}
# expect_output NAME WANT COMMAND...: COMMAND succeeds and prints exactly WANT.
expect_output() {
    local name="$1" want="$2"
    shift 2
    check "$name" bash -c 'out="$("$@")" || exit 1; printf "%s\n" "$out"; [[ "$out" == "$0" ]] || { echo "expected: $0"; exit 1; }' "$want" "$@"
}
# finish NAME: the tally, and the exit status (non-zero when a check failed).
finish() {
    echo "${1:-test-install}: $passed passed, $failed failed"
    [[ $failed -eq 0 ]]
}
# docs_name NAME REGEX FILE: the install commands of the README and of the book's Getting
# started pages name the artifact as make dist made it (FILE's name): every name there matching
# REGEX (an extended regex of such names) is FILE's, and there is at least one.
docs_name() {
    local name="$1" regex="$2" want
    want="$(basename "$3")"
    check "the README's and the book's install commands name $want" bash -c '
        cd "$1" && found="$(git grep -hoE "$2" -- README.md "docs/src/getting-started/*.md" | sort -u)"
        [[ -n "$found" ]] || { echo "no install command names a file like $2"; exit 1; }
        bad="$(grep -vxF "$3" <<<"$found" || true)"
        [[ -z "$bad" ]] || { echo "named, but not what make dist made ($3):"; echo "$bad"; exit 1; }' \
        _ "$root" "$2" "$want"
}
