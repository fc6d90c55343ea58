'use strict';
// The change log (open option changeLog: {keepLast: N}): changesSince, the changes() async
// iterator, stateAt, restore, poll() delivering other handles' changes; and the store's agents:
// listAgents, deleteAgent, expireAgents.

const assert = require('node:assert/strict');
const { eachBackend, rejectsWith, agentState, newAgentId } = require('./backends');

const { GapError, ConflictError, InvalidArgumentError, listAgents, deleteAgent, expireAgents } = agentState;

const LOG = { changeLog: { keepLast: 100 } };

eachBackend('changesSince lists the changes after a version: version, time, patch (null for a replacement), next', async (t, store) => {
  const agent = await store.open({ ...LOG, initialState: { n: 0 } });
  const before = Date.now();
  await agent.setState({ n: 1, d: new Date(5) });
  await agent.replaceState({ r: new Map([[1, 'one']]) });
  await agent.setState({ r: null, s: new Set(['x']) });
  await agent.setState({ s: new Set(['x']) }); // changes nothing: not logged
  const changes = await agent.changesSince(0);
  assert.deepEqual(changes.map((c) => c.version), [1, 2, 3]);
  assert.deepEqual(changes.map((c) => c.patch), [{ n: 1, d: new Date(5) }, null, { r: null, s: new Set(['x']) }]);
  assert.deepEqual(changes.map((c) => c.next), [{ n: 1, d: new Date(5) }, { r: new Map([[1, 'one']]) }, { s: new Set(['x']) }]);
  for (const c of changes) {
    assert.ok(c.at instanceof Date);
    // The clocks of a server and of this process may differ a little: only sanity here.
    assert.ok(Math.abs(c.at.getTime() - before) < 10 * 60 * 1000, `change time ${c.at.toISOString()}`);
  }
  assert.deepEqual((await agent.changesSince(2)).map((c) => c.version), [3]);
  assert.deepEqual(await agent.changesSince(3), []);
});

eachBackend('the changes() async iterator walks the log, and with follow waits for new changes until aborted', async (t, store) => {
  const agent = await store.open(LOG);
  for (let i = 1; i <= 3; i++) await agent.setState({ i });
  const seen = [];
  for await (const change of agent.changes()) seen.push(change.version);
  assert.deepEqual(seen, [1, 2, 3]);
  const after = [];
  for await (const change of agent.changes({ after: 2 })) after.push(change.next);
  assert.deepEqual(after, [{ i: 3 }]);

  // follow: changes another handle commits arrive; aborting the signal ends the loop.
  const writer = await store.open();
  const controller = new AbortController();
  const followed = [];
  const loop = (async () => {
    for await (const change of agent.changes({ after: 3, follow: true, intervalMs: 5, signal: controller.signal })) {
      followed.push(change.next.i);
      if (change.next.i === 6) controller.abort();
    }
  })();
  for (let i = 4; i <= 6; i++) await writer.setState({ i });
  await loop;
  assert.deepEqual(followed, [4, 5, 6]);
});

eachBackend('stateAt gives a logged version\'s state; restore writes it back as a new change', async (t, store) => {
  const seen = [];
  const agent = await store.open({ ...LOG, onStateChanged: (next, prev) => seen.push([prev, next]) });
  await agent.setState({ a: 1, b: [1] });
  await agent.setState({ a: 2 });
  await agent.replaceState({ c: new Uint8Array([1, 2]) });
  assert.deepEqual(await agent.stateAt(1), { a: 1, b: [1] });
  assert.deepEqual(await agent.stateAt(2), { a: 2, b: [1] });
  assert.deepEqual(await agent.stateAt(3), { c: new Uint8Array([1, 2]) });
  const restored = await agent.restore(1);
  assert.deepEqual(restored, { state: { a: 1, b: [1] }, version: 4 });
  assert.deepEqual(await agent.getStateVersioned(), restored);
  assert.deepEqual(seen.at(-1), [{ c: new Uint8Array([1, 2]) }, { a: 1, b: [1] }]);
  // Restoring the current state changes nothing.
  assert.deepEqual(await agent.restore(4), { state: { a: 1, b: [1] }, version: 4 });
  assert.equal(seen.length, 4);
});

eachBackend('the log keeps the last N changes: older ones are a GapError', async (t, store) => {
  const agent = await store.open({ changeLog: { keepLast: 2 } });
  for (let i = 1; i <= 5; i++) await agent.setState({ i });
  assert.deepEqual((await agent.changesSince(3)).map((c) => c.version), [4, 5]);
  await rejectsWith(agent.changesSince(0), GapError);
  await rejectsWith(agent.stateAt(1), GapError);
  await rejectsWith(agent.restore(1), GapError);
  assert.deepEqual(await agent.stateAt(5), { i: 5 });
  assert.equal((await agent.getStateVersioned()).version, 5);
});

eachBackend('poll() delivers to this agent\'s hooks, in commit order, the changes another handle committed', async (t, store) => {
  const seen = [];
  const watcher = await store.open({ ...LOG, onStateChanged: (next, prev) => seen.push({ next, prev }) });
  const writer = await store.open(LOG);
  assert.equal(await watcher.poll(), 0);
  await writer.setState({ a: 1 });
  await writer.setState({ b: 2 });
  await writer.replaceState({ c: 3 });
  assert.equal(await watcher.poll(), 3);
  assert.deepEqual(seen, [
    { next: { a: 1 }, prev: {} },
    { next: { a: 1, b: 2 }, prev: { a: 1 } },
    { next: { c: 3 }, prev: { a: 1, b: 2 } },
  ]);
  assert.equal(await watcher.poll(), 0, 'each change is delivered once');
  // A write through the watcher first delivers what others committed, then its own change.
  await writer.setState({ d: 4 });
  await watcher.setState({ e: 5 });
  assert.deepEqual(seen.slice(3), [
    { next: { c: 3, d: 4 }, prev: { c: 3 } },
    { next: { c: 3, d: 4, e: 5 }, prev: { c: 3, d: 4 } },
  ]);
  // A subscriber added later gets what follows, and unsubscribes.
  const late = [];
  const unsubscribe = watcher.subscribe((next) => late.push(next));
  await writer.setState({ f: 6 });
  await watcher.poll();
  unsubscribe();
  await writer.setState({ g: 7 });
  await watcher.poll();
  assert.deepEqual(late, [{ c: 3, d: 4, e: 5, f: 6 }]);
  assert.equal(seen.length, 7);
});

eachBackend('listAgents, deleteAgent and expireAgents on a store of several agents', async (t, store) => {
  const prefix = `${newAgentId()}_`;
  const ids = ['a', 'b', 'c'].map((s) => prefix + s);
  for (const [k, id] of ids.entries()) {
    const agent = await agentState.openAgent(store.path, { agentId: id });
    store.agents.push(agent);
    for (let i = 0; i <= k; i++) await agent.setState({ i });
  }
  // An agent opened but never written is not listed.
  store.agents.push(await agentState.openAgent(store.path, { agentId: `${prefix}z` }));
  const listed = await listAgents(store.path, { prefix });
  assert.deepEqual(listed.map((e) => [e.agentId, e.version]), [[ids[0], 1], [ids[1], 2], [ids[2], 3]]);
  for (const e of listed) {
    assert.ok(e.writtenAt instanceof Date && !Number.isNaN(e.writtenAt.getTime()));
    assert.equal(typeof e.bytes, 'number');
  }
  assert.deepEqual((await listAgents(store.path, { prefix, limit: 1 })).map((e) => e.agentId), [ids[0]]);
  assert.deepEqual((await listAgents(store.path, { prefix, after: ids[0] })).map((e) => e.agentId), [ids[1], ids[2]]);

  // deleteAgent: the version it had; null when nothing was stored; ifVersion guards it.
  await rejectsWith(deleteAgent(store.path, ids[1], { ifVersion: 1 }), ConflictError);
  assert.equal(await deleteAgent(store.path, ids[1], { ifVersion: 2 }), 2);
  assert.equal(await deleteAgent(store.path, ids[1]), null);
  assert.deepEqual((await listAgents(store.path, { prefix })).map((e) => e.agentId), [ids[0], ids[2]]);
  const reopened = await agentState.openAgent(store.path, { agentId: ids[1], initialState: { fresh: true } });
  store.agents.push(reopened);
  assert.deepEqual(await reopened.getStateVersioned(), { state: { fresh: true }, version: 0 });

  // expireAgents: nothing is idle for an hour; everything is idle for 0 ms (dryRun lists only).
  assert.deepEqual(await expireAgents(store.path, { idleMs: 3600 * 1000 }), []);
  if (!store.postgres) {
    // On a shared server other tests' agents are idle too: expire everything only in a file.
    const dry = await expireAgents(store.path, { idleMs: 0, dryRun: true });
    assert.deepEqual(dry.map((e) => e.agentId).sort(), [ids[0], ids[2]]);
    assert.equal((await listAgents(store.path, { prefix })).length, 2);
    const expired = await expireAgents(store.path, { idleMs: 0, limit: 1 });
    assert.equal(expired.length, 1);
    assert.equal((await listAgents(store.path, { prefix })).length, 1);
  }
  await rejectsWith(expireAgents(store.path, {}), InvalidArgumentError);
  await rejectsWith(listAgents(store.path, { prefix, limit: -1 }), InvalidArgumentError);
});

eachBackend('GapError names the versions the log no longer holds', async (t, store) => {
  const agent = await store.open({ changeLog: { keepLast: 2 } });
  for (let i = 1; i <= 6; i++) await agent.setState({ i });
  const gap = await rejectsWith(agent.changesSince(1), GapError);
  assert.equal(typeof gap.first, 'number');
  assert.equal(typeof gap.last, 'number');
  assert.ok(gap.first >= 2 && gap.last <= 4 && gap.first <= gap.last, `missing ${gap.first}..${gap.last}`);
});

eachBackend('changeLog: false switches the log off and drops it; another handle of the agent then logs nothing', async (t, store) => {
  const agent = await store.open(LOG);
  await agent.setState({ a: 1 });
  assert.equal((await agent.changesSince(0)).length, 1);
  const off = await store.open({ changeLog: false });
  await off.setState({ b: 2 });
  const reopened = await store.open();
  await reopened.setState({ c: 3 });
  // With the log off, nothing is listed (or the log says it holds nothing from there).
  let listed;
  try {
    listed = await reopened.changesSince(0);
  } catch (error) {
    assert.ok(error instanceof GapError || error instanceof agentState.AgentError, `${error}`);
    listed = [];
  }
  assert.deepEqual(listed, []);
  assert.deepEqual(await reopened.getStateVersioned(), { state: { a: 1, b: 2, c: 3 }, version: 3 });
});

eachBackend('the store functions refuse unknown options and take the connection\'s options', async (t, store) => {
  await rejectsWith(listAgents(store.path, { bogusOption: 1 }), InvalidArgumentError, 'bogus_option');
  await rejectsWith(deleteAgent(store.path, 'x', { bogusOption: 1 }), InvalidArgumentError);
  await rejectsWith(expireAgents(store.path, { idleMs: 1, bogusOption: 1 }), InvalidArgumentError);
  const agent = await store.open();
  await agent.setState({ a: 1 });
  const listed = await listAgents(store.path, { busyTimeoutMs: 1000, serverTimeoutMs: 5000, prefix: store.options.agentId || '' });
  assert.ok(listed.length >= 1);
});

eachBackend('an open agent sees its deletion at the next read, and versions never go back', async (t, store) => {
  const id = store.options.agentId || newAgentId();
  const agent = await agentState.openAgent(store.path, { agentId: id, initialState: { init: true } });
  store.agents.push(agent);
  await agent.setState({ a: 1 });
  assert.deepEqual(await agent.getStateVersioned(), { state: { init: true, a: 1 }, version: 1 });
  assert.equal(await deleteAgent(store.path, id), 1);
  assert.deepEqual(await agent.getStateVersioned(), { state: { init: true }, version: 0 });
  // The next first write takes the version after the deleted one: a compare-and-set against a
  // version read before the deletion cannot succeed by accident.
  await rejectsWith(agent.setStateIf(1, { b: 1 }), ConflictError);
  assert.deepEqual(await agent.setState({ b: 1 }), { init: true, b: 1 });
  assert.deepEqual(await agent.getStateVersioned(), { state: { init: true, b: 1 }, version: 2 });
});

eachBackend('a long changes({ follow }) does not pile up abort listeners on its signal', async (t, store) => {
  const agent = await store.open(LOG);
  const writer = await store.open(LOG);
  await agent.setState({ a: 1 });
  const controller = new AbortController();
  const signal = controller.signal;
  let live = 0;
  let added = 0;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  const wrapped = new Map();
  let wrote = null;
  signal.addEventListener = (type, listener, options) => {
    // A once-listener that fires is gone too: counted out when it runs.
    const counted = (...args) => { live -= 1; wrapped.delete(listener); return listener(...args); };
    wrapped.set(listener, counted);
    live += 1;
    added += 1;
    // After many waits with nothing new, another handle commits a change; the loop's body then
    // aborts the signal.
    if (added === 200) wrote = writer.setState({ b: 2 });
    return add(type, counted, options);
  };
  signal.removeEventListener = (type, listener, options) => {
    const counted = wrapped.get(listener);
    if (counted !== undefined) {
      live -= 1;
      wrapped.delete(listener);
      return remove(type, counted, options);
    }
    return remove(type, listener, options);
  };
  const seen = [];
  let liveAtTheEnd;
  for await (const change of agent.changes({ follow: true, intervalMs: 1, signal })) {
    seen.push(change.version);
    if (change.version === 2) {
      liveAtTheEnd = live;
      controller.abort();
    }
  }
  await wrote;
  assert.deepEqual(seen, [1, 2]);
  assert.ok(added >= 200);
  assert.ok(liveAtTheEnd <= 1, `${liveAtTheEnd} abort listeners on the signal after ${added} were added`);
});

eachBackend('poll() delivers the changes another process committed, in commit order', async (t, store) => {
  const { startChild } = require('./children');
  const seen = [];
  const watcher = await store.open({ ...LOG, onStateChanged: (next, prev) => seen.push({ next, prev }) });
  assert.equal(await watcher.poll(), 0);
  const writer = startChild('writer', [], store, LOG);
  t.after(() => writer.kill());
  const acked = [];
  while (acked.length < 5) acked.push(await writer.next());
  await writer.kill('SIGKILL');
  const delivered = await watcher.poll();
  assert.ok(delivered >= 5, `${delivered} changes delivered`);
  assert.equal(seen.length, delivered);
  assert.deepEqual(seen[0], { prev: {}, next: { k0: 0 } });
  for (let i = 1; i < seen.length; i++) {
    assert.deepEqual(seen[i].prev, seen[i - 1].next);
    assert.equal(seen[i].next[`k${i}`], i);
  }
  assert.deepEqual(seen.at(-1).next, await watcher.getState());
});

// As in the other bindings (Python: HookError from poll(), after every delivery was made).
eachBackend('a hook failing on a change poll() delivers: poll rejects with HookError after delivering them all', async (t, store) => {
  const calls = [];
  const watcher = await store.open({
    ...LOG,
    onStateChanged(next) {
      calls.push(next.x);
      if (next.x === 1) throw new Error('mirror down');
    },
  });
  const writer = await store.open(LOG);
  await writer.setState({ x: 1 });
  await writer.setState({ x: 2 });
  const error = await rejectsWith(watcher.poll(), agentState.HookError, 'mirror down');
  assert.equal(error.cause.message, 'mirror down');
  assert.deepEqual(calls, [1, 2]);
  assert.equal(await watcher.poll(), 0, 'the deliveries were all made');
  // The failure is not reported again by a later write.
  assert.deepEqual(await watcher.setState({ y: 1 }), { x: 2, y: 1 });
});

eachBackend('a polling agent stays current while another handle commits: its reads never go back, a stale compare-and-set conflicts', async (t, store) => {
  const polled = [];
  const a = await store.open({ changeLog: { keepLast: 1000 }, onStateChanged: (next, prev) => polled.push([prev, next]) });
  const w = await store.open({ busyTimeoutMs: 60000 });
  let stop = false;
  let lastVersion = 0;
  const poller = (async () => {
    while (!stop) {
      await a.poll();
      const { version } = await a.getStateVersioned();
      assert.ok(version >= lastVersion, `a read went back from version ${lastVersion} to ${version}`);
      lastVersion = version;
      await a.changesSince(Math.max(version - 1, 0));
      if (version > 0) assert.ok(await a.stateAt(version));
    }
  })();
  await Promise.all(Array.from({ length: 4 }, async (_, k) => {
    for (let i = 0; i < 25; i++) await w.setState({ [`t${k}`]: i });
  }));
  stop = true;
  await poller;
  assert.equal((await a.getStateVersioned()).version, 100);
  await rejectsWith(a.setStateIf(99, { stale: true }), ConflictError);
  await a.poll();
  assert.equal(polled.length, 100);
  for (let i = 1; i < polled.length; i++) assert.deepEqual(polled[i][0], polled[i - 1][1]);
});
