#!/usr/bin/env bash
# The Python wheel as a user gets it (make test-install runs this): WHEEL (default: the one
# `make dist` put in target/dist) is pip-installed into a new virtual environment in a scratch
# directory outside the repository, with a PATH that holds the environment's bin and the
# system's /usr/bin:/bin but no cargo or rustc, no LD_LIBRARY_PATH and no AGENT_STATE_LIBRARY:
#   - auditwheel agrees with the wheel's platform tag; the library and the command are inside;
#   - packaging/wheel.sh, run again on the files the wheel holds, gives the same bytes;
#   - the reference's example (tests/install/app.py: merges a patch into an initial state)
#     runs on the bundled library;
#   - `agent-state --version` runs from the environment's PATH and names the workspace's
#     version; `agent-state set` and `get` work on a store the Python program wrote.
# Ends with "N passed, N failed"; exits non-zero when a check failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"
wheel="${1:-$(compgen -G "$root/target/dist/agent_state-$version-py3-none-*.whl" | head -n 1 || true)}"
if [[ -z "$wheel" || ! -f "$wheel" ]]; then
    echo "wheel.sh: no wheel (make dist makes target/dist/agent_state-$version-py3-none-*.whl)" >&2
    exit 1
fi
tmp="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-wheel.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=checks.sh
. "$root/tests/install/checks.sh"

# auditwheel, in the tools environment tests/install/run.sh keeps (made here when missing).
tools="$root/target/install-test/tools-venv"
if ! "$tools/bin/python" -c 'import auditwheel' >/dev/null 2>&1; then
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install --quiet build auditwheel
fi
tag_matches() {
    local tag
    "$tools/bin/auditwheel" show "$wheel" | tee "$tmp/auditwheel"
    tag="$(tr '\n' ' ' <"$tmp/auditwheel" | sed -n 's/.*consistent with the following platform tag: *"\([^"]*\)".*/\1/p')"
    [[ -n "$tag" && "$(basename "$wheel")" == "agent_state-$version-py3-none-$tag.whl" ]] ||
        { echo "the wheel's tag is not auditwheel's '$tag'"; return 1; }
    # The listing goes to a file first: `unzip | grep -q` under pipefail fails when grep exits at
    # its match before unzip has written everything (SIGPIPE).
    unzip -Z1 "$wheel" >"$tmp/wheel-files" &&
        grep -qx 'agent_state/.libs/libagent_state.so' "$tmp/wheel-files" &&
        grep -qx 'agent_state/.libs/agent-state' "$tmp/wheel-files"
}
check "the wheel's platform tag is auditwheel's; the library and the command are inside" tag_matches
docs_name wheel 'agent_state-[0-9][0-9.]*-py3-none-[a-z0-9_]+\.whl' "$wheel"

same_bytes() {
    mkdir -p "$tmp/unpacked" "$tmp/again"
    (cd "$tmp/unpacked" && unzip -q "$wheel")
    bash "$root/packaging/wheel.sh" "$tmp/unpacked/agent_state/.libs/libagent_state.so" \
        "$tmp/unpacked/agent_state/.libs/agent-state" "$tmp/again" >/dev/null
    cmp "$wheel" "$tmp/again/$(basename "$wheel")"
}
check "the wheel is made again byte for byte from the same files" same_bytes

venv="$tmp/venv"
cp "$root/tests/install/app.py" "$tmp/app.py"
# The stranger's environment: the new venv's bin, then the system's; nothing of rustup or the
# repository (the scratch directory is outside it).
stranger() {
    (cd "$tmp" && env -i HOME="$tmp" PATH="$venv/bin:/usr/bin:/bin" LANG=C.UTF-8 "$@")
}
no_rust() { ! stranger bash -c 'command -v cargo || command -v rustc'; }
check "the stranger's PATH has no cargo or rustc" no_rust
check "a new venv pip-installs the wheel (nothing is built)" \
    bash -c 'python3 -m venv "$1" && cd "$2" && env -i HOME="$2" PATH="$1/bin:/usr/bin:/bin" "$1/bin/python" -m pip install --quiet --no-deps --no-build-isolation --no-index "$3"' _ "$venv" "$tmp" "$wheel"
example() {
    local out
    out="$(stranger python app.py "$tmp/py.db")"
    echo "$out"
    [[ "$out" == "agent_state $version: {'runs': 0, 'from': 'python'}" ]]
}
check "the reference's example runs on the bundled library" example
command_version() {
    local out
    out="$(stranger agent-state --version)"
    echo "$out"
    [[ "$out" == "agent-state $version" ]] && [[ "$(stranger bash -c 'command -v agent-state')" == "$venv/bin/agent-state" ]]
}
check "agent-state --version runs from the venv's PATH" command_version
command_use() {
    [[ "$(stranger agent-state --compact get "$tmp/py.db")" == '{"runs":0,"from":"python"}' ]] &&
        [[ "$(stranger agent-state --compact set "$tmp/py.db" '{"from":"cli"}')" == '{"runs":0,"from":"cli"}' ]]
}
check "agent-state reads and writes the store the Python program wrote" command_use

finish "test-install (wheel)"
