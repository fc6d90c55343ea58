#!/usr/bin/env bash
# Tests of the JavaScript client of `agent-state serve` (crates/agent-state-serve/client): builds the agent-state CLI, whose `serve` the
# live tests start as a child process (and whose `set`/`replace` write the store), then runs
# Node's own test runner on test/. Works from any directory and on a fresh Debian machine:
# installs Node from the system packages when it is missing. Node 20 needs
# --experimental-websocket for the global WebSocket (a flag Node >= 22 accepts and ignores).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"

# shellcheck source=../../../bindings/node/nodeenv.sh
. "$root/bindings/node/nodeenv.sh"
node_need

# The one version of everything is the workspace's (Cargo.toml); the package says the same.
want="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)"
have="$(node -p "require('$here/package.json').version")"
if [ "$want" != "$have" ]; then
    echo "run-tests.sh: crates/agent-state-serve/client/package.json says version $have, Cargo.toml $want" >&2
    exit 1
fi

echo "+ cargo build --release -p agent-state-cli"
(cd "$root" && cargo build --release -p agent-state-cli)
export AGENT_STATE_CLI="$root/target/release/agent-state"

echo "+ node --check (every file)"
for file in "$here"/src/*.js "$here"/test/*.js "$here"/support/*.js; do
    node --check "$file"
done

node --version
echo "+ node --experimental-websocket --test test/"
cd "$here"
node --experimental-websocket --test test/
