'use strict';
// An agent that is garbage-collected without close() is closed: its store's file is no longer
// held open by the process. The child (node --expose-gc) counts its file descriptors that name
// the SQLite file (and its -wal and -shm files) before opening, while open and after collecting,
// for a plain agent, one with a hook, one whose validator refers to the agent itself, and a
// subclass overriding onStateChanged. SQLite only: the file descriptors are what can be counted.

const assert = require('node:assert/strict');
const test = require('node:test');
const path = require('node:path');
const fs = require('node:fs');
const { freshDir, eachBackend } = require('./backends');
const { startChild } = require('./children');

test('an agent collected unclosed is closed: its file descriptors on the store are released', async (t) => {
  const dir = freshDir();
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const store = { path: path.join(dir, 'store.db'), options: {} };
  const child = startChild('gc', [], store, {}, ['--expose-gc']);
  t.after(() => child.kill());
  const line = await child.next();
  assert.ok(line.startsWith('{'), `the child said ${line}`);
  const report = JSON.parse(line);
  t.diagnostic(`file descriptors on the store: ${line}`);
  assert.equal(report.before, 0);
  for (const [kind, counts] of Object.entries(report.kinds)) {
    assert.ok(counts.open > 0, `${kind}: the open agent holds the file`);
    assert.equal(counts.collected, 0, `${kind}: collected, the agent no longer holds the file`);
  }
  assert.equal((await child.exited).code, 0);
});

eachBackend('a process whose agents are left open (with a hook and a validator) exits by itself', async (t, store) => {
  const child = startChild('exit', [], store);
  t.after(() => child.kill());
  await child.expect('written');
  child.process.stdin.end();
  const { code } = await child.exited;
  assert.equal(code, 0);
  const agent = await store.open();
  assert.deepEqual(await agent.getState(), { left: 'open' });
});
