#!/usr/bin/env bash
# wheel.sh LIB.so CLI OUTDIR: builds the Python wheel of bindings/python with LIB.so and the
# `agent-state` executable CLI inside (agent_state/.libs), into OUTDIR, and prints its path.
#
# The wheel is built by setup.py from files already built (AGENT_STATE_LIBRARY, AGENT_STATE_CLI:
# cargo is not run), in a clean copy of bindings/python (no build/ or *.egg-info left by earlier
# builds), with `pip wheel` in an isolated build environment (setuptools from PyPI, as the
# sdist's users get it). SOURCE_DATE_EPOCH (default: the last commit's time) fixes the
# timestamps inside, so two builds of one commit give the same bytes.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 LIB.so CLI OUTDIR" >&2
    exit 2
fi
lib="$(realpath "$1")" cli="$(realpath "$2")" out="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 315532800)}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# setup.py reads the version from the workspace's Cargo.toml, two levels up from the package.
mkdir -p "$tmp/bindings"
cp "$root/Cargo.toml" "$tmp/"
mkdir -p "$tmp/crates/libagent_state"
cp "$root/crates/libagent_state/Cargo.toml" "$tmp/crates/libagent_state/"
cp -r "$root/bindings/python" "$tmp/bindings/python"
rm -rf "$tmp/bindings/python/build" "$tmp/bindings/python"/src/*.egg-info "$tmp/bindings/python/tests"
find "$tmp/bindings/python" -name __pycache__ -prune -exec rm -rf {} +
# Files' modes and times as git would give them, whatever the checkout did.
find "$tmp/bindings/python" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
AGENT_STATE_LIBRARY="$lib" AGENT_STATE_CLI="$cli" PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip wheel --quiet --no-deps --wheel-dir "$tmp/wheel" "$tmp/bindings/python" >&2
wheel="$(ls "$tmp"/wheel/*.whl)"
cp "$wheel" "$out/"
echo "$out/$(basename "$wheel")"
