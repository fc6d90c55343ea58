'use strict';
// The Node binding through PgBouncer (tests/pg/pooler-suites.sh runs it in transaction and in
// session mode, AGENT_STATE_TEST_PG_URI naming the pooler): two handles of one agent, each with
// many Promises in flight, increment a counter with compare-and-set retries; no increment is
// lost, versions are one per commit, and the change log holds every change in order.
const assert = require('node:assert/strict');
const path = require('node:path');
const { Agent, ConflictError } = require(path.join(__dirname, '../../bindings/node'));

const uri = process.env.AGENT_STATE_TEST_PG_URI;
const agentId = `pooler-node-${process.pid}-${Date.now()}`;
const PER_HANDLE = 40;

async function increment(agent) {
  for (;;) {
    const { state, version } = await agent.getStateVersioned();
    try {
      return await agent.setStateIf(version, { n: (state.n || 0) + 1 });
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
    }
  }
}

(async () => {
  const options = { agentId, changeLog: { keepLast: 1000 }, busyTimeoutMs: 60000, serverTimeoutMs: 60000 };
  const a = await Agent.open(uri, options);
  const b = await Agent.open(uri, options);
  const work = [];
  for (let i = 0; i < PER_HANDLE; i++) work.push(increment(a), increment(b));
  await Promise.all(work);
  const { state, version } = await a.getStateVersioned();
  assert.equal(state.n, 2 * PER_HANDLE);
  assert.equal(version, 2 * PER_HANDLE);
  const log = await b.changesSince(0);
  assert.deepEqual(log.map((c) => c.next.n), Array.from({ length: 2 * PER_HANDLE }, (_, i) => i + 1));
  await a.close();
  await b.close();
  console.log(`pooler-node.js: ${2 * PER_HANDLE} compare-and-set increments from two handles, none lost`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
