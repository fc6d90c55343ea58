'use strict';
// The event loop is never blocked: while a setState waits about a second for the store's write
// lock, which a child process holds (its validator waits inside its write transaction, holding
// the lock, until this process tells it to go on), this process's event loop keeps turning: the
// p99 of its delay, sampled every millisecond by perf_hooks.monitorEventLoopDelay, stays under
// 5 ms. This is the binding's asserted contract, not a benchmark.
//
// The steps are ordered by the child's messages ("holding", "committed"); the one timer sets how
// long the lock is held. A loaded machine delays an idle event loop by a few milliseconds now and
// then, so a round whose p99 is over the limit is measured again, up to three rounds: a binding
// that blocks the loop while it waits delays it by the whole second in every round.

const assert = require('node:assert/strict');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { eachBackend } = require('./backends');
const { startChild } = require('./children');

const P99_LIMIT_MS = 5;
const HOLD_MS = 1000;
const ROUNDS = 3;

async function round(t, store, agent, n) {
  const holder = startChild('hold', [], store);
  t.after(() => holder.kill());
  await holder.expect('holding');
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const release = setTimeout(() => holder.send('release'), HOLD_MS);
  const state = await agent.setState({ [`parent${n}`]: true });
  histogram.disable();
  clearTimeout(release);
  // The write waited for the child's commit: it merged into the child's state.
  assert.equal(state.holder, true);
  assert.equal(state[`parent${n}`], true);
  await holder.expect('committed');
  assert.equal((await holder.exited).code, 0);
  await agent.setState({ holder: null });
  const p99 = histogram.percentile(99) / 1e6;
  t.diagnostic(`round ${n}: event loop delay while the write waited: p99 ${p99.toFixed(2)} ms, max ${(histogram.max / 1e6).toFixed(2)} ms, ${histogram.count} samples`);
  assert.ok(histogram.count > 0, 'the loop was sampled');
  return p99;
}

eachBackend('the event loop keeps turning (p99 delay under 5 ms) while a write waits for another process\'s lock', async (t, store) => {
  const agent = await store.open({ busyTimeoutMs: 120000 });
  await agent.getState();
  const rounds = [];
  for (let n = 1; n <= ROUNDS; n++) {
    const p99 = await round(t, store, agent, n);
    rounds.push(p99.toFixed(2));
    if (p99 < P99_LIMIT_MS) return;
  }
  assert.fail(`p99 of the event loop delay over ${P99_LIMIT_MS} ms in every round: ${rounds.join(', ')} ms`);
});
