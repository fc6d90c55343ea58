'use strict';
// Schema versions: a state stored under an older schema version is upgraded on first touch,
// once, as a change of its own (kind 'migration'); a newer one is refused with
// NewerSchemaError, nothing written; readOnly reads every state as stored; steps of code run on
// the JavaScript thread inside the transaction, and a failing one is a MigrationError naming the
// step, the stored state unchanged. Each case on SQLite and PostgreSQL (backends.js).

const assert = require('node:assert/strict');
const { eachBackend, rejectsWith, agentState } = require('./backends');

const { Agent, NewerSchemaError, MigrationError, InvalidArgumentError } = agentState;

const LOG = { changeLog: { keepLast: 100 } };

// The second version of a program: `messages` added, `nick` renamed `name`.
const V2 = {
  ...LOG,
  schemaVersion: 2,
  schemaSteps: [
    { from: 0, ops: [{ op: 'default', path: '/messages', value: [] }] },
    { from: 1, ops: [{ op: 'rename', path: '/user/nick', to: 'name' }] },
  ],
};

// What a handle's listener sees: kind, schema, migratedFrom, version.
function recorder(agent) {
  const seen = [];
  agent.subscribe((next, prev, change) => {
    seen.push({ ...change });
  });
  return seen;
}

// The stored state and version as they are, through a read-only handle (which never upgrades).
async function asStored(store, schemaVersion = 0) {
  const reader = await store.open({ readOnly: true, schemaVersion });
  try {
    return await reader.getStateVersioned();
  } finally {
    await reader.close();
  }
}

eachBackend('an older state is upgraded on the first read, once; an older program is then refused', async (t, store) => {
  const v1 = await store.open(LOG);
  await v1.setState({ status: 'idle', user: { nick: 'ada' } });
  assert.equal(v1.schemaVersion, 0);

  const v2 = await store.open(V2);
  assert.equal(v2.schemaVersion, 2);
  const seen = recorder(v2);
  const read = await v2.getStateVersioned();
  assert.deepEqual(read.state, { status: 'idle', user: { name: 'ada' }, messages: [] });
  assert.equal(read.version, 2, 'the migration is a change of its own');
  assert.deepEqual(seen, [{ version: 2, kind: 'migration', schema: 2, migratedFrom: 0, patch: null }]);
  // Read again, by this handle and another one: nothing more to do.
  assert.equal((await v2.getStateVersioned()).version, 2);
  const again = await store.open(V2);
  assert.equal((await again.getStateVersioned()).version, 2);
  assert.equal(seen.length, 1);

  // The older program: every read and write refused, nothing written.
  const e = await rejectsWith(v1.getState(), NewerSchemaError, 'schema version 2');
  assert.equal(e.stored, 2);
  assert.equal(e.declared, 0);
  await rejectsWith(v1.setState({ status: 'busy' }), NewerSchemaError);
  await rejectsWith(v1.replaceState({ status: 'busy' }), NewerSchemaError);
  await rejectsWith(v1.setStateIf(2, { status: 'busy' }), NewerSchemaError);
  const fresh = await store.open(LOG);
  await rejectsWith(fresh.getState(), NewerSchemaError);
  await rejectsWith(fresh.setState({ status: 'busy' }), NewerSchemaError);
  assert.deepEqual(await asStored(store, 2), {
    state: { status: 'idle', user: { name: 'ada' }, messages: [] },
    version: 2,
  });
});

eachBackend('a write to an older state migrates it first, then writes on the new shape', async (t, store) => {
  const v1 = await store.open(LOG);
  await v1.setState({ user: { nick: 'ada' } });
  const v2 = await store.open(V2);
  const seen = recorder(v2);
  // Written without a read first: the patch is of the new shape, and lands on it.
  const state = await v2.setState({ messages: ['hi'] });
  assert.deepEqual(state, { user: { name: 'ada' }, messages: ['hi'] });
  assert.equal((await v2.getStateVersioned()).version, 3);
  assert.deepEqual(seen.map((c) => [c.kind, c.schema, c.version, c.migratedFrom]), [
    ['migration', 2, 2, 0],
    ['merge', 2, 3, null],
  ]);
});

eachBackend('a readOnly handle reads an older and a newer state as stored', async (t, store) => {
  const v1 = await store.open(LOG);
  await v1.setState({ user: { nick: 'ada' } });
  const reader = await store.open({ ...V2, readOnly: true });
  assert.deepEqual(await reader.getStateVersioned(), { state: { user: { nick: 'ada' } }, version: 1 });
  await v1.close();

  const v2 = await store.open(V2);
  await v2.getState();
  const old = await store.open({ readOnly: true });
  assert.deepEqual(await old.getStateVersioned(), {
    state: { user: { name: 'ada' }, messages: [] },
    version: 2,
  });
});

eachBackend('steps of code run on the JavaScript thread: as options, set on the agent, and declared by a class', async (t, store) => {
  const v0 = await store.open(LOG);
  await v0.setState({ n: 1 });

  // An option step (from 0) and one set on the agent (from 1).
  const calls = [];
  const v2 = await store.open({
    ...LOG,
    schemaVersion: 2,
    schemaSteps: [{ from: 0, upgrade: (s, from) => { calls.push(from); return { ...s, n: s.n + 10 }; } }],
  });
  v2.setSchemaStep(1, function addWhen(s, from) {
    calls.push(from);
    return { ...s, when: new Date(0), tags: new Set(['a']) };
  });
  const state = await v2.getState();
  assert.equal(state.n, 11);
  assert.ok(state.when instanceof Date, 'a step may return the codec\'s values');
  assert.deepEqual([...state.tags], ['a']);
  assert.deepEqual(calls, [0, 1]);

  // The class form: statics, which an option overrides.
  class V3 extends Agent {
    static schemaVersion = 3;
    static schemaSteps = [{ from: 2, upgrade: (s) => ({ ...s, n: s.n * 2 }) }];
  }
  const v3 = await store.open(LOG, V3);
  assert.equal(v3.schemaVersion, 3);
  assert.equal((await v3.getStateVersioned()).state.n, 22);
  assert.equal((await v3.getStateVersioned()).version, 3);
  class Declared extends Agent {
    static schemaVersion = 5;
  }
  const overridden = await store.fresh().open({ schemaVersion: 4 }, Declared);
  assert.equal(overridden.schemaVersion, 4);

  // upgradeState runs the steps without writing.
  const history = await v3.stateAtStored(1);
  assert.equal(history.schema, 0);
  assert.deepEqual(history.state, { n: 1 });
  v3.setSchemaStep(0, (s) => ({ ...s, n: s.n + 100 }));
  v3.setSchemaStep(1, (s) => s);
  assert.deepEqual(await v3.upgradeState(history.state, history.schema), { n: 202 });
  assert.deepEqual(await v3.upgradeState({ n: 7 }, 3), { n: 7 }, 'a state of the agent\'s version is as it is');
  assert.equal((await v3.getStateVersioned()).version, 3, 'nothing was written');
  // stateAt reads as stored too; stateAtStored tells the schema.
  assert.deepEqual(await v3.stateAt(1), { n: 1 });
  assert.equal((await v3.stateAtStored(3)).schema, 3);
});

eachBackend('a failing step is a MigrationError naming the step; the stored state is unchanged', async (t, store) => {
  const v1 = await store.open({ ...LOG, schemaVersion: 1 });
  await v1.setState({ n: 1 });
  await v1.close();

  const v2 = await store.open({ ...LOG, schemaVersion: 2 });
  v2.setSchemaStep(1, function brokenStep() {
    throw new Error('no way');
  });
  let e = await rejectsWith(v2.getState(), MigrationError, 'schema step 1 -> 2');
  assert.ok(e.message.includes('brokenStep') && e.message.includes('no way'), e.message);
  assert.equal(e.stepFrom, 1);
  e = await rejectsWith(v2.setState({ n: 2 }), MigrationError, 'schema step 1 -> 2');
  e = await rejectsWith(v2.upgradeState({ n: 1 }, 1), MigrationError, 'brokenStep');
  assert.deepEqual(await asStored(store, 2), { state: { n: 1 }, version: 1 });

  // A Promise, a non-object, no step at all: failed steps too.
  v2.setSchemaStep(1, async (s) => s);
  await rejectsWith(v2.getState(), MigrationError, 'Promise');
  v2.setSchemaStep(1, () => [1, 2]);
  await rejectsWith(v2.getState(), MigrationError, 'not a plain object');
  v2.setSchemaStep(1, null);
  await rejectsWith(v2.getState(), MigrationError, 'no step is given');
  // A result the validator refuses.
  v2.setSchemaStep(1, (s) => ({ ...s, n: -1 }));
  v2.setValidator((next) => next.n >= 0 || 'n must not be negative');
  await rejectsWith(v2.getState(), MigrationError, 'n must not be negative');
  assert.deepEqual(await asStored(store, 2), { state: { n: 1 }, version: 1 });

  // Fixed: the migration commits.
  v2.setSchemaStep(1, (s) => ({ ...s, n: s.n + 1 }));
  assert.deepEqual(await v2.getStateVersioned(), { state: { n: 2 }, version: 2 });
});

eachBackend('the change log and the listeners tell merges, replacements and migrations apart', async (t, store) => {
  const v1 = await store.open({ ...LOG, schemaVersion: 1 });
  await v1.setState({ a: 1 });
  await v1.replaceState({ b: 2 });
  const options = { ...LOG, schemaVersion: 2, schemaSteps: [{ from: 1, ops: [{ op: 'set', path: '/c', value: 3 }] }] };
  const v2 = await store.open(options);
  await v2.setState({ d: 4 });
  const log = await v2.changesSince(0);
  assert.deepEqual(log.map((c) => [c.version, c.kind, c.schema, c.migratedFrom]), [
    [1, 'merge', 1, null],
    [2, 'replace', 1, null],
    [3, 'migration', 2, 1],
    [4, 'merge', 2, null],
  ]);
  assert.equal(log[2].patch, null);
  assert.deepEqual(log[2].next, { b: 2, c: 3 });
  const followed = [];
  for await (const c of v2.changes({ after: 2 })) followed.push(c.kind);
  assert.deepEqual(followed, ['migration', 'merge']);
  // The class form's hook gets the same third argument.
  const kinds = [];
  class Watching extends Agent {
    onStateChanged(next, prev, change) {
      kinds.push(change.kind);
    }
  }
  const w = await store.open(options, Watching);
  await w.replaceState({ e: 5 });
  // A restore of a state of the older schema writes it back upgraded.
  assert.deepEqual(await w.restore(1), { state: { a: 1, c: 3 }, version: 6 });
  assert.deepEqual(kinds, ['replace', 'replace']);
  assert.deepEqual((await w.changesSince(5)).map((c) => [c.kind, c.schema]), [['replace', 2]]);
});

eachBackend('argument errors are InvalidArgumentError, nothing written', async (t, store) => {
  const agent = await store.open({ ...LOG, schemaVersion: 2, schemaSteps: [{ from: 0, ops: [] }] });
  for (const from of [-1, 1.5, '1', 2 ** 32, null, undefined]) {
    assert.throws(() => agent.setSchemaStep(from, (s) => s), InvalidArgumentError, String(from));
  }
  assert.throws(() => agent.setSchemaStep(2, (s) => s), /schema_version 2/);
  assert.throws(() => agent.setSchemaStep(0, (s) => s), /declarative step from version 0/);
  assert.throws(() => agent.setSchemaStep(1, 'not a function'), InvalidArgumentError);
  await rejectsWith(agent.upgradeState([], 0), InvalidArgumentError);
  await rejectsWith(agent.upgradeState({}, -1), InvalidArgumentError);
  await rejectsWith(agent.upgradeState({}, 3), NewerSchemaError);

  const other = store.fresh();
  await rejectsWith(other.open({ schemaVersion: -1 }), InvalidArgumentError, 'schema_version');
  await rejectsWith(other.open({ schemaVersion: 1000001 }), InvalidArgumentError, 'schema_version');
  await rejectsWith(other.open({ schemaSteps: {} }), InvalidArgumentError, 'schemaSteps');
  await rejectsWith(other.open({ schemaVersion: 1, schemaSteps: [{ from: 0, ops: [{ op: 'drop', path: '/x' }] }] }), InvalidArgumentError);
  await rejectsWith(other.open({ schemaVersion: 1, schemaSteps: [{ from: 0, ops: [], upgrade: (s) => s }] }), InvalidArgumentError, 'both');
  await rejectsWith(other.open({ schemaVersion: 1, schemaSteps: [{ from: 0, upgrade: 'x' }] }), InvalidArgumentError, 'upgrade');
  await rejectsWith(other.open({ schemaVersion: 1, schemaSteps: [{ from: 1, upgrade: (s) => s }] }), InvalidArgumentError, 'schema_version 1');
  assert.equal((await agent.getStateVersioned()).version, 0);
});

eachBackend('a hook that throws on a read\'s migration rejects that read with HookError; the migration stays', async (t, store) => {
  const v1 = await store.open(LOG);
  await v1.setState({ user: { nick: 'ada' } });
  const v2 = await store.open(V2);
  v2.subscribe(function onMigrated(next, prev, change) {
    if (change.kind === 'migration') throw new Error('mirror down');
  });
  await rejectsWith(v2.getState(), agentState.HookError, 'onMigrated');
  assert.deepEqual(await v2.getStateVersioned(), {
    state: { user: { name: 'ada' }, messages: [] },
    version: 2,
  });
});
