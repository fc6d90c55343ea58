'use strict';
// Bad input of every kind: each is refused with its own error class and status, and the stored
// state is unchanged.

const assert = require('node:assert/strict');
const path = require('node:path');
const test = require('node:test');
const { eachBackend, rejectsWith, agentState, freshDir, newAgentId, PG_URI } = require('./backends');

const {
  InvalidArgumentError, BadHandleError, CodecError, StateTooLargeError, StorageError, UnavailableError, AgentError,
} = agentState;

// Writes `{a: 1}`, then runs `bad(agent)`, which must fail with `cls`; the state stays.
async function refused(agent, cls, bad, messagePart) {
  const before = await agent.getStateVersioned();
  const error = await rejectsWith(bad(agent), cls, messagePart);
  assert.deepEqual(await agent.getStateVersioned(), before, 'nothing was written');
  return error;
}

eachBackend('patches and states that are not plain objects are InvalidArgumentError', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ a: 1 });
  class Thing {}
  for (const bad of ['{"a":1}', [1], [], null, undefined, 1, true, new Map([['a', 1]]), new Date(), new Thing(), Object.create({ a: 1 })]) {
    await refused(agent, InvalidArgumentError, (a) => a.setState(bad));
    await refused(agent, InvalidArgumentError, (a) => a.replaceState(bad));
    await refused(agent, InvalidArgumentError, (a) => a.setStateIf(1, bad));
    await refused(agent, InvalidArgumentError, (a) => a.replaceStateIf(1, bad));
  }
  // An object without a prototype is a plain object.
  const bare = Object.create(null);
  bare.b = 2;
  assert.deepEqual(await agent.setState(bare), { a: 1, b: 2 });
});

eachBackend('values the codec cannot store are CodecError naming their path; nothing is written', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ a: 1 });
  class Point {
    constructor() {
      this.x = 1;
    }
  }
  const cycle = { n: 1 };
  cycle.self = cycle;
  const arrayCycle = [];
  arrayCycle.push(arrayCycle);
  const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays
  const cases = [
    [{ f() {} }, '/f'],
    [{ deep: { fn: () => 1 } }, '/deep/fn'],
    [{ s: Symbol('x') }, '/s'],
    [{ p: new Point() }, '/p'],
    [{ list: [1, new Point()] }, '/list/1'],
    [{ c: cycle }, '/c/self'],
    [{ c: arrayCycle }, '/c/0'],
    [{ n: NaN }, '/n'],
    [{ n: [Infinity] }, '/n/0'],
    [{ n: -Infinity }, '/n'],
    [{ u: [1, undefined] }, '/u/1'],
    [{ sparse }, '/sparse/1'],
    [{ d: new Date(NaN) }, '/d'],
    [{ w: new WeakMap() }, '/w'],
    [{ p: Promise.resolve(1) }, '/p'],
    [{ m: new Map([[1, () => 1]]) }, '/m'],
    [{ s: new Set([Symbol('in a set')]) }, '/s'],
    [{ e: new Error('x') }, '/e'],
  ];
  for (const [value, where] of cases) {
    const error = await refused(agent, CodecError, (a) => a.setState(value));
    assert.ok(error.message.includes(where), `${error.message} names ${where}`);
    await refused(agent, CodecError, (a) => a.replaceState(value));
    assert.throws(() => agentState.encodeState(value), CodecError);
  }
});

eachBackend('a state over the size cap is StateTooLargeError (maxValueBytes), nothing written', async (t, store) => {
  const agent = await store.open({ maxValueBytes: 64 });
  assert.equal(agent.maxValueBytes, 64);
  await agent.setState({ a: 'x'.repeat(20) });
  const error = await refused(agent, StateTooLargeError, (a) => a.setState({ b: 'y'.repeat(60) }));
  assert.match(error.message, /64/);
  await refused(agent, StateTooLargeError, (a) => a.replaceState({ big: 'z'.repeat(100) }));
  await refused(agent, StateTooLargeError, (a) => a.setStateIf(1, { b: 'y'.repeat(60) }));
  // Without a cap of its own, a handle has the store's (store_max_value_bytes, recorded in the
  // store: in the PostgreSQL database the suites share, another suite may have set one), else
  // 2 MiB, which a new SQLite file has.
  const roomy = await store.fresh().open();
  if (store.name === 'sqlite') assert.equal(roomy.maxValueBytes, 2 * 1024 * 1024);
  await rejectsWith(roomy.setState({ s: 'x'.repeat(roomy.maxValueBytes) }), StateTooLargeError);
  assert.deepEqual(await roomy.getStateVersioned(), { state: {}, version: 0 });
});

eachBackend('malformed options: an unknown name or a wrong type is InvalidArgumentError naming it', async (t, store) => {
  await rejectsWith(store.open({ noSuchOption: 1 }), InvalidArgumentError, 'no_such_option');
  await rejectsWith(store.open({ busyTimeoutMs: 'soon' }), InvalidArgumentError, 'busy_timeout_ms');
  await rejectsWith(store.open({ busyTimeoutMs: -1 }), InvalidArgumentError);
  await rejectsWith(store.open({ busyTimeoutMs: 1.5 }), InvalidArgumentError);
  await rejectsWith(store.open({ maxValueBytes: 1 }), InvalidArgumentError);
  await rejectsWith(store.open({ synchronous: 'fast' }), InvalidArgumentError);
  await rejectsWith(store.open({ changeLog: {} }), InvalidArgumentError);
  await rejectsWith(store.open({ changeLog: { keepLast: 'all' } }), InvalidArgumentError);
  await rejectsWith(store.open({ readOnly: 'yes' }), InvalidArgumentError);
  await rejectsWith(store.open({ initialState: [1] }), InvalidArgumentError);
  await rejectsWith(store.open({ initialState: 'text' }), InvalidArgumentError);
  await rejectsWith(store.open({ onStateChanged: 'not a function' }), InvalidArgumentError);
  await rejectsWith(store.open({ signal: 'not a signal' }), InvalidArgumentError);
  await rejectsWith(agentState.Agent.open(store.path, ['not', 'an', 'object']), InvalidArgumentError);
  await rejectsWith(agentState.Agent.open(store.path, null), InvalidArgumentError);
  // initialState() returning something else than a plain object.
  class Bad extends agentState.Agent {
    initialState() {
      return [1];
    }
  }
  await rejectsWith(store.open({}, Bad), InvalidArgumentError);
  // Nothing was created by the refused opens.
  const agent = await store.open();
  assert.deepEqual(await agent.getStateVersioned(), { state: {}, version: 0 });
});

test('bad paths: not a string, empty, a missing directory', async () => {
  for (const bad of [undefined, null, 42, '', {}, Buffer.from('x.db')]) {
    await rejectsWith(agentState.Agent.open(bad), InvalidArgumentError);
    await rejectsWith(agentState.openAgent(bad, {}), InvalidArgumentError);
  }
  const dir = freshDir();
  await rejectsWith(agentState.openAgent(path.join(dir, 'no', 'such', 'dir', 'store.db')), StorageError);
  // A file that is not an agent store is refused and left as it was.
  const fs = require('node:fs');
  const foreign = path.join(dir, 'foreign.db');
  fs.writeFileSync(foreign, 'not a database, just text that is long enough to look like a header...');
  const before = fs.readFileSync(foreign);
  await rejectsWith(agentState.openAgent(foreign), StorageError);
  assert.deepEqual(fs.readFileSync(foreign), before);
  fs.rmSync(dir, { recursive: true, force: true });
});

eachBackend('a closed agent: every call is BadHandleError', async (t, store) => {
  const agent = await store.open({ ...{ changeLog: { keepLast: 5 } } });
  await agent.setState({ a: 1 });
  await agent.close();
  const calls = [
    (a) => a.getState(),
    (a) => a.getStateVersioned(),
    (a) => a.setState({ a: 2 }),
    (a) => a.replaceState({ a: 2 }),
    (a) => a.setStateIf(1, { a: 2 }),
    (a) => a.replaceStateIf(1, { a: 2 }),
    (a) => a.changesSince(0),
    (a) => a.stateAt(1),
    (a) => a.restore(1),
    (a) => a.poll(),
  ];
  for (const call of calls) await rejectsWith(call(agent), BadHandleError);
  assert.throws(() => agent.setValidator(() => true), BadHandleError);
  assert.throws(() => agent.subscribe(() => {}), BadHandleError);
  assert.throws(() => agent.maxValueBytes, BadHandleError);
  // An Agent made with `new` and never opened is not open either.
  const unopened = new agentState.Agent();
  await rejectsWith(unopened.getState(), BadHandleError);
  const other = await store.open();
  assert.deepEqual(await other.getStateVersioned(), { state: { a: 1 }, version: 1 });
});

eachBackend('a write racing close: either it lands or it is BadHandleError, never anything else', async (t, store) => {
  const agent = await store.open();
  const writes = Array.from({ length: 20 }, (_, i) => agent.setState({ [`k${i}`]: i }));
  const closing = agent.close();
  const outcomes = await Promise.allSettled(writes);
  await closing;
  const other = await store.open();
  const state = await other.getState();
  outcomes.forEach((o, i) => {
    if (o.status === 'fulfilled') assert.equal(state[`k${i}`], i);
    else assert.ok(o.reason instanceof BadHandleError, `${o.reason}`);
  });
});

eachBackend('a read-only handle refuses writes with StorageError', async (t, store) => {
  const writer = await store.open();
  await writer.setState({ a: 1 });
  const reader = await store.open({ readOnly: true });
  assert.deepEqual(await reader.getState(), { a: 1 });
  await rejectsWith(reader.setState({ a: 2 }), StorageError);
  await rejectsWith(reader.replaceState({}), StorageError);
  assert.deepEqual(await writer.getStateVersioned(), { state: { a: 1 }, version: 1 });
});

test('an unreachable PostgreSQL server is UnavailableError', async () => {
  const error = await rejectsWith(
    agentState.openAgent('postgresql://127.0.0.1:1/x', { agentId: newAgentId(), serverTimeoutMs: 2000 }),
    UnavailableError,
  );
  assert.ok(error instanceof AgentError);
  await rejectsWith(agentState.listAgents('postgresql://127.0.0.1:1/x', { serverTimeoutMs: 2000 }), UnavailableError);
});

test('PostgreSQL needs an agentId', async () => {
  await rejectsWith(agentState.openAgent('postgresql://127.0.0.1:1/x', { serverTimeoutMs: 2000 }), InvalidArgumentError);
});

// SQLite only: the cap is recorded for the whole store, and on PostgreSQL the store is the
// database that every test (and every other suite of the run) shares.
test('storeMaxValueBytes records a cap in the store for the handles opened later without maxValueBytes', async (t) => {
  const dir = freshDir();
  t.after(() => require('node:fs').rmSync(dir, { recursive: true, force: true }));
  const opened = [];
  t.after(async () => { for (const a of opened) await a.close(); });
  const store = {
    async open(extra) {
      const agent = await agentState.openAgent(path.join(dir, 'store.db'), extra);
      opened.push(agent);
      return agent;
    },
  };
  const first = await store.open({ storeMaxValueBytes: 100 });
  assert.equal(first.maxValueBytes, 100);
  await first.setState({ a: 'x'.repeat(50) });
  await rejectsWith(first.setState({ b: 'y'.repeat(60) }), StateTooLargeError);
  const later = await store.open();
  assert.equal(later.maxValueBytes, 100);
  await rejectsWith(later.setState({ b: 'y'.repeat(60) }), StateTooLargeError);
  // A handle's own cap wins over the store's.
  const roomy = await store.open({ maxValueBytes: 1000 });
  assert.equal(roomy.maxValueBytes, 1000);
  assert.equal((await roomy.setState({ b: 'y'.repeat(60) })).b.length, 60);
  // The state is over the store's cap now; a write that changes nothing is never too large.
  assert.equal((await later.setState({ b: 'y'.repeat(60) })).b.length, 60);
  // A read-only handle may not record a cap.
  await rejectsWith(store.open({ readOnly: true, storeMaxValueBytes: 200 }), InvalidArgumentError);
});

eachBackend('agentId: a non-empty string of at most 255 bytes', async (t, store) => {
  for (const bad of ['', 'x'.repeat(256), 'é'.repeat(128), 42, true, {}]) {
    await rejectsWith(agentState.openAgent(store.path, { agentId: bad }), InvalidArgumentError);
  }
  const longest = `${newAgentId()}_`.padEnd(255, 'x');
  const agent = await agentState.openAgent(store.path, { agentId: longest });
  store.agents.push(agent);
  assert.deepEqual(await agent.setState({ ok: true }), { ok: true });
  const listed = await agentState.listAgents(store.path, { prefix: longest });
  assert.deepEqual(listed.map((e) => e.agentId), [longest]);
});

test('a file path with spaces and non-ASCII characters, and a relative path', async (t) => {
  const dir = freshDir();
  t.after(() => require('node:fs').rmSync(dir, { recursive: true, force: true }));
  const odd = path.join(dir, 'a dir with spaces', 'café 中.db');
  require('node:fs').mkdirSync(path.dirname(odd));
  const agent = await agentState.openAgent(odd);
  await agent.setState({ a: 1 });
  await agent.close();
  const again = await agentState.openAgent(odd);
  assert.deepEqual(await again.getState(), { a: 1 });
  await again.close();
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    const relative = await agentState.openAgent('relative.db');
    await relative.setState({ r: 1 });
    await relative.close();
  } finally {
    process.chdir(cwd);
  }
  const absolute = await agentState.openAgent(path.join(dir, 'relative.db'));
  assert.deepEqual(await absolute.getState(), { r: 1 });
  await absolute.close();
});

eachBackend('an initialState() that throws: the read or first write rejects with its error, nothing written', async (t, store) => {
  let fail = false;
  class Fragile extends agentState.Agent {
    initialState() {
      if (fail) throw new RangeError('no initial state now');
      return { n: 0 };
    }
  }
  const agent = await store.open({}, Fragile);
  fail = true;
  await assert.rejects(agent.getState(), RangeError);
  await assert.rejects(agent.setState({ a: 1 }), RangeError);
  fail = false;
  assert.deepEqual(await agent.getStateVersioned(), { state: { n: 0 }, version: 0 });
  assert.deepEqual(await agent.setState({ a: 1 }), { n: 0, a: 1 });
});

test('a PostgreSQL role the server does not know is AuthError', { skip: PG_URI ? false : 'no PostgreSQL server (AGENT_STATE_TEST_PG_URI)' }, async () => {
  const uri = new URL(PG_URI);
  uri.searchParams.set('user', 'no_such_role_node_tests');
  uri.username = '';
  uri.password = '';
  await rejectsWith(agentState.openAgent(uri.toString(), { agentId: newAgentId(), serverTimeoutMs: 5000 }), agentState.AuthError);
});
