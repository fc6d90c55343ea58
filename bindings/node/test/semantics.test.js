'use strict';
// The reference's semantics (../shared/reference/state-api.md): setState is an RFC 7396 merge
// returning the merged state, replaceState replaces, initialState() is what a read shows while
// nothing is stored (computed on every read, never persisted by one), onStateChanged(next, prev)
// fires after each commit in commit order, a subclass overrides both, and openAgent takes them
// as options. Every test runs on SQLite and on PostgreSQL (backends.js).

const assert = require('node:assert/strict');
const { eachBackend, rejectsWith, agentState } = require('./backends');

const { Agent, openAgent, HookError } = agentState;

eachBackend('setState merges by RFC 7396: nested objects merge, null deletes, the merged state is returned', async (t, store) => {
  const agent = await store.open();
  assert.deepEqual(await agent.getState(), {});
  const first = await agent.setState({ status: 'processing', job: { id: 'j1', step: 2, note: 'retrying' } });
  assert.deepEqual(first, { status: 'processing', job: { id: 'j1', step: 2, note: 'retrying' } });
  // The reference's own example.
  const merged = await agent.setState({ job: { step: 3, note: null } });
  assert.deepEqual(merged, { status: 'processing', job: { id: 'j1', step: 3 } });
  assert.deepEqual(await agent.getState(), merged);
  // Arrays replace; null at the top deletes; a missing member deleted changes nothing else.
  await agent.setState({ tags: [1, 2, 3] });
  assert.deepEqual((await agent.setState({ tags: [4] })).tags, [4]);
  assert.deepEqual(await agent.setState({ tags: null, status: null }), { job: { id: 'j1', step: 3 } });
  // Member order: existing members keep their place, new ones are appended.
  await agent.replaceState({ m: 1, a: 2, z: 3 });
  const ordered = await agent.setState({ y: 4, z: 30, b: 5, m: 10 });
  assert.deepEqual(Object.keys(ordered), ['m', 'a', 'z', 'y', 'b']);
  // A second handle reads what the first wrote.
  const other = await store.open();
  assert.deepEqual(await other.getState(), { m: 10, a: 2, z: 30, y: 4, b: 5 });
});

eachBackend('replaceState stores the new state whole and returns it', async (t, store) => {
  const agent = await store.open({ initialState: { keep: true } });
  await agent.setState({ a: 1, b: { c: 2 } });
  const next = { z: null, list: [1, { x: 1 }] };
  assert.deepEqual(await agent.replaceState(next), next);
  assert.deepEqual(await agent.getState(), next);
  assert.deepEqual(await agent.replaceState({}), {});
  // An empty stored state is a stored state: the initial state does not come back.
  assert.deepEqual(await agent.getState(), {});
  assert.equal((await agent.getStateVersioned()).version, 3);
});

eachBackend('initialState() is computed on every read while nothing is stored and never persisted by a read', async (t, store) => {
  let calls = 0;
  class Counter extends Agent {
    initialState() {
      calls += 1;
      return { calls, at: 0 };
    }
  }
  const agent = await store.open({}, Counter);
  const before = calls;
  assert.deepEqual(await agent.getState(), { calls: before + 1, at: 0 });
  assert.deepEqual(await agent.getState(), { calls: before + 2, at: 0 });
  assert.equal((await agent.getStateVersioned()).version, 0);
  // A second handle (with another default) sees nothing stored: the reads persisted nothing.
  const other = await store.open({ initialState: { other: true } });
  assert.deepEqual(await other.getStateVersioned(), { state: { other: true }, version: 0 });
  if (!store.postgres) {
    // Nor did they write the file's agent for a process that opens it afresh.
    const listed = await agentState.listAgents(store.path, {});
    assert.deepEqual(listed, []);
  } else {
    const listed = await agentState.listAgents(store.path, { prefix: store.options.agentId });
    assert.deepEqual(listed, []);
  }
});

eachBackend('the first write merges into the initial state; later reads show the stored state', async (t, store) => {
  const agent = await store.open({ initialState: { status: 'idle', lastReply: '', at: 0 } });
  const merged = await agent.setState({ status: 'processing' });
  assert.deepEqual(merged, { status: 'processing', lastReply: '', at: 0 });
  assert.deepEqual(await agent.getStateVersioned(), { state: merged, version: 1 });
  // Another default changes nothing now that a state is stored.
  const other = await store.open({ initialState: { z: 0 } });
  assert.deepEqual(await other.getState(), merged);
});

eachBackend('initialState given as a function is called for each read and for the first write', async (t, store) => {
  let n = 0;
  const agent = await store.open({ initialState: () => ({ n: (n += 1) }) });
  const first = (await agent.getState()).n;
  assert.deepEqual(await agent.getState(), { n: first + 1 });
  assert.deepEqual(await agent.getState(), { n: first + 2 });
  const written = await agent.setState({ w: true });
  assert.equal(written.w, true);
  assert.ok(written.n >= first + 2, `the first write starts from the initial state: ${JSON.stringify(written)}`);
  assert.deepEqual(await agent.getState(), written);
  const calls = n;
  await agent.getState();
  assert.equal(n, calls, 'initialState() is not called while a state is stored');
});

eachBackend('the initial state a read returns is a fresh copy: changing it changes nothing stored', async (t, store) => {
  const initial = { list: [1] };
  const agent = await store.open({ initialState: initial });
  const read = await agent.getState();
  read.list.push(2);
  assert.deepEqual(await agent.getState(), { list: [1] });
  assert.deepEqual(initial, { list: [1] });
  assert.deepEqual(await agent.setState({ x: 1 }), { list: [1], x: 1 });
});

eachBackend('onStateChanged(next, prev) fires after the commit, for setState and replaceState', async (t, store) => {
  const seen = [];
  const agent = await store.open({
    initialState: { n: 0 },
    async onStateChanged(next, prev) {
      // After the commit: another handle already reads the new state.
      const reader = await store.open();
      seen.push({ next, prev, committed: await reader.getState() });
      await reader.close();
    },
  });
  await agent.setState({ n: 1 });
  await agent.replaceState({ r: true });
  await agent.setState({ r: null, n: 2 });
  assert.deepEqual(seen, [
    { next: { n: 1 }, prev: { n: 0 }, committed: { n: 1 } },
    { next: { r: true }, prev: { n: 1 }, committed: { r: true } },
    { next: { n: 2 }, prev: { r: true }, committed: { n: 2 } },
  ]);
});

eachBackend('the write resolves after its hook ran', async (t, store) => {
  let finished = false;
  const agent = await store.open({
    async onStateChanged() {
      await new Promise((resolve) => setImmediate(resolve));
      finished = true;
    },
  });
  await agent.setState({ a: 1 });
  assert.equal(finished, true);
});

eachBackend('hooks see many concurrent Promises in commit order: each prev is the previous next', async (t, store) => {
  const deliveries = [];
  const agent = await store.open({
    initialState: {},
    onStateChanged(next, prev) {
      deliveries.push({ next, prev });
    },
  });
  const n = 100;
  const results = await Promise.all(Array.from({ length: n }, (_, i) => agent.setState({ [`k${i}`]: i })));
  assert.equal(deliveries.length, n);
  assert.deepEqual(deliveries[0].prev, {});
  for (let i = 1; i < n; i++) {
    assert.deepEqual(deliveries[i].prev, deliveries[i - 1].next, `delivery ${i}: prev is the previous next`);
    assert.equal(Object.keys(deliveries[i].next).length, i + 1);
  }
  const final = await agent.getState();
  assert.deepEqual(deliveries[n - 1].next, final);
  assert.equal(Object.keys(final).length, n);
  // Each write's result holds its own key and every key committed before it.
  for (let i = 0; i < n; i++) assert.equal(results[i][`k${i}`], i);
});

eachBackend('a subclass as in the reference: initialState and onStateChanged overridden, its own methods', async (t, store) => {
  class Conversation extends Agent {
    changes = [];

    initialState() {
      return { status: 'idle', lastReply: '', at: 0 };
    }

    async onStateChanged(next, prev) {
      this.changes.push([prev.status, next.status]);
    }

    async process(reply) {
      await this.setState({ status: 'processing' });
      return this.setState({ status: 'idle', lastReply: reply, at: 42 });
    }
  }
  const conversation = await store.open({}, Conversation);
  assert.ok(conversation instanceof Conversation);
  assert.ok(conversation instanceof Agent);
  assert.deepEqual(await conversation.getState(), { status: 'idle', lastReply: '', at: 0 });
  assert.deepEqual(await conversation.process('hello'), { status: 'idle', lastReply: 'hello', at: 42 });
  assert.deepEqual(conversation.changes, [['idle', 'processing'], ['processing', 'idle']]);
  // Conversation.open works too (the static open makes an instance of the class it is called on).
  const again = await Conversation.open(store.path, { ...store.options });
  store.agents.push(again);
  assert.ok(again instanceof Conversation);
  assert.deepEqual(await again.getState(), { status: 'idle', lastReply: 'hello', at: 42 });
});

eachBackend('the plain object form: openAgent(path, {initialState, onStateChanged})', async (t, store) => {
  const seen = [];
  const agent = await openAgent(store.path, {
    ...store.options,
    initialState: { count: 0 },
    onStateChanged: (next, prev) => seen.push([prev.count, next.count]),
  });
  store.agents.push(agent);
  assert.ok(agent instanceof Agent);
  assert.deepEqual(await agent.getState(), { count: 0 });
  await agent.setState({ count: 1 });
  await agent.replaceState({ count: 2 });
  assert.deepEqual(seen, [[0, 1], [1, 2]]);
});

eachBackend('a hook that throws: the write rejects with HookError naming its message; the change is committed', async (t, store) => {
  const agent = await store.open({
    onStateChanged(next) {
      if (next.boom) throw new Error('the hook saw boom');
    },
  });
  await agent.setState({ a: 1 });
  const error = await rejectsWith(agent.setState({ boom: true }), HookError, 'the hook saw boom');
  assert.ok(error.cause instanceof Error);
  assert.deepEqual(await agent.getStateVersioned(), { state: { a: 1, boom: true }, version: 2 });
  const other = await store.open();
  assert.deepEqual(await other.getState(), { a: 1, boom: true });
  // The agent stays usable, and later writes without a failure resolve.
  await rejectsWith(agent.replaceState({ boom: 2 }), HookError, 'the hook saw boom');
  assert.deepEqual(await agent.setState({ boom: null }), {});
  assert.equal((await agent.getStateVersioned()).version, 4);
});

eachBackend('a hook that rejects (async): the write rejects with HookError; the change is committed', async (t, store) => {
  class Failing extends Agent {
    async onStateChanged(next) {
      await null;
      if (next.bad) throw new RangeError(`bad value ${next.bad}`);
    }
  }
  const agent = await store.open({}, Failing);
  await rejectsWith(agent.setState({ bad: 7 }), HookError, 'bad value 7');
  assert.deepEqual(await agent.getStateVersioned(), { state: { bad: 7 }, version: 1 });
});

eachBackend('a hook failure belongs to its own write: concurrent writes without a failure resolve', async (t, store) => {
  const agent = await store.open({
    onStateChanged(next, prev) {
      if (next.fail && !prev.fail) throw new Error('fail set');
    },
  });
  const outcomes = await Promise.allSettled([
    agent.setState({ a: 1 }),
    agent.setState({ fail: true }),
    agent.setState({ b: 2 }),
  ]);
  assert.equal(outcomes[0].status, 'fulfilled');
  assert.equal(outcomes[1].status, 'rejected');
  assert.ok(outcomes[1].reason instanceof HookError);
  assert.equal(outcomes[2].status, 'fulfilled');
  assert.deepEqual(await agent.getState(), { a: 1, fail: true, b: 2 });
});

eachBackend('a write that changes nothing commits nothing: same version, no hook', async (t, store) => {
  let hooks = 0;
  const agent = await store.open({ onStateChanged: () => { hooks += 1; } });
  await agent.setState({ a: [1, { b: null }], c: 'x' });
  assert.equal(hooks, 1);
  const cases = [
    () => agent.setState({}),
    () => agent.setState({ c: 'x' }),
    () => agent.setState({ missing: null }),
    () => agent.setState({ a: [1, { b: null }] }),
    () => agent.replaceState({ a: [1, { b: null }], c: 'x' }),
    () => agent.setStateIf(1, {}),
  ];
  for (const write of cases) {
    const result = await write();
    const state = result.state !== undefined && result.version !== undefined ? result.state : result;
    assert.deepEqual(state, { a: [1, { b: null }], c: 'x' });
    assert.equal((await agent.getStateVersioned()).version, 1);
  }
  assert.equal(hooks, 0 + 1, 'no hook for a write that changed nothing');
  // A replacement that only reorders members is a change (the stored bytes differ).
  await agent.replaceState({ c: 'x', a: [1, { b: null }] });
  assert.equal(hooks, 2);
  assert.equal((await agent.getStateVersioned()).version, 2);
});

eachBackend('getStateVersioned: version 0 while nothing is stored, then one more per change', async (t, store) => {
  const agent = await store.open({ initialState: { x: 0 } });
  assert.deepEqual(await agent.getStateVersioned(), { state: { x: 0 }, version: 0 });
  await agent.setState({ x: 1 });
  await agent.replaceState({ y: 1 });
  await agent.setState({ y: 1 });
  assert.deepEqual(await agent.getStateVersioned(), { state: { y: 1 }, version: 2 });
  // A change by another handle is seen by the next read (no stale cache).
  const other = await store.open();
  await other.setState({ z: 1 });
  assert.deepEqual(await agent.getStateVersioned(), { state: { y: 1, z: 1 }, version: 3 });
});

eachBackend('editing what a read or a write returned never changes what the next read returns', async (t, store) => {
  const agent = await store.open();
  const written = await agent.setState({ list: [1], o: { a: 1 } });
  const read = await agent.getState();
  for (const value of [written, read]) {
    // A state may be handed out frozen (then an edit throws in strict code) or as a copy.
    try { value.list.push(2); } catch (e) { assert.ok(e instanceof TypeError); }
    try { value.o.a = 99; } catch (e) { assert.ok(e instanceof TypeError); }
    try { value.added = true; } catch (e) { assert.ok(e instanceof TypeError); }
  }
  assert.deepEqual(await agent.getState(), { list: [1], o: { a: 1 } });
  assert.deepEqual(await agent.setState({ b: 1 }), { list: [1], o: { a: 1 }, b: 1 });
  const other = await store.open();
  assert.deepEqual(await other.getState(), { list: [1], o: { a: 1 }, b: 1 });
});

eachBackend('a write starts from the latest committed state, also when another handle wrote since this one read', async (t, store) => {
  const a = await store.open();
  const b = await store.open();
  await a.setState({ a: 1, n: { x: 1 } });
  assert.deepEqual(await a.getState(), { a: 1, n: { x: 1 } });
  await b.setState({ b: 2, n: { y: 2 } });
  // a's last read is stale now: its write merges into b's state, and its result says so.
  assert.deepEqual(await a.setState({ c: 3, n: { z: 3 } }), { a: 1, n: { x: 1, y: 2, z: 3 }, b: 2, c: 3 });
  assert.deepEqual(await a.getStateVersioned(), { state: { a: 1, n: { x: 1, y: 2, z: 3 }, b: 2, c: 3 }, version: 3 });
  await b.replaceState({ only: true });
  assert.deepEqual(await a.setState({ more: 1 }), { only: true, more: 1 });
  await b.setState({ only: null });
  assert.deepEqual(await a.getState(), { more: 1 });
});

eachBackend('a write that changes nothing returns the latest committed state, also when this handle is one version behind', async (t, store) => {
  const a = await store.open();
  const b = await store.open();
  assert.deepEqual(await a.setState({ more: 1 }), { more: 1 });
  // b commits version 2; a still holds version 1. a's patch changes nothing in version 2, so
  // nothing is committed and the call returns version 2 as stored: b's member included.
  await b.setState({ fromB: 1 });
  assert.deepEqual(await a.setStateIf(undefined, { more: 1 }), { state: { more: 1, fromB: 1 }, version: 2 });
  await b.setState({ fromB: 2 });
  assert.deepEqual(await a.setState({ more: 1 }), { more: 1, fromB: 2 });
  await b.setState({ fromB: 3 });
  assert.deepEqual(await a.replaceState({ more: 1, fromB: 3 }), { more: 1, fromB: 3 });
  assert.deepEqual(await a.getStateVersioned(), { state: { more: 1, fromB: 3 }, version: 4 });
});

eachBackend('close: isOpen turns false, close twice is harmless, Symbol.asyncDispose closes', async (t, store) => {
  const agent = await store.open();
  assert.equal(agent.isOpen, true);
  assert.equal(agent.path, store.path);
  await agent.close();
  assert.equal(agent.isOpen, false);
  await agent.close();
  const other = await store.open();
  await other[Symbol.asyncDispose]();
  assert.equal(other.isOpen, false);
});

eachBackend('concurrent writes on one agent, one of which changes nothing: each result holds every change committed before the call', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ x: 1 });
  for (let i = 0; i < 20; i++) {
    const [changed, unchanged] = await Promise.all([agent.setState({ [`a${i}`]: i }), agent.setState({ x: 1 })]);
    assert.equal(changed[`a${i}`], i);
    // Every a<j> for j < i was committed before this round began.
    for (let j = 0; j < i; j++) {
      assert.equal(unchanged[`a${j}`], j, `round ${i}: the result of the write that changed nothing lacks a${j}: ${JSON.stringify(unchanged)}`);
    }
  }
  const { state, version } = await agent.getStateVersioned();
  assert.equal(version, 21);
  assert.equal(Object.keys(state).length, 21);
});

eachBackend('a failing hook does not stop the others: every hook sees every change, the first failure is reported', async (t, store) => {
  const order = [];
  class Watched extends Agent {
    onStateChanged() {
      order.push('onStateChanged');
      throw new Error('the first hook failed');
    }
  }
  const agent = await store.open({}, Watched);
  agent.subscribe(() => { order.push('second'); throw new Error('the second hook failed'); });
  agent.subscribe(() => { order.push('third'); });
  const error = await rejectsWith(agent.setState({ a: 1 }), HookError, 'the first hook failed');
  assert.equal(error.cause.message, 'the first hook failed');
  assert.deepEqual(order, ['onStateChanged', 'second', 'third']);
  assert.deepEqual(await agent.getStateVersioned(), { state: { a: 1 }, version: 1 });
});

eachBackend('a large state under many small patches reads the same through this handle, another one and a fresh one', async (t, store) => {
  const agent = await store.open({ synchronous: 'normal' });
  const other = await store.open();
  const items = {};
  for (let i = 0; i < 500; i++) items[`item${i}`] = { name: `name ${i}`, tags: ['a', 'b'], n: i, text: 'x'.repeat(80) };
  await agent.replaceState({ items, count: 0 });
  let expected = { items, count: 0 };
  let written;
  for (let i = 0; i < 300; i++) {
    const k = `item${(i * 7) % 500}`;
    const patch = i % 10 === 0
      ? { items: { [k]: null }, count: i }
      : { items: { [k]: { n: -i, extra: { at: i } } }, count: i };
    const next = JSON.parse(JSON.stringify(expected));
    if (patch.items[k] === null) delete next.items[k];
    else next.items[k] = { ...(next.items[k] || {}), n: -i, extra: { at: i } };
    next.count = i;
    expected = next;
    written = await agent.setState(patch);
    if (i % 50 === 0) {
      assert.deepEqual(written, expected, `write ${i}`);
      assert.deepEqual(await other.getState(), expected, `another handle after write ${i}`);
    }
  }
  assert.deepEqual(await agent.getState(), expected);
  assert.deepEqual(await other.getState(), expected);
  const fresh = await store.open();
  const read = await fresh.getStateVersioned();
  assert.deepEqual(read, { state: expected, version: 301 });
  // Member order too: what the last write returned is what the library stored.
  assert.equal(JSON.stringify(written), JSON.stringify(read.state));
});
