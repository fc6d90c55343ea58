#!/usr/bin/env bash
# A TLS URI (sslmode=verify-full, sslrootcert, channel_binding=require) through the command,
# through the C ABI (the Python binding, ctypes, on target/release's library) and through the
# Node addon (bindings/node, built by its build.sh): each passes the URI to the library as it is,
# so what crates/agent_state/tests/tls.rs checks holds there.
# Needs the servers of tests/pg/tls.sh (its environment); without them it says it skipped,
# except under CI=true, where that is a failure. `make test-tls` runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

if [[ -z ${AGENT_STATE_TEST_TLS_PORT:-} ]]; then
    if [[ ${CI:-} == true ]]; then
        echo "tls-bindings.sh: AGENT_STATE_TEST_TLS_PORT is unset under CI=true" >&2
        exit 1
    fi
    echo "tls-bindings.sh: skipped (no TLS servers: run it through tests/pg/tls.sh)" >&2
    exit 0
fi

ca=$AGENT_STATE_TEST_TLS_DIR/ca.pem
uri="postgresql://tlsuser:$AGENT_STATE_TEST_TLS_PASSWORD@localhost:$AGENT_STATE_TEST_TLS_PORT/postgres?sslmode=verify-full&sslrootcert=$ca&channel_binding=require"
wrong="postgresql://tlsuser:$AGENT_STATE_TEST_TLS_PASSWORD@localhost:$AGENT_STATE_TEST_TLS_EXPIRED_PORT/postgres?sslmode=verify-full&sslrootcert=$ca"
agent="tls-bindings-$$-$(date +%s%N)"
passed=0
failed=0
check() { # what, then the command; the command's success is the check's
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        echo "tls-bindings.sh: FAILED: $what" >&2
        failed=$((failed + 1))
    fi
}

cargo build -q -p agent-state-cli
cli=target/debug/agent-state
cli_set() { [[ $("$cli" --compact --agent "$agent" set "$uri" '{"via":"cli"}') == '{"via":"cli"}' ]]; }
check "the CLI writes over TLS" cli_set
cli_expired() {
    local out code=0
    out=$("$cli" --agent "$agent" get "$wrong" 2>&1) || code=$?
    [[ $code -eq 77 && $out == *"AGENT_ERR_AUTH"*"has expired"* && $out != *"$AGENT_STATE_TEST_TLS_PASSWORD"* ]] \
        || { echo "exit $code: $out" >&2; return 1; }
}
check "the CLI exits 77 (AGENT_ERR_AUTH) on an expired certificate" cli_expired

python=${PYTHON:-python3}
py() {
    AGENT_STATE_LIBRARY=$root/target/release/libagent_state.so PYTHONPATH=$root/bindings/python/src \
        URI=$uri WRONG=$wrong AGENT=$agent PW=$AGENT_STATE_TEST_TLS_PASSWORD "$python" - <<'EOF'
import os
import agent_state

with agent_state.Agent(os.environ["URI"], agent_id=os.environ["AGENT"]) as a:
    assert a.get_state() == {"via": "cli"}, a.get_state()
    a.set_state({"via": "python"})
    assert a.get_state() == {"via": "python"}, a.get_state()
try:
    agent_state.Agent(os.environ["WRONG"], agent_id=os.environ["AGENT"])
    raise SystemExit("an expired certificate was accepted")
except agent_state.AuthError as e:
    assert e.status == agent_state.AGENT_ERR_AUTH == 13
    assert "has expired" in str(e) and os.environ["PW"] not in str(e), str(e)
EOF
}
check "the Python binding (the C ABI) reads and writes over TLS, AuthError on an expired certificate" py

bash bindings/node/build.sh >/dev/null
node_tls() {
    URI=$uri WRONG=$wrong AGENT=$agent PW=$AGENT_STATE_TEST_TLS_PASSWORD node - <<'EOF'
const assert = require('node:assert/strict');
const { Agent, AuthError } = require('./bindings/node');
(async () => {
  const a = await Agent.open(process.env.URI, { agentId: process.env.AGENT });
  assert.deepEqual(await a.getState(), { via: 'python' });
  assert.deepEqual(await a.setState({ via: 'node' }), { via: 'node' });
  assert.deepEqual(await a.getState(), { via: 'node' });
  await a.close();
  await assert.rejects(Agent.open(process.env.WRONG, { agentId: process.env.AGENT }), (e) => {
    assert.ok(e instanceof AuthError, String(e));
    assert.equal(e.status, 13);
    assert.match(e.message, /has expired/);
    assert.ok(!e.message.includes(process.env.PW));
    return true;
  });
})().catch((e) => { console.error(e); process.exit(1); });
EOF
}
check "the Node binding reads and writes over TLS, AuthError on an expired certificate" node_tls

echo "tls-bindings: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
