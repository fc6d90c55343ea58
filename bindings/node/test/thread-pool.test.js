'use strict';
// The agent's calls do not take libuv's thread pool from the rest of the process: libuv's pool
// (4 threads unless UV_THREADPOOL_SIZE says otherwise) serves fs, dns, zlib and crypto, and a
// call that waits for a busy store must not hold one of its threads while it waits. The library
// runs the calls on its own worker pool instead.
//
// A child process ("crowd", UV_THREADPOOL_SIZE=4) starts 16 writes on one agent while another
// child ("hold") holds the store's write lock (on PostgreSQL, the agent's row); then, while they
// wait, it reads a file with fs.promises.readFile and derives a key with crypto.pbkdf2. Both
// must finish while the lock is still held: the test releases the lock only after they finished,
// or after 30 seconds, and fails in that case (calls that held libuv's 4 threads would keep the
// read waiting until the lock is released). The 30 seconds are a deadline for a hang, not a
// measure: the read takes milliseconds when it is not stuck behind the agent's calls. The same
// again with one library worker (the calls queue in the library's pool); and a cap that is not
// a number of threads is refused with the call's error, never a hang; and a worker thread
// terminated while its calls wait leaves this process running (the calls end on the library's
// threads after the worker's environment is gone, with nobody to tell).

const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { eachBackend } = require('./backends');
const { startChild } = require('./children');

const CALLS = 16;
const DEADLINE_MS = 30000;

// The scenario, with `env` added to the crowd's environment.
async function crowdWhileLocked(t, store, env) {
  const holder = startChild('hold', [], store);
  t.after(() => holder.kill());
  await holder.expect('holding');

  const crowd = startChild('crowd', [CALLS], store, { busyTimeoutMs: 120000 }, [], env);
  t.after(() => crowd.kill());
  await crowd.expect('waiting');

  let timer;
  const deadline = new Promise((resolve) => {
    timer = setTimeout(() => resolve(null), DEADLINE_MS);
  });
  const line = await Promise.race([crowd.next(), deadline]);
  clearTimeout(timer);
  // Released either way: the crowd's writes then go on, and the children end.
  holder.send('release');
  await holder.expect('committed');
  assert.equal((await holder.exited).code, 0);
  assert.notEqual(line, null, `readFile and pbkdf2 did not finish in ${DEADLINE_MS / 1000} s while the agent's calls waited: they held libuv's thread pool`);
  assert.match(line, /^pool [1-9][0-9]* 32$/, 'the file was read and the key derived');

  // The waiting writes all landed once the lock was released, each merged into the state.
  await crowd.expect(`written ${CALLS}`);
  assert.equal((await crowd.exited).code, 0);
  const agent = await store.open();
  const state = await agent.getState();
  assert.equal(state.holder, true);
  for (let i = 0; i < CALLS; i++) assert.equal(state[`c${i}`], i);
}

eachBackend(`readFile and pbkdf2 finish while ${CALLS} agent calls wait for another process's lock (UV_THREADPOOL_SIZE=4)`, async (t, store) => {
  await crowdWhileLocked(t, store, { UV_THREADPOOL_SIZE: '4' });
});

// With one worker, one call waits for the lock and the others wait their turn behind it, in
// the library's queue: still not in libuv's, and none is lost.
eachBackend(`the same with AGENT_STATE_WORKERS=1: the ${CALLS} calls queue in the library and all land`, async (t, store) => {
  await crowdWhileLocked(t, store, { UV_THREADPOOL_SIZE: '4', AGENT_STATE_WORKERS: '1' });
});

eachBackend('AGENT_STATE_WORKERS that is not a number of threads from 1 to 1024: calls reject with InvalidArgumentError naming it', async (t, store) => {
  for (const value of ['0', 'many']) {
    const child = startChild('exit', [], store, {}, [], { AGENT_STATE_WORKERS: value });
    t.after(() => child.kill());
    const line = await child.next();
    assert.match(line, /^error InvalidArgumentError: .*AGENT_STATE_WORKERS/, `AGENT_STATE_WORKERS=${value}`);
    assert.equal((await child.exited).code, 1);
  }
});

const WAITING_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { openAgent } = require(workerData.pkg);
(async () => {
  const agent = await openAgent(workerData.path, { ...workerData.options, busyTimeoutMs: 120000 });
  for (let i = 0; i < workerData.calls; i++) agent.setState({ ['w' + i]: i }).catch(() => {});
  parentPort.postMessage('waiting');
})().catch((error) => parentPort.postMessage('error ' + error.message));
`;

eachBackend('a worker thread terminated while its calls wait for another process\'s lock: this process goes on', async (t, store) => {
  const holder = startChild('hold', [], store);
  t.after(() => holder.kill());
  await holder.expect('holding');
  const worker = new Worker(WAITING_WORKER, {
    eval: true,
    workerData: { pkg: path.join(__dirname, '..'), path: store.path, options: store.options, calls: CALLS },
  });
  const said = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  assert.equal(said, 'waiting');
  await worker.terminate();
  holder.send('release');
  await holder.expect('committed');
  assert.equal((await holder.exited).code, 0);
  // Still alive, and the store still serves this process.
  const agent = await store.open();
  assert.equal((await agent.setState({ after: true })).holder, true);
});
