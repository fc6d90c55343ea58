#!/usr/bin/env bash
# Builds the addon (crates/agent_state_node, in the workspace's one release build) and puts it
# where the package loads it: bindings/node/agent_state.linux-x64-gnu.node.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
${CARGO:-cargo} build --release -p agent_state_node
# A new file renamed into place, never a copy over the old one: a Node process that has the
# addon loaded keeps its mapping of the old file (cp would rewrite that file in place, and such
# a process dies of SIGBUS). An unchanged addon is left as it is.
addon="$here/agent_state.linux-x64-gnu.node"
if ! cmp -s target/release/libagent_state_node.so "$addon"; then
    cp target/release/libagent_state_node.so "$addon.tmp.$$"
    mv -f "$addon.tmp.$$" "$addon"
fi
