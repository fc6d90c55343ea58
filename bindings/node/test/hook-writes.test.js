'use strict';
// A hook may write through its own agent and await that write (the core's hooks may write; the
// Python binding's coroutine hooks await theirs), read, poll and close its agent. In a file of its
// own, and each call under a deadline: a deadlock leaves the event loop empty, and node:test then
// cancels every test still pending in the file; the deadline (far longer than any of these calls
// takes) turns a deadlock into this test's failure instead.

const assert = require('node:assert/strict');
const { eachBackend, agentState } = require('./backends');

const DEADLINE_MS = 10000;

// The agent under test is left out of the test's clean-up (which closes what store.open opened):
// after a deadlock its close() would wait for ever.
function openUnmanaged(store, options) {
  return agentState.Agent.open(store.path, { ...options, ...store.options });
}

function withinDeadline(promise, what) {
  let timer;
  const deadline = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle: a deadlock`)), DEADLINE_MS);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

// The nested change is delivered after the hook returns, in commit order, and the outer write
// resolves after both deliveries.
eachBackend('a hook that awaits a write of its own agent: no deadlock, the nested change is delivered after it', async (t, store) => {
  const order = [];
  const agent = await openUnmanaged(store, {
    async onStateChanged(next, prev) {
      order.push(['start', JSON.stringify(prev), JSON.stringify(next)]);
      if (!next.derived) {
        const inner = await agent.setState({ derived: true });
        assert.deepEqual(inner, { outer: true, derived: true });
        assert.ok(!order.some(([what, , n]) => what === 'start' && n.includes('derived')), 'the nested change is not delivered inside the hook');
      }
      order.push(['end', JSON.stringify(next)]);
    },
  });
  assert.deepEqual(await withinDeadline(agent.setState({ outer: true }), 'the outer write'), { outer: true });
  assert.deepEqual(order, [
    ['start', '{}', '{"outer":true}'],
    ['end', '{"outer":true}'],
    ['start', '{"outer":true}', '{"outer":true,"derived":true}'],
    ['end', '{"outer":true,"derived":true}'],
  ]);
  assert.deepEqual(await agent.getStateVersioned(), { state: { outer: true, derived: true }, version: 2 });
}, { timeout: 60000 });

// As in the other bindings (Python: the outer writer waits for the nested change's hook and gets
// its error): the nested change's hook failure is not lost. The nested write resolved before its
// change was delivered, so the write that is still waiting, the outer one, reports it.
eachBackend('a hook failure on a change written from inside a hook reaches the outer write', async (t, store) => {
  const agent = await openUnmanaged(store, {
    async onStateChanged(next, prev) {
      if (!next.derived) await agent.setState({ derived: true });
      else if (!prev.derived) throw new Error('the nested change\'s hook failed');
    },
  });
  await assert.rejects(withinDeadline(agent.setState({ outer: true }), 'the outer write'), (error) => {
    assert.ok(error instanceof agentState.HookError, `${error}`);
    assert.match(error.message, /the nested change's hook failed/);
    return true;
  });
  assert.deepEqual(await agent.getStateVersioned(), { state: { outer: true, derived: true }, version: 2 });
  // Later writes are not blamed for it.
  assert.deepEqual(await agent.setState({ later: 1 }), { outer: true, derived: true, later: 1 });
}, { timeout: 60000 });

eachBackend('a hook may read, poll and subscribe through its own agent', async (t, store) => {
  const seen = [];
  const agent = await openUnmanaged(store, {
    changeLog: { keepLast: 10 },
    async onStateChanged(next) {
      if (next.step !== 1) return;
      seen.push(await agent.getState());
      seen.push(await agent.poll());
      const unsubscribe = agent.subscribe(() => {});
      unsubscribe();
    },
  });
  await withinDeadline(agent.setState({ step: 1 }), 'the write whose hook polls');
  assert.deepEqual(seen, [{ step: 1 }, 0]);
}, { timeout: 60000 });

eachBackend('a hook may close its own agent: the write resolves, the agent is closed', async (t, store) => {
  const agent = await openUnmanaged(store, {
    async onStateChanged(next) {
      if (next.last) await agent.close();
    },
  });
  await agent.setState({ a: 1 });
  assert.deepEqual(await withinDeadline(agent.setState({ last: true }), 'the write whose hook closes'), { a: 1, last: true });
  assert.equal(agent.isOpen, false);
  await assert.rejects(agent.getState(), agentState.BadHandleError);
  const other = await store.open();
  assert.deepEqual(await other.getState(), { a: 1, last: true });
}, { timeout: 60000 });
