#!/usr/bin/env bash
# The npm package as a user gets it (make test-install runs this after run.sh):
#
#   bindings/node/pack.sh makes target/dist/agent-state-VERSION.tgz (twice: the same bytes); then, in a new directory
#   outside the repository, with a PATH that holds node, npm and a shell's basic commands but no
#   cargo, rustc or compiler (a directory of symlinks), and an empty npm cache with --offline (the
#   package needs nothing from the registry):
#   - `npm install <tarball>` installs it, running nothing (no build, no install scripts);
#   - the installed package loads its prebuilt addon and has the workspace's version;
#   - the reference's example (bindings/node/examples/conversation.ts), importing 'agent-state',
#     type-checks against the installed package's index.d.ts (strict) and compiles;
#   - the compiled example runs twice on one store: the second run finds the first one's state.
# Needs Node >= 20 and npm; the TypeScript compiler is the one bindings/node's package-lock.json
# pins (npm ci there when missing). Ends with "N passed, N failed"; exits non-zero when a check
# failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
node_pkg="$root/bindings/node"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/agent-state-install-node.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
app="$tmp/app"
mkdir -p "$app" "$tmp/home" "$tmp/npm-cache" "$tmp/bin"

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"

# shellcheck source=checks.sh
. "$root/tests/install/checks.sh"

# ------------------------------------------------------------------------ the tarball
echo "== bash bindings/node/pack.sh"
if ! tarball="$(bash "$node_pkg/pack.sh" 2>"$tmp/log" | tail -n 1)" || [[ ! -f "$tarball" ]]; then
    cat "$tmp/log"
    not_ok "pack.sh makes the tarball"
    finish "test-install (Node)"
fi
ok "pack.sh: $tarball"
[[ "$(basename "$tarball")" == "agent-state-$version.tgz" ]] && ok "the tarball is agent-state-$version.tgz" ||
    not_ok "the tarball is agent-state-$version.tgz, not $(basename "$tarball")"

# The TypeScript compiler of the package's tests (not the user's project: it stays offline).
# shellcheck source=../../bindings/node/nodeenv.sh
. "$node_pkg/nodeenv.sh"
node_tools
tsc_js="$(readlink -f "$node_pkg/node_modules/typescript/bin/tsc")"

# Two packs of one commit give the same bytes (npm dates every entry alike; the addon is the
# same file).
cp "$tarball" "$tmp/first.tgz"
same_pack() { bash "$node_pkg/pack.sh" >/dev/null && cmp "$tmp/first.tgz" "$tarball"; }
check "pack.sh makes the same tarball again, byte for byte" same_pack
docs_name npm 'agent-state-[0-9][0-9.]*\.tgz' "$tarball"
types_root="$node_pkg/node_modules/@types"

# ------------------------------------------------- a PATH without cargo, rustc or a compiler
# node and npm, and what a shell and npm's own child processes use; nothing else of the system.
for tool in node npm sh bash env cat ls mkdir rm cp mv ln chmod sed grep tar gzip dirname basename \
    uname id readlink realpath mktemp head tail tr sort wc printf true false test; do
    found="$(command -v "$tool" || true)"
    if [[ -n "$found" && "$found" == /* ]]; then ln -s "$(readlink -f "$found")" "$tmp/bin/$tool"; fi
done
# npm and its bin scripts find node by name, through env.
run() {
    env -i HOME="$tmp/home" PATH="$tmp/bin" TMPDIR="$tmp" LANG=C.UTF-8 \
        npm_config_cache="$tmp/npm-cache" npm_config_update_notifier=false npm_config_fund=false \
        npm_config_audit=false "$@"
}
no_toolchain() {
    run sh -c '! command -v cargo && ! command -v rustc && ! command -v cc && ! command -v gcc && command -v node && command -v npm'
}
check "the install runs with no cargo, rustc or C compiler on PATH" no_toolchain

# ------------------------------------------------------------------------------ install
cat >"$app/package.json" <<'EOF'
{ "name": "agent-state-install-test", "version": "1.0.0", "private": true }
EOF
install_offline() {
    (cd "$app" && run npm install --offline --no-package-lock "$tarball") &&
        [[ -f "$app/node_modules/agent-state/agent_state.linux-x64-gnu.node" ]] &&
        [[ "$(ls "$app/node_modules")" == "agent-state" ]]
}
check "npm install <tarball>, offline and with nothing but node and npm (it builds nothing)" install_offline

loads() {
    (cd "$app" && run node -e '
const pkg = require("agent-state");
const meta = require("agent-state/package.json");
if (meta.version !== process.argv[1]) throw new Error(`version ${meta.version}, want ${process.argv[1]}`);
for (const name of ["Agent", "openAgent", "listAgents", "deleteAgent", "expireAgents", "encodeState", "decodeState", "AgentError", "ConflictError"]) {
  if (typeof pkg[name] !== "function") throw new Error(`agent-state exports no ${name}`);
}
console.log(require.resolve("agent-state"));
' "$version")
}
check "require('agent-state') loads the prebuilt addon; the package is version $version" loads

esm_import() {
    (cd "$app" && run node --input-type=module -e '
import { Agent, openAgent, ConflictError } from "agent-state";
import * as all from "agent-state";
if (typeof Agent.open !== "function" || typeof openAgent !== "function" || ConflictError.status !== 9) throw new Error("named imports");
if (all.default.Agent !== Agent) throw new Error("the default export is the CommonJS exports object");
')
}
check "import { Agent } from 'agent-state' in an ES module finds the named exports" esm_import

# ------------------------------------------------------------------- the TypeScript example
cp "$node_pkg/examples/conversation.ts" "$app/"
cat >"$app/tsconfig.json" <<EOF
{
  "compilerOptions": {
    "strict": true,
    "noImplicitOverride": true,
    "target": "ES2022",
    "module": "commonjs",
    "types": ["node"],
    "typeRoots": ["$types_root"],
    "outDir": "build"
  },
  "files": ["conversation.ts"]
}
EOF
compiles() {
    (cd "$app" && run node "$tsc_js" -p . && [[ -f build/conversation.js ]] &&
        grep -q 'require("agent-state")' build/conversation.js)
}
check "the example type-checks against the installed index.d.ts (import from 'agent-state') and compiles" compiles

example_runs() {
    local first second
    first="$(cd "$app" && run node build/conversation.js "$tmp/conv.db")" || return 1
    second="$(cd "$app" && run node build/conversation.js "$tmp/conv.db")" || return 1
    printf '%s\n' "$first" "$second"
    [[ "$first" == $'c1: nothing stored yet (runs 0)\nonStateChanged: idle -> processing\nonStateChanged: processing -> idle\nc1: runs 1, status idle, lastReply ""' ]] &&
        [[ "$second" == $'c1: stored at version 3 by an earlier run (runs 1, status idle)\nonStateChanged: idle -> processing\nonStateChanged: processing -> idle\nc1: runs 2, status idle, lastReply ""' ]]
}
check "the compiled example runs twice on one store; the second run finds the first one's state" example_runs

finish "test-install (Node)"
