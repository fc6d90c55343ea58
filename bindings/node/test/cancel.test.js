'use strict';
// Cancellation by AbortSignal: a call waiting for a lock that another process holds ends with
// CallCancelledError when its signal aborts, having written nothing; an already-aborted signal
// rejects at once.

const assert = require('node:assert/strict');
const { eachBackend, rejectsWith, agentState } = require('./backends');
const { startChild } = require('./children');

const { CallCancelledError, BusyError, InvalidArgumentError } = agentState;

eachBackend('aborting the signal of a write that waits for another process\'s lock: CallCancelledError, nothing written', async (t, store) => {
  const holder = startChild('hold', [], store);
  t.after(() => holder.kill());
  await holder.expect('holding');
  // The child holds the lock now: a call that may not wait says so.
  const impatient = await store.open({ busyTimeoutMs: 0 });
  await rejectsWith(impatient.setState({ impatient: true }, { signal: new AbortController().signal }), BusyError);

  const agent = await store.open({ busyTimeoutMs: 120000 });
  const controller = new AbortController();
  const write = agent.setState({ cancelled: true }, { signal: controller.signal });
  const replace = agent.replaceState({ cancelled: true }, { signal: controller.signal });
  const outcomes = Promise.all([rejectsWith(write, CallCancelledError), rejectsWith(replace, CallCancelledError)]);
  let settled = false;
  write.then(() => { settled = true; }, () => { settled = true; });
  // Give the calls a turn of the event loop to reach the pool; they wait for the lock there.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false, 'the write waits for the lock');
  controller.abort();
  await outcomes;

  holder.send('release');
  await holder.expect('committed');
  assert.equal((await holder.exited).code, 0);
  // Nothing of the cancelled calls was written; the agent is still usable.
  assert.deepEqual(await agent.getState(), { ready: true, holder: true });
  assert.deepEqual(await agent.setState({ after: 1 }), { ready: true, holder: true, after: 1 });
  const changes = (await agent.getStateVersioned()).version;
  assert.equal(changes, 3);
});

eachBackend('an already-aborted signal rejects at once, before anything is written', async (t, store) => {
  const agent = await store.open({ changeLog: { keepLast: 10 } });
  await agent.setState({ a: 1 });
  const aborted = AbortSignal.abort();
  const calls = [
    (a) => a.setState({ a: 2 }, { signal: aborted }),
    (a) => a.replaceState({ b: 1 }, { signal: aborted }),
    (a) => a.setStateIf(1, { a: 2 }, { signal: aborted }),
    (a) => a.replaceStateIf(1, { b: 1 }, { signal: aborted }),
    (a) => a.getState({ signal: aborted }),
    (a) => a.getStateVersioned({ signal: aborted }),
    (a) => a.changesSince(0, { signal: aborted }),
    (a) => a.stateAt(1, { signal: aborted }),
    (a) => a.restore(1, { signal: aborted }),
    (a) => a.poll({ signal: aborted }),
  ];
  for (const call of calls) {
    let settled = false;
    const p = call(agent);
    p.then(() => { settled = true; }, () => { settled = true; });
    // Only microtasks run here: a call that reached the library's worker pool could not settle
    // before the event loop turns.
    for (let i = 0; i < 50 && !settled; i++) await null;
    assert.equal(settled, true, 'rejected without waiting for the pool');
    await rejectsWith(p, CallCancelledError);
  }
  await rejectsWith(agentState.openAgent(store.path, { ...store.options, signal: aborted }), CallCancelledError);
  await rejectsWith(agentState.listAgents(store.path, { signal: aborted }), CallCancelledError);
  await rejectsWith(agentState.deleteAgent(store.path, store.options.agentId || '', { signal: aborted }), CallCancelledError);
  await rejectsWith(agentState.expireAgents(store.path, { idleMs: 0, signal: aborted }), CallCancelledError);
  assert.deepEqual(await agent.getStateVersioned(), { state: { a: 1 }, version: 1 });
});

eachBackend('a signal that aborts after the call finished changes nothing; the listener is removed', async (t, store) => {
  const agent = await store.open();
  const controller = new AbortController();
  let listeners = 0;
  const add = controller.signal.addEventListener.bind(controller.signal);
  const remove = controller.signal.removeEventListener.bind(controller.signal);
  controller.signal.addEventListener = (...args) => { listeners += 1; add(...args); };
  controller.signal.removeEventListener = (...args) => { listeners -= 1; remove(...args); };
  for (let i = 0; i < 5; i++) await agent.setState({ i }, { signal: controller.signal });
  assert.equal(listeners, 0, 'each call removed its abort listener');
  controller.abort();
  assert.deepEqual(await agent.getStateVersioned(), { state: { i: 4 }, version: 5 });
  await rejectsWith(agent.setState({ a: 1 }, { signal: {} }), InvalidArgumentError);
});
