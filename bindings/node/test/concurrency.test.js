'use strict';
// Concurrency: many Promises on one agent lose no update; worker threads, each with its own
// handle on the same store, all land their writes; a child process killed with SIGKILL in the
// middle of its writes loses none that it saw acknowledged.

const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { eachBackend, agentState } = require('./backends');
const { startChild } = require('./children');

const { ConflictError } = agentState;

// A read-modify-write loop with compare-and-set, retried on conflict: the version it committed.
async function increment(agent, key) {
  for (;;) {
    const { state, version } = await agent.getStateVersioned();
    try {
      const written = await agent.setStateIf(version, { [key]: (state[key] || 0) + 1 });
      return written.version;
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
    }
  }
}

eachBackend('200 concurrent compare-and-set loops on one agent: the counter counts every one', async (t, store) => {
  const agent = await store.open({ synchronous: 'normal', busyTimeoutMs: 120000 });
  const versions = await Promise.all(Array.from({ length: 200 }, () => increment(agent, 'n')));
  assert.equal(new Set(versions).size, 200, 'each loop committed its own version');
  assert.deepEqual(await agent.getStateVersioned(), { state: { n: 200 }, version: 200 });
  const other = await store.open();
  assert.deepEqual(await other.getState(), { n: 200 });
});

eachBackend('200 concurrent setState of distinct keys on one agent: every key lands', async (t, store) => {
  const agent = await store.open({ synchronous: 'normal', busyTimeoutMs: 120000 });
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => agent.setState({ [`k${i}`]: i })));
  results.forEach((state, i) => assert.equal(state[`k${i}`], i));
  const { state, version } = await agent.getStateVersioned();
  assert.equal(version, 200);
  assert.equal(Object.keys(state).length, 200);
  for (let i = 0; i < 200; i++) assert.equal(state[`k${i}`], i);
});

eachBackend('two handles in one process writing at once: no update is lost', async (t, store) => {
  const a = await store.open({ busyTimeoutMs: 120000 });
  const b = await store.open({ busyTimeoutMs: 120000 });
  await Promise.all([
    ...Array.from({ length: 50 }, () => increment(a, 'n')),
    ...Array.from({ length: 50 }, () => increment(b, 'n')),
    ...Array.from({ length: 50 }, (_, i) => a.setState({ [`a${i}`]: i })),
    ...Array.from({ length: 50 }, (_, i) => b.setState({ [`b${i}`]: i })),
  ]);
  const state = await a.getState();
  assert.equal(state.n, 100);
  assert.equal(Object.keys(state).length, 101);
});

const WORKER = `
const { workerData, parentPort } = require('node:worker_threads');
const agentState = require(workerData.pkg);
(async () => {
  const agent = await agentState.openAgent(workerData.path, workerData.options);
  for (let i = 0; i < workerData.writes; i++) {
    await agent.setState({ [\`w\${workerData.id}_\${i}\`]: i });
    for (;;) {
      const { state, version } = await agent.getStateVersioned();
      try {
        await agent.setStateIf(version, { n: (state.n || 0) + 1 });
        break;
      } catch (error) {
        if (!(error instanceof agentState.ConflictError)) throw error;
      }
    }
  }
  await agent.close();
  parentPort.postMessage('done');
})().catch((error) => parentPort.postMessage(\`error \${error.name}: \${error.message}\`));
`;

eachBackend('worker threads, each with its own handle on the same store: every write lands', async (t, store) => {
  const workers = 4;
  const writes = 25;
  const done = await Promise.all(Array.from({ length: workers }, (_, id) => new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, {
      eval: true,
      workerData: {
        pkg: path.join(__dirname, '..'),
        path: store.path,
        options: { ...store.options, busyTimeoutMs: 120000 },
        id,
        writes,
      },
    });
    worker.once('message', resolve);
    worker.once('error', reject);
  })));
  assert.deepEqual(done, Array(workers).fill('done'));
  const agent = await store.open();
  const { state, version } = await agent.getStateVersioned();
  assert.equal(state.n, workers * writes);
  for (let id = 0; id < workers; id++) {
    for (let i = 0; i < writes; i++) assert.equal(state[`w${id}_${i}`], i);
  }
  assert.equal(version, 2 * workers * writes);
});

eachBackend('a child killed with SIGKILL mid-write: every write it saw acknowledged is in the store', async (t, store) => {
  const writer = startChild('writer', [], store);
  t.after(() => writer.kill());
  const acked = [];
  while (acked.length < 40) {
    const line = await writer.next();
    const m = /^ack (\d+)$/.exec(line);
    assert.ok(m, `the writer said ${line}`);
    acked.push(Number(m[1]));
  }
  const { signal } = await writer.kill('SIGKILL');
  assert.equal(signal, 'SIGKILL');
  // Acknowledgements still in the pipe count too.
  for (;;) {
    let line;
    try {
      line = await writer.next();
    } catch {
      break;
    }
    const m = /^ack (\d+)$/.exec(line);
    if (m) acked.push(Number(m[1]));
  }
  const agent = await store.open();
  const state = await agent.getState();
  for (const i of acked) assert.equal(state[`k${i}`], i, `acknowledged write ${i} is stored`);
  // What is stored is a prefix of the writes: nothing half-written, no gap.
  const stored = Object.keys(state).map((k) => Number(k.slice(1))).sort((x, y) => x - y);
  assert.deepEqual(stored, stored.map((_, i) => i));
  assert.ok(stored.length >= acked.length);
  // The store takes writes afterwards.
  assert.equal((await agent.setState({ after: true })).after, true);
});

eachBackend('a read after another process committed sees the commit (no stale cached read)', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ mine: 1 });
  // Read twice: the second read may be answered from this agent's last one.
  await agent.getState();
  assert.deepEqual(await agent.getState(), { mine: 1 });
  const writer = startChild('writer', [], store);
  t.after(() => writer.kill());
  assert.equal(await writer.next(), 'ack 0');
  await writer.kill('SIGKILL');
  const state = await agent.getState();
  assert.equal(state.mine, 1);
  assert.equal(state.k0, 0, 'the other process\'s acknowledged write is read');
});
