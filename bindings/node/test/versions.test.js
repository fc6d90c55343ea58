'use strict';
// Versions, compare-and-set (setStateIf / replaceStateIf) and the validator.

const assert = require('node:assert/strict');
const { isMainThread, threadId } = require('node:worker_threads');
const { eachBackend, rejectsWith, agentState } = require('./backends');

const { ConflictError, RejectedError, InvalidArgumentError } = agentState;

eachBackend('setStateIf and replaceStateIf write only at the expected version and return {state, version}', async (t, store) => {
  const agent = await store.open({ initialState: { n: 0, keep: true } });
  assert.deepEqual(await agent.setStateIf(0, { n: 1 }), { state: { n: 1, keep: true }, version: 1 });
  const conflict = await rejectsWith(agent.setStateIf(0, { n: 2 }), ConflictError, 'version');
  assert.equal(conflict.expected, 0);
  assert.equal(conflict.actual, 1);
  assert.deepEqual(await agent.getStateVersioned(), { state: { n: 1, keep: true }, version: 1 });
  const replaced = await agent.replaceStateIf(1, { r: 1 });
  assert.deepEqual(replaced, { state: { r: 1 }, version: 2 });
  const stale = await rejectsWith(agent.replaceStateIf(1, { r: 2 }), ConflictError);
  assert.deepEqual([stale.expected, stale.actual], [1, 2]);
  const ahead = await rejectsWith(agent.setStateIf(7, { r: 3 }), ConflictError);
  assert.deepEqual([ahead.expected, ahead.actual], [7, 2]);
  // Nothing was written by the conflicts, also for another handle.
  const other = await store.open();
  assert.deepEqual(await other.getStateVersioned(), { state: { r: 1 }, version: 2 });
  // A BigInt version is taken as the number it is.
  assert.deepEqual(await agent.setStateIf(2n, { r: 4 }), { state: { r: 4 }, version: 3 });
});

eachBackend('a compare-and-set against another handle\'s commit is a conflict; a retry loop wins', async (t, store) => {
  const a = await store.open();
  const b = await store.open();
  await a.setState({ n: 0 });
  const { state, version } = await a.getStateVersioned();
  await b.setState({ n: 100 });
  await rejectsWith(a.setStateIf(version, { n: state.n + 1 }), ConflictError);
  for (;;) {
    const now = await a.getStateVersioned();
    try {
      await a.setStateIf(now.version, { n: now.state.n + 1 });
      break;
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
    }
  }
  assert.equal((await b.getState()).n, 101);
});

eachBackend('a compare-and-set that changes nothing succeeds at the current version and commits nothing', async (t, store) => {
  let hooks = 0;
  const agent = await store.open({ onStateChanged: () => { hooks += 1; } });
  await agent.setState({ a: 1 });
  assert.deepEqual(await agent.setStateIf(1, { a: 1 }), { state: { a: 1 }, version: 1 });
  assert.deepEqual(await agent.replaceStateIf(1, { a: 1 }), { state: { a: 1 }, version: 1 });
  await rejectsWith(agent.setStateIf(0, {}), ConflictError);
  assert.equal(hooks, 1);
});

eachBackend('bad versions are InvalidArgumentError and nothing is written', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ a: 1 });
  for (const bad of [-1, 1.5, NaN, Infinity, '1', {}, -1n, 2 ** 53]) {
    await rejectsWith(agent.setStateIf(bad, { a: 2 }), InvalidArgumentError);
    await rejectsWith(agent.replaceStateIf(bad, { a: 2 }), InvalidArgumentError);
  }
  for (const bad of [-1, 0.5]) {
    await rejectsWith(agent.stateAt(bad), InvalidArgumentError);
    await rejectsWith(agent.changesSince(bad), InvalidArgumentError);
    await rejectsWith(agent.restore(bad), InvalidArgumentError);
  }
  assert.deepEqual(await agent.getStateVersioned(), { state: { a: 1 }, version: 1 });
});

eachBackend('the validator sees (next, prev, patch) and lets a change commit by returning nothing or true', async (t, store) => {
  const calls = [];
  const agent = await store.open({
    initialState: { n: 0 },
    validator(next, prev, patch) {
      calls.push({ next, prev, patch });
      return next.n < 10 ? undefined : true;
    },
  });
  await agent.setState({ n: 1 });
  await agent.replaceState({ n: 20, d: new Date(0) });
  assert.deepEqual(calls, [
    { next: { n: 1 }, prev: { n: 0 }, patch: { n: 1 } },
    { next: { n: 20, d: new Date(0) }, prev: { n: 1 }, patch: null },
  ]);
  assert.deepEqual(await agent.getState(), { n: 20, d: new Date(0) });
});

eachBackend('the validator rejects by false, by a string or by throwing: RejectedError, nothing written, no hook', async (t, store) => {
  let hooks = 0;
  const agent = await store.open({ onStateChanged: () => { hooks += 1; } });
  await agent.setState({ ok: 1 });
  const verdicts = [
    [() => false, undefined],
    [() => 'the state may not have the member forbidden', 'the state may not have the member forbidden'],
    [() => { throw new TypeError('thrown by the validator'); }, 'thrown by the validator'],
  ];
  for (const [verdict, message] of verdicts) {
    agent.setValidator((next) => (next.forbidden ? verdict() : undefined));
    await rejectsWith(agent.setState({ forbidden: true }), RejectedError, message);
    await rejectsWith(agent.replaceState({ forbidden: 1 }), RejectedError, message);
    await rejectsWith(agent.setStateIf(1, { forbidden: 2 }), RejectedError, message);
    assert.deepEqual(await agent.getStateVersioned(), { state: { ok: 1 }, version: 1 });
  }
  assert.equal(hooks, 1);
  // Without the validator the same write commits.
  agent.setValidator(null);
  assert.deepEqual(await agent.setState({ forbidden: true }), { ok: 1, forbidden: true });
  const other = await store.open();
  assert.deepEqual(await other.getState(), { ok: 1, forbidden: true });
});

eachBackend('a validator returning a Promise is refused: RejectedError, nothing written', async (t, store) => {
  const agent = await store.open();
  agent.setValidator(async () => true);
  await rejectsWith(agent.setState({ a: 1 }), RejectedError, 'synchronous');
  assert.deepEqual(await agent.getStateVersioned(), { state: {}, version: 0 });
  // An async validator that throws is refused the same way, and its rejected Promise is no
  // unhandled rejection (which would end the process).
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    agent.setValidator(async () => { throw new Error('async validator failed'); });
    await rejectsWith(agent.setState({ a: 2 }), RejectedError);
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  assert.deepEqual(unhandled, []);
  assert.deepEqual(await agent.getStateVersioned(), { state: {}, version: 0 });
});

eachBackend('the validator runs on the JavaScript thread, inside the write: before the commit', async (t, store) => {
  const seen = [];
  const reader = await store.open();
  const agent = await store.open({
    validator(next) {
      seen.push({ main: isMainThread, thread: threadId, next });
    },
  });
  await agent.setState({ a: 1 });
  assert.deepEqual(seen, [{ main: true, thread: 0, next: { a: 1 } }]);
  // Before the commit: a validator that rejects leaves nothing for another handle to read.
  agent.setValidator(() => false);
  await rejectsWith(agent.setState({ b: 1 }), RejectedError);
  assert.deepEqual(await reader.getState(), { a: 1 });
});

eachBackend('the validator is not called for a write that changes nothing, nor for a conflict', async (t, store) => {
  let calls = 0;
  const agent = await store.open({ validator: () => { calls += 1; } });
  await agent.setState({ a: 1 });
  assert.equal(calls, 1);
  await agent.setState({ a: 1 });
  await agent.setState({});
  await rejectsWith(agent.setStateIf(5, { a: 2 }), ConflictError);
  assert.equal(calls, 1);
});

eachBackend('the validator must be a function', async (t, store) => {
  const agent = await store.open();
  assert.throws(() => agent.setValidator('no'), InvalidArgumentError);
  await rejectsWith(store.open({ validator: 42 }), InvalidArgumentError);
});

eachBackend('versions grow by one per committed change, also across handles and reopens', async (t, store) => {
  const a = await store.open();
  for (let i = 1; i <= 5; i++) {
    const { version } = await a.setStateIf(i - 1, { i });
    assert.equal(version, i);
  }
  await a.close();
  const b = await store.open();
  assert.deepEqual(await b.getStateVersioned(), { state: { i: 5 }, version: 5 });
  assert.deepEqual(await b.replaceStateIf(5, { j: 1 }), { state: { j: 1 }, version: 6 });
});
