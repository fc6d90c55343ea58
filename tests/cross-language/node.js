'use strict';
// The Node side of the cross-language test (run.sh calls it):
//   node node.js write STORE OUT   writes the agents "node" (canonical()) and "node-rules", and
//                                  OUT/node.json, the JSON text encodeState gives for canonical()
//   node node.js read STORE        reads every agent and asserts with deepStrictEqual against the
//                                  JavaScript values of values.js
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { openAgent, encodeState } = require('../../bindings/node');
const values = require('./values');

async function write(store, out) {
  values.checkSorted(values.canonical());
  const agents = [['node', values.canonical()], ['node-rules', values.nodeRules()]];
  for (const [agentId, state] of agents) {
    const agent = await openAgent(store, { agentId });
    try {
      await agent.replaceState(state);
    } finally {
      await agent.close();
    }
  }
  fs.writeFileSync(path.join(out, 'node.json'), encodeState(values.canonical()));
  console.log('node: wrote the agents node, node-rules');
}

async function read(store) {
  const expected = {
    node: values.canonical(),
    python: values.canonical(),
    go: values.canonical(),
    'node-rules': values.nodeRulesRead(),
    'python-extra': values.pythonExtraRead(),
    'go-extra': values.goExtraRead(),
  };
  let failed = 0;
  for (const [agentId, want] of Object.entries(expected)) {
    const agent = await openAgent(store, { agentId, readOnly: true });
    try {
      const { state, version } = await agent.getStateVersioned();
      assert.ok(version > 0, `agent ${agentId}: nothing stored`);
      assert.deepStrictEqual(state, want, `agent ${agentId}: the state Node read differs`);
      if (agentId === 'node-rules') {
        // A Buffer is stored as a Uint8Array and read back as one, not as a Buffer.
        assert.equal(Object.getPrototypeOf(state.buffer), Uint8Array.prototype);
        assert.ok(!('gone' in state));
        assert.ok(Object.is(state.negZero, 0));
      }
      console.log(`ok   node read ${agentId}`);
    } catch (error) {
      failed++;
      console.log(`FAIL node read ${agentId}: ${error.stack || error}`);
    } finally {
      await agent.close();
    }
  }
  if (failed) process.exitCode = 1;
}

const [command, store, out] = process.argv.slice(2);
const run = command === 'write' ? write(store, out) : command === 'read' ? read(store) : null;
if (run === null) {
  console.error('usage: node node.js write STORE OUTDIR | read STORE');
  process.exit(2);
}
run.catch((error) => {
  console.error(error);
  process.exit(1);
});
