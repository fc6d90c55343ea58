'use strict';
// watch(): the changes of a store's agents, committed by other processes, as an async iterator;
// and the open option `watch`, with which an agent's hooks see other processes' changes without
// poll(). Each case runs on SQLite and PostgreSQL; the agents of a case have ids of their own
// (newAgentId), so that cases sharing a PostgreSQL database never see each other's changes.

const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const test = require('node:test');
const { eachBackend, rejectsWith, agentState, newAgentId, freshDir } = require('./backends');

const { watch, Watch, openAgent, deleteAgent, encodeState, InvalidArgumentError, StorageError, BadHandleError } = agentState;

const PACKAGE = path.join(__dirname, '..');
const LOG = { changeLog: { keepLast: 100 } };
// Generous: the tests run on a loaded machine; a healthy watch delivers in milliseconds.
const PATIENCE_MS = 60_000;

// Runs `steps` in a child Node process, one after another, each awaited:
// {id, set | replace | patch: value} or {id, delete: true}; `options` are each agent's open
// options. Values travel through the codec, so Dates and Maps arrive as such.
const WRITER = `
const a = require(process.env.PACKAGE);
(async () => {
  const { steps, options } = a.decodeState(process.env.STEPS);
  const agents = new Map();
  for (const step of steps) {
    if (step.delete) {
      if (agents.has(step.id)) { await agents.get(step.id).close(); agents.delete(step.id); }
      await a.deleteAgent(process.env.STORE, step.id);
      continue;
    }
    if (!agents.has(step.id)) agents.set(step.id, await a.openAgent(process.env.STORE, { ...options, agentId: step.id }));
    const agent = agents.get(step.id);
    if (step.set) await agent.setState(step.set);
    else if (step.replace) await agent.replaceState(step.replace);
    else if (step.patch) await agent.patchState(step.patch);
  }
  for (const agent of agents.values()) await agent.close();
})().catch((e) => { console.error(e); process.exit(1); });
`;

function runNode(script, env) {
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, PACKAGE, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => { out += chunk; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the child did not exit within ${PATIENCE_MS} ms; it printed ${JSON.stringify(out)}`));
    }, PATIENCE_MS);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out });
    });
  });
}

async function writeElsewhere(store, steps, options = {}) {
  const { code, signal } = await runNode(WRITER, { STORE: store.path, STEPS: encodeState({ steps, options }) });
  assert.equal(code, 0, `the writer process failed (${code ?? signal})`);
}

// The store exists before anything watches it (watching never creates one).
async function createStore(store) {
  const agent = await openAgent(store.path, { agentId: newAgentId() });
  await agent.close();
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out (${PATIENCE_MS} ms): ${what}`)), PATIENCE_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// The next `n` changes of `w` (fewer if it ends).
async function take(w, n) {
  const out = [];
  while (out.length < n) {
    const r = await withTimeout(w.next(), `change ${out.length + 1} of ${n}`);
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

function byAgent(changes) {
  const out = {};
  for (const c of changes) (out[c.agentId] ??= []).push(c);
  return out;
}

eachBackend('a for-await loop receives another process\'s changes, per agent in commit order, decoded', async (t, store) => {
  await createStore(store);
  const [a, b] = [newAgentId(), newAgentId()];
  const w = await watch(store.path, { ids: [a, b] });
  assert.ok(w instanceof Watch);
  t.after(() => w.close());
  const when = new Date(1700000000000);
  await writeElsewhere(store, [
    { id: a, set: { n: 1, when } },
    { id: b, set: { x: new Map([[1, 'one']]) } },
    { id: a, set: { n: 2 } },
    { id: a, replace: { r: true } },
    { id: a, patch: [{ op: 'add', path: '/s', value: new Set(['k']) }] },
  ], LOG);
  const seen = [];
  for await (const change of w) {
    seen.push(change);
    if (seen.length === 5) break;
  }
  const got = byAgent(seen);
  assert.deepEqual(got[a].map((c) => [c.version, c.kind]), [[1, 'merge'], [2, 'merge'], [3, 'replace'], [4, 'json_patch']]);
  assert.deepEqual(got[b].map((c) => [c.version, c.kind]), [[1, 'merge']]);
  const [first, second, replaced, patched] = got[a];
  // The first change of an agent carries its state (the writer's initial state is unknown here).
  assert.deepEqual(first.patch, { n: 1, when });
  assert.ok(first.patch.when instanceof Date);
  assert.deepEqual(first.state, { n: 1, when });
  assert.deepEqual(second.patch, { n: 2 });
  assert.equal(second.state, null);
  assert.equal(replaced.patch, null);
  assert.deepEqual(replaced.state, { r: true });
  assert.deepEqual(patched.patch, [{ op: 'add', path: '/s', value: new Set(['k']) }]);
  assert.deepEqual(got[b][0].state, { x: new Map([[1, 'one']]) });
  for (const c of seen) {
    assert.ok(c.at instanceof Date, 'a committed change has its time');
    assert.equal(c.schema, 0);
    assert.equal(c.migratedFrom, null);
  }
  // The break closed it.
  assert.deepEqual(await w.next(), { value: undefined, done: true });
  await rejectsWith(w.add(a), BadHandleError);
});

eachBackend('a prefix watch follows every agent under it, also those created after it began, and no other', async (t, store) => {
  await createStore(store);
  const base = newAgentId();
  const outside = newAgentId();
  const w = await watch(store.path, { prefix: `${base}/`, states: true });
  t.after(() => w.close());
  await writeElsewhere(store, [
    { id: `${base}/x`, set: { v: 1 } },
    { id: outside, set: { v: 1 } },
    { id: `${base}/y`, set: { v: 1 } },
    { id: `${base}/x`, set: { v: 2 } },
  ], LOG);
  const seen = await take(w, 3);
  assert.deepEqual(seen.map((c) => [c.agentId, c.version]).sort(), [[`${base}/x`, 1], [`${base}/x`, 2], [`${base}/y`, 1]]);
  // states: every change carries the state after it.
  assert.deepEqual(seen.filter((c) => c.agentId === `${base}/x`).map((c) => c.state), [{ v: 1 }, { v: 2 }]);
  // Nothing of the agent outside the prefix is queued: a change of it now would come first.
  await writeElsewhere(store, [{ id: outside, set: { v: 2 } }, { id: `${base}/y`, set: { v: 2 } }], LOG);
  const [next] = await take(w, 1);
  assert.deepEqual([next.agentId, next.version], [`${base}/y`, 2]);
});

eachBackend('an ids watch grows with add (from a version, or from now) and shrinks with remove', async (t, store) => {
  await createStore(store);
  const [a, b, c] = [newAgentId(), newAgentId(), newAgentId()];
  await writeElsewhere(store, [{ id: b, set: { n: 1 } }, { id: b, set: { n: 2 } }], LOG);
  const w = await watch(store.path, { ids: [] });
  t.after(() => w.close());
  await w.add(a);
  await w.add(b, 1); // from after version 1: version 2 comes from the log
  const [resumed] = await take(w, 1);
  assert.deepEqual([resumed.agentId, resumed.version, resumed.patch], [b, 2, { n: 2 }]);
  await w.remove(b);
  await writeElsewhere(store, [{ id: b, set: { n: 3 } }, { id: c, set: { n: 1 } }, { id: a, set: { n: 1 } }]);
  const [next] = await take(w, 1);
  assert.deepEqual([next.agentId, next.version], [a, 1]);
  await rejectsWith(w.add(''), InvalidArgumentError, 'agent id');
  await rejectsWith(w.add('x'.repeat(256)), InvalidArgumentError);
  const p = await watch(store.path, { prefix: 'p' });
  t.after(() => p.close());
  await rejectsWith(p.add(a), InvalidArgumentError);
});

eachBackend('since resumes from the change log; without the log the gap is one resync with the current state', async (t, store) => {
  await createStore(store);
  const [logged, unlogged] = [newAgentId(), newAgentId()];
  await writeElsewhere(store, [1, 2, 3].map((n) => ({ id: logged, set: { n } })), LOG);
  await writeElsewhere(store, [1, 2, 3].map((n) => ({ id: unlogged, set: { n } })));
  const w = await watch(store.path, { ids: [logged, unlogged], since: new Map([[logged, 1], [unlogged, 1]]) });
  t.after(() => w.close());
  const got = byAgent(await take(w, 3));
  assert.deepEqual(got[logged].map((c) => [c.version, c.kind, c.patch]), [[2, 'merge', { n: 2 }], [3, 'merge', { n: 3 }]]);
  assert.deepEqual(got[unlogged].map((c) => [c.version, c.kind, c.state, c.at]), [[3, 'resync', { n: 3 }, null]]);
});

eachBackend('without the change log the changes come as resyncs with the state after them', async (t, store) => {
  await createStore(store);
  const a = newAgentId();
  const w = await watch(store.path, { ids: [a] });
  t.after(() => w.close());
  await writeElsewhere(store, [{ id: a, set: { n: 1 } }, { id: a, set: { n: 2 } }]);
  // Commits that came between two of the watcher's reads are one resync (nothing else knows
  // what each of them changed).
  const seen = [];
  while (seen.length === 0 || seen[seen.length - 1].version < 2) seen.push(...await take(w, 1));
  for (const c of seen) assert.deepEqual([c.kind, c.patch, c.state], ['resync', null, { n: c.version }]);
});

eachBackend('a deletion is one deleted change; a later first write starts the agent again', async (t, store) => {
  await createStore(store);
  const a = newAgentId();
  const w = await watch(store.path, { ids: [a] });
  t.after(() => w.close());
  // One step at a time: this checks what each looks like here; the core's tests check how
  // commits that follow each other closely are told apart.
  await writeElsewhere(store, [{ id: a, set: { n: 1 } }], LOG);
  const seen = await take(w, 1);
  await writeElsewhere(store, [{ id: a, delete: true }]);
  seen.push(...await take(w, 1));
  await writeElsewhere(store, [{ id: a, set: { again: true } }], LOG);
  seen.push(...await take(w, 1));
  assert.deepEqual(seen.map((c) => c.kind), ['merge', 'deleted', 'merge']);
  assert.deepEqual(seen.slice(0, 2).map((c) => [c.version, c.state]), [[1, { n: 1 }], [0, null]]);
  // The store's versions of an agent never repeat, across a deletion too; the first change of
  // the new incarnation carries its state.
  assert.ok(seen[2].version >= 1);
  assert.deepEqual(seen[2].state, { again: true });
});

eachBackend('a consumer that falls behind costs at most maxPending changes: the rest becomes one resync', async (t, store) => {
  await createStore(store);
  const a = newAgentId();
  const w = await watch(store.path, { ids: [a], maxPending: 4 });
  t.after(() => w.close());
  // Nobody takes anything while 30 changes are committed.
  await writeElsewhere(store, Array.from({ length: 30 }, (_, i) => ({ id: a, set: { [`k${i}`]: i } })));
  const seen = [];
  let last = 0;
  while (last < 30) {
    const [c] = await take(w, 1);
    assert.ok(c.version > last, `versions increase: ${c.version} after ${last}`);
    last = c.version;
    seen.push(c);
  }
  assert.ok(seen.length <= 8, `${seen.length} changes delivered for 30 commits with maxPending 4`);
  assert.ok(seen.some((c) => c.kind === 'resync'), 'a resync replaced what was dropped');
  // A copy kept from the changes is the stored state.
  let copy = {};
  for (const c of seen) {
    if (c.state !== null) copy = c.state;
    else Object.assign(copy, c.patch);
  }
  const reader = await openAgent(store.path, { agentId: a });
  t.after(() => reader.close());
  assert.deepEqual(copy, await reader.getState());
});

eachBackend('a burst of changes settles at most 32 a turn: the loop keeps running', async (t, store) => {
  await createStore(store);
  const base = newAgentId();
  const w = await watch(store.path, { prefix: `${base}/` });
  t.after(() => w.close());
  await writeElsewhere(store, Array.from({ length: 100 }, (_, i) => ({ id: `${base}/${i % 10}`, set: { i } })), LOG);
  let turns = 0;
  let counting = true;
  const tick = () => { turns += 1; if (counting) setImmediate(tick); };
  setImmediate(tick);
  // Wait until every change is queued, then take them in one go.
  const first = await take(w, 1);
  const rest = await take(w, 99);
  counting = false;
  assert.equal(first.length + rest.length, 100);
  assert.ok(turns >= 3, `100 changes settled in ${turns} turns of the loop`);
});

test('bad arguments are refused with InvalidArgumentError before anything opens', async () => {
  const dir = freshDir();
  const file = path.join(dir, 'store.db');
  try {
    await rejectsWith(watch(''), InvalidArgumentError, 'location');
    await rejectsWith(watch(42), InvalidArgumentError);
    await rejectsWith(watch(file, 'ids'), InvalidArgumentError, 'options');
    await rejectsWith(watch(file, { ids: ['a'], prefix: 'a' }), InvalidArgumentError, 'not both');
    await rejectsWith(watch(file, { ids: 'a' }), InvalidArgumentError, 'ids');
    await rejectsWith(watch(file, { ids: [1] }), InvalidArgumentError, 'ids');
    await rejectsWith(watch(file, { ids: [''] }), InvalidArgumentError, 'ids');
    await rejectsWith(watch(file, { prefix: 1 }), InvalidArgumentError, 'prefix');
    await rejectsWith(watch(file, { maxPending: 0 }), InvalidArgumentError, 'maxPending');
    await rejectsWith(watch(file, { pollIntervalMs: -1 }), InvalidArgumentError, 'pollIntervalMs');
    await rejectsWith(watch(file, { rescanIntervalMs: 1.5 }), InvalidArgumentError, 'rescanIntervalMs');
    await rejectsWith(watch(file, { states: 'yes' }), InvalidArgumentError, 'states');
    await rejectsWith(watch(file, { since: [['a', 1]] }), InvalidArgumentError, 'since');
    await rejectsWith(watch(file, { since: { a: -1 } }), InvalidArgumentError, 'since');
    await rejectsWith(watch(file, { noSuchOption: 1 }), InvalidArgumentError, 'no_such_option');
    await rejectsWith(watch(':memory:'), InvalidArgumentError);
    // Watching never creates a store.
    await rejectsWith(watch(file), StorageError);
    const opened = await openAgent(file);
    await opened.close();
    await rejectsWith(watch(file, { ids: ['x'.repeat(256)] }), InvalidArgumentError);
  } finally {
    require('node:fs').rmSync(dir, { recursive: true, force: true });
  }
  assert.throws(() => new Watch({}), InvalidArgumentError);
});

eachBackend('break, close and abandoning leave nothing behind: the process exits by itself', async (t, store) => {
  await createStore(store);
  const a = newAgentId();
  // A child that watches, takes one change and breaks; then opens another watch and drops it
  // unclosed. Its event loop must then be empty.
  const script = `
    const a = require(process.env.PACKAGE);
    (async () => {
      const w = await a.watch(process.env.STORE, { ids: [process.env.ID] });
      const writer = await a.openAgent(process.env.STORE, { agentId: process.env.ID, changeLog: { keepLast: 10 } });
      await writer.setState({ n: 1 });
      await writer.close();
      for await (const change of w) { console.log(change.kind, change.version); break; }
      await a.watch(process.env.STORE, { ids: [process.env.ID] });
      console.log('done');
    })().catch((e) => { console.error(e); process.exit(1); });
  `;
  const { code, out } = await runNode(script, { STORE: store.path, ID: a });
  assert.equal(code, 0);
  assert.equal(out, 'merge 1\ndone\n');
});

eachBackend('closing wakes a waiting next(); an aborted signal closes the watch', async (t, store) => {
  await createStore(store);
  const w = await watch(store.path, { ids: [newAgentId()] });
  const waiting = w.next();
  await w.close();
  assert.deepEqual(await waiting, { value: undefined, done: true });
  await w.close(); // again: nothing
  const controller = new AbortController();
  const v = await watch(store.path, { ids: [newAgentId()], signal: controller.signal });
  const pending = v.next();
  controller.abort();
  assert.deepEqual(await withTimeout(pending, 'the abort'), { value: undefined, done: true });
});

// The open option arrives with the library's surface; until then the case says it was skipped.
const SURFACE = require(path.join(PACKAGE, '..', '..', 'include', 'agent_state_surface.json'));
const WATCH_OPTION = SURFACE.options.some((o) => o.name === 'watch');

eachBackend('with the open option watch, a hook sees another process\'s changes without poll()', async (t, store) => {
  if (!WATCH_OPTION) {
    t.skip('the library has no open option "watch" yet');
    return;
  }
  await createStore(store);
  const a = newAgentId();
  const seen = [];
  let resolveSeen;
  const twoSeen = new Promise((resolve) => { resolveSeen = resolve; });
  const agent = await openAgent(store.path, {
    ...LOG,
    agentId: a,
    watch: true,
    onStateChanged: (next, prev, change) => {
      seen.push([change.version, prev.n ?? null, next.n]);
      if (seen.length === 2) resolveSeen();
    },
  });
  t.after(() => agent.close());
  await writeElsewhere(store, [{ id: a, set: { n: 1 } }, { id: a, set: { n: 2 } }], LOG);
  await withTimeout(twoSeen, 'the hook seeing the other process\'s changes');
  assert.deepEqual(seen, [[1, null, 1], [2, 1, 2]]);
});
