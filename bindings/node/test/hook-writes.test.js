'use strict';
// A hook may write through its own agent and await that write (the core's hooks may write; the
// Python binding's coroutine hooks await theirs). In a file of its own: a deadlock here leaves
// the event loop empty, and node:test then cancels every test still pending in the file.

const assert = require('node:assert/strict');
const { eachBackend, agentState } = require('./backends');

// The nested change is delivered after the hook returns, in commit order, and the outer write
// resolves after both deliveries.
eachBackend('a hook that awaits a write of its own agent: no deadlock, the nested change is delivered after it', async (t, store) => {
  const order = [];
  const agent = await store.open({
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
  assert.deepEqual(await agent.setState({ outer: true }), { outer: true });
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
  const agent = await store.open({
    async onStateChanged(next, prev) {
      if (!next.derived) await agent.setState({ derived: true });
      else if (!prev.derived) throw new Error('the nested change\'s hook failed');
    },
  });
  await assert.rejects(agent.setState({ outer: true }), (error) => {
    assert.ok(error instanceof agentState.HookError, `${error}`);
    assert.match(error.message, /the nested change's hook failed/);
    return true;
  });
  assert.deepEqual(await agent.getStateVersioned(), { state: { outer: true, derived: true }, version: 2 });
  // Later writes are not blamed for it.
  assert.deepEqual(await agent.setState({ later: 1 }), { outer: true, derived: true, later: 1 });
}, { timeout: 60000 });
