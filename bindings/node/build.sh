#!/usr/bin/env bash
# Builds the addon (crates/agent_state_node, in the workspace's one release build) and puts it
# where the package loads it: bindings/node/agent_state.linux-x64-gnu.node.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
${CARGO:-cargo} build --release -p agent_state_node
cp target/release/libagent_state_node.so "$here/agent_state.linux-x64-gnu.node"
