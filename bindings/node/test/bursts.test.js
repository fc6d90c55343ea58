'use strict';
// A burst of calls (a Promise.all of hundreds of writes, started in one go) keeps the event loop
// turning: the calls start a few dozen per turn of the loop, in the order they were made, and
// their completions settle a few dozen per turn, so a timer or an I/O callback waits for a
// bounded slice of the burst, never for all of it. Counted, not timed: a ticker re-armed with
// setImmediate notes, at each turn, how many calls reached the addon and how many settled, and
// no turn may see more than PER_TURN_BOUND of either (the package lets 32 of each through a turn;
// the bound leaves room for the turn in which the burst is made). A binding that started or
// settled the burst in one go, or blocked the loop while the calls ran, has one turn see them
// all. A call still waiting for its turn when its signal aborts rejects with CallCancelledError
// and never reaches the addon; the others go on in order.

const assert = require('node:assert/strict');
const { eachBackend, rejectsWith, agentState } = require('./backends');
const native = require('../lib/native');

const { CallCancelledError } = agentState;

const PER_TURN_BOUND = 100;

// Records the writes that reach the addon, in order: [handle, the patch's JSON text]. The
// package's agents call these methods of the addon's handle; the spy calls the real one.
function spyOnWrites(t) {
  const reached = [];
  const proto = native.NativeAgent.prototype;
  const real = proto.setState;
  proto.setState = function setState(text, ...rest) {
    reached.push([this, text]);
    return real.call(this, text, ...rest);
  };
  t.after(() => {
    proto.setState = real;
  });
  return reached;
}

// Notes [calls reached, calls settled] at every turn of the loop until `stop()`.
function turnCounter(reached, settled) {
  const turns = [];
  let running = true;
  const tick = () => {
    turns.push([reached.length, settled()]);
    if (running) setImmediate(tick);
  };
  tick();
  return {
    stop() {
      running = false;
      turns.push([reached.length, settled()]);
      return turns;
    },
  };
}

// The largest increase of column `i` from one turn to the next.
function largestStep(turns, i) {
  let largest = 0;
  for (let k = 1; k < turns.length; k++) largest = Math.max(largest, turns[k][i] - turns[k - 1][i]);
  return largest;
}

eachBackend('a burst of 400 writes on 10 agents starts and settles a bounded number per turn of the event loop', async (t, store) => {
  const agents = [];
  for (let a = 0; a < 10; a++) {
    agents.push(await (a === 0 ? store : store.fresh()).open({ synchronous: 'normal', busyTimeoutMs: 120000 }));
  }
  for (const agent of agents) await agent.setState({ ready: true });
  const reached = spyOnWrites(t);
  let settled = 0;
  const counter = turnCounter(reached, () => settled);
  const calls = [];
  for (let i = 0; i < 40; i++) {
    agents.forEach((agent, a) => {
      calls.push(agent.setState({ [`w${i}`]: a }).then((state) => {
        settled += 1;
        return state;
      }));
    });
  }
  // Made in this turn; the most of them wait for later turns to start.
  assert.ok(reached.length <= PER_TURN_BOUND, `${reached.length} of the 400 calls started in the turn that made them`);
  const states = await Promise.all(calls);
  const turns = counter.stop();
  t.diagnostic(`${turns.length} turns; at most ${largestStep(turns, 0)} calls started and ${largestStep(turns, 1)} settled in one`);
  assert.equal(reached.length, 400);
  assert.ok(largestStep(turns, 0) <= PER_TURN_BOUND, `${largestStep(turns, 0)} calls started in one turn of the loop`);
  assert.ok(largestStep(turns, 1) <= PER_TURN_BOUND, `${largestStep(turns, 1)} calls settled in one turn of the loop`);
  // Each write merged into its agent's state, and each agent has all 40.
  states.forEach((state, k) => assert.equal(state[`w${Math.floor(k / 10)}`], k % 10));
  for (const [a, agent] of agents.entries()) {
    const { state, version } = await agent.getStateVersioned();
    assert.equal(version, 41);
    for (let i = 0; i < 40; i++) assert.equal(state[`w${i}`], a);
  }
});

eachBackend('a burst reaches the addon in call order on each agent; a call aborted while it waits for its turn never starts', async (t, store) => {
  const first = await store.open({ synchronous: 'normal', busyTimeoutMs: 120000 });
  const second = await store.fresh().open({ synchronous: 'normal', busyTimeoutMs: 120000 });
  await first.setState({ ready: true });
  await second.setState({ ready: true });
  const reached = spyOnWrites(t);
  const controller = new AbortController();
  const made = [];
  const calls = [];
  for (let i = 0; i < 150; i++) {
    for (const [name, agent] of [['first', first], ['second', second]]) {
      const patch = { [`${name}${i}`]: i };
      // The 121st call of the first agent, far past what one turn starts.
      const signal = name === 'first' && i === 120 ? controller.signal : undefined;
      made.push([name, JSON.stringify(patch)]);
      calls.push(agent.setState(patch, { signal }));
    }
  }
  assert.ok(reached.length < 240, 'the aborted call had not started when it was aborted');
  controller.abort();
  const outcomes = await Promise.allSettled(calls);
  const cancelled = outcomes.filter((o) => o.status === 'rejected');
  assert.equal(cancelled.length, 1, `rejected: ${cancelled.map((o) => o.reason).join('; ')}`);
  assert.ok(outcomes[240].status === 'rejected');
  await rejectsWith(calls[240], CallCancelledError, 'before the call began');

  // Every other call reached the addon once, in the order it was made (on each agent and overall).
  const handles = new Map([[first, reached[0][0]], [second, reached[1][0]]]);
  assert.notEqual(handles.get(first), handles.get(second));
  const names = new Map([[handles.get(first), 'first'], [handles.get(second), 'second']]);
  const expected = made.filter((_, k) => k !== 240);
  assert.deepEqual(reached.map(([handle, text]) => [names.get(handle), text]), expected);

  const one = await first.getStateVersioned();
  assert.equal(one.version, 150);
  assert.equal('first120' in one.state, false, 'nothing of the aborted call was written');
  assert.equal(one.state.first149, 149);
  const two = await second.getStateVersioned();
  assert.equal(two.version, 151);
});
