'use strict';
// RFC 6902 JSON Patch writes (patchState, patchStateIf) and reads of one place (getPath,
// getTail): appends with the codec's values, what hooks, the validator and the change log see,
// compare-and-set and `test`, every bad input refused with its own class and nothing written,
// and the errors' `operation` and `path`. On each backend (test/backends.js).

const assert = require('node:assert/strict');
const { eachBackend, rejectsWith, agentState } = require('./backends');

const {
  openAgent, ConflictError, InvalidArgumentError, PathError, TestFailedError, CodecError,
  StateTooLargeError, RejectedError, JSONError,
} = agentState;

const LOG = { changeLog: { keepLast: 100 } };

const append = (value) => [{ op: 'add', path: '/messages/-', value }];

eachBackend('patchState appends to a list and returns the new state; the codec\'s values travel in value', async (t, store) => {
  const agent = await store.open({ initialState: { messages: [] } });
  const first = await agent.patchState(append({ role: 'user', text: 'hi', at: new Date(5) }));
  assert.deepEqual(first, { messages: [{ role: 'user', text: 'hi', at: new Date(5) }] });
  const second = await agent.patchState([
    ...append({ role: 'assistant', text: 'hello', tokens: 12n, tags: new Set(['greeting']) }),
    { op: 'add', path: '/meta', value: { byId: new Map([[1, 'one']]) } },
  ]);
  assert.deepEqual(second.messages[1], { role: 'assistant', text: 'hello', tokens: 12n, tags: new Set(['greeting']) });
  assert.deepEqual(second.meta, { byId: new Map([[1, 'one']]) });
  const read = await agent.getStateVersioned();
  assert.equal(read.version, 2);
  assert.deepEqual(read.state, second);
  // A fresh handle reads what was stored.
  const other = await store.open();
  assert.deepEqual(await other.getState(), second);

  // Plain JSON: the result is a snapshot, as getState's, and the next read returns it.
  const plain = await (await store.fresh().open({ initialState: { list: [] } })).patchState([{ op: 'add', path: '/list/-', value: 1 }]);
  assert.ok(Object.isFrozen(plain) && Object.isFrozen(plain.list));
  assert.deepEqual(plain, { list: [1] });

  // remove, replace, move, copy and test, in one patch.
  const edited = await agent.patchState([
    { op: 'test', path: '/messages/0/role', value: 'user' },
    { op: 'replace', path: '/messages/0/text', value: 'hi!' },
    { op: 'copy', from: '/messages/0', path: '/first' },
    { op: 'move', from: '/meta', path: '/archive' },
    { op: 'remove', path: '/messages/1' },
  ]);
  assert.deepEqual(edited, {
    messages: [{ role: 'user', text: 'hi!', at: new Date(5) }],
    first: { role: 'user', text: 'hi!', at: new Date(5) },
    archive: { byId: new Map([[1, 'one']]) },
  });
  assert.equal((await agent.getStateVersioned()).version, 3);
  // openAgent's handles have the same methods.
  const plainHandle = await openAgent(store.path, { ...store.options });
  store.agents.push(plainHandle);
  assert.deepEqual(await plainHandle.getPath('/first/text'), 'hi!');
});

eachBackend('hooks and the validator see kind json_patch and the operations as patch', async (t, store) => {
  const seen = [];
  const validated = [];
  const agent = await store.open({
    initialState: { messages: [] },
    onStateChanged: (next, prev, change) => seen.push({ next, prev, ...change }),
    validator: (next, prev, patch, change) => {
      validated.push({ patch, ...change });
      if (change.kind === 'json_patch' && patch.some((op) => op.value && op.value.text === '')) return 'a message needs text';
      return true;
    },
  });
  await agent.patchState(append({ text: 'hi', at: new Date(7) }));
  await agent.patchState(append({ text: 'there' }));
  const refused = await rejectsWith(agent.patchState(append({ text: '' })), RejectedError, 'a message needs text');
  assert.ok(refused);
  await agent.setState({ status: 'done' });
  await agent.replaceState({ messages: [] });
  assert.deepEqual(seen.map((c) => [c.version, c.kind, c.patch]), [
    [1, 'json_patch', append({ text: 'hi', at: new Date(7) })],
    [2, 'json_patch', append({ text: 'there' })],
    [3, 'merge', { status: 'done' }],
    [4, 'replace', null],
  ]);
  assert.deepEqual(seen[1].prev, { messages: [{ text: 'hi', at: new Date(7) }] });
  assert.deepEqual(seen[1].next, { messages: [{ text: 'hi', at: new Date(7) }, { text: 'there' }] });
  assert.deepEqual(seen[0].schema, 0);
  assert.deepEqual(seen[0].migratedFrom, null);
  assert.deepEqual(validated.map((c) => [c.version, c.kind, c.patch]), [
    [1, 'json_patch', append({ text: 'hi', at: new Date(7) })],
    [2, 'json_patch', append({ text: 'there' })],
    [3, 'json_patch', append({ text: '' })],
    [3, 'merge', { status: 'done' }],
    [4, 'replace', null],
  ]);
  // Each hook gets its own decoded operations: editing them changes nothing elsewhere.
  const a = [];
  const b = [];
  agent.subscribe((next, prev, change) => { a.push(change.patch); change.patch[0].path = '/edited'; });
  agent.subscribe((next, prev, change) => { b.push(change.patch); });
  await agent.patchState(append({ text: 'x' }));
  assert.equal(a[0][0].path, '/edited');
  assert.deepEqual(b, [append({ text: 'x' })]);
});

eachBackend('the change log keeps each JSON Patch as its operations, says its kind, and rebuilds every state', async (t, store) => {
  const agent = await store.open({ ...LOG, initialState: { messages: [] } });
  await agent.patchState(append({ text: 'hi', at: new Date(1) }));
  await agent.patchState(append({ text: 'there' }));
  await agent.setState({ status: 'done' });
  await agent.replaceState({ messages: [] });
  const log = await agent.changesSince(0);
  assert.deepEqual(log.map((c) => c.kind), ['json_patch', 'json_patch', 'merge', 'replace']);
  assert.deepEqual(log.map((c) => c.patch), [
    append({ text: 'hi', at: new Date(1) }),
    append({ text: 'there' }),
    { status: 'done' },
    null,
  ]);
  assert.deepEqual(log[1].next, { messages: [{ text: 'hi', at: new Date(1) }, { text: 'there' }] });
  assert.deepEqual(await agent.stateAt(1), { messages: [{ text: 'hi', at: new Date(1) }] });
  const restored = await agent.restore(1);
  assert.deepEqual(restored, { state: { messages: [{ text: 'hi', at: new Date(1) }] }, version: 5 });
  const kinds = [];
  for await (const change of agent.changes({ after: 3 })) kinds.push(change.kind);
  assert.deepEqual(kinds, ['replace', 'replace']);
});

eachBackend('patchStateIf writes only at the expected version; a test operation guards a patch; a patch that changes nothing commits nothing', async (t, store) => {
  const agent = await store.open();
  const v1 = await agent.setStateIf(0, { status: 'draft', n: 1 });
  const publish = [
    { op: 'test', path: '/status', value: 'draft' },
    { op: 'replace', path: '/status', value: 'published' },
  ];
  const stale = await rejectsWith(agent.patchStateIf(v1.version + 1, publish), ConflictError);
  assert.equal(stale.expected, v1.version + 1);
  assert.equal(stale.actual, v1.version);
  const v2 = await agent.patchStateIf(BigInt(v1.version), publish);
  assert.deepEqual(v2, { state: { status: 'published', n: 1 }, version: v1.version + 1 });
  // The same patch again: its test no longer holds, named by its index and path.
  const failed = await rejectsWith(agent.patchState(publish), TestFailedError, 'operation 0');
  assert.equal(failed.operation, 0);
  assert.equal(failed.path, '/status');
  // A test of a number compares by value.
  await agent.patchState([{ op: 'test', path: '/n', value: 1.0 }]);
  // A patch whose result is the stored state commits nothing: the version stays.
  const same = await agent.patchStateIf(v2.version, [{ op: 'replace', path: '/n', value: 1 }]);
  assert.deepEqual(same, { state: { status: 'published', n: 1 }, version: v2.version });
  assert.equal((await agent.getStateVersioned()).version, v2.version);
  // An empty patch too.
  assert.deepEqual(await agent.patchStateIf(v2.version, []), { state: { status: 'published', n: 1 }, version: v2.version });
  // The options' expected works as the If form does.
  await rejectsWith(agent.patchState(publish, { expected: 0 }), ConflictError);
  await rejectsWith(agent.patchStateIf(-1, publish), InvalidArgumentError);
});

eachBackend('every bad patch is refused with its own class, and nothing is written', async (t, store) => {
  const agent = await store.open({ maxValueBytes: 4096 });
  await agent.setState({ list: [1, 2, 3], obj: { a: 1 } });
  const cases = [
    [{ op: 'add', path: '/a', value: 1 }, InvalidArgumentError, 'array'],
    ['[{"op":"add","path":"/a","value":1}]', InvalidArgumentError, 'array'],
    [null, InvalidArgumentError, 'array'],
    [[1], InvalidArgumentError],
    [[{ op: 'frob', path: '/a' }], InvalidArgumentError, 'frob'],
    [[{ op: 'add', path: '/a' }], InvalidArgumentError, 'value'],
    [[{ op: 'add', value: 1 }], InvalidArgumentError, 'path'],
    [[{ op: 'move', path: '/a' }], InvalidArgumentError, 'from'],
    [[{ op: 'add', path: '/a~2', value: 1 }], InvalidArgumentError, '~2'],
    [[{ op: 'add', path: 'a', value: 1 }], InvalidArgumentError],
    [[{ op: 'remove', path: '/list/01' }], PathError, '/list/01'],
    [[{ op: 'remove', path: '/list/3' }], PathError, '/list/3'],
    [[{ op: 'remove', path: '/nope' }], PathError, '/nope'],
    [[{ op: 'add', path: '/nope/x', value: 1 }], PathError, '/nope/x'],
    [[{ op: 'move', from: '/obj', path: '/obj/a/b' }], PathError, 'move'],
    [[{ op: 'test', path: '/obj/a', value: 2 }], TestFailedError, '/obj/a'],
    [[{ op: 'replace', path: '', value: [1] }], InvalidArgumentError, 'object'],
    // The package's codec refuses what it cannot store before the library sees it.
    [[{ op: 'add', path: '/d', value: { $date: 5 } }], CodecError, '$date'],
    [[{ op: 'add', path: '/f', value: () => 1 }], CodecError, 'function'],
    [[{ op: 'add', path: '/n', value: NaN }], CodecError],
    [[{ op: 'add', path: '/x', value: 'y'.repeat(5000) }], StateTooLargeError, 'max_value_bytes'],
    [[{ op: 'add', path: '/x', value: 'y'.repeat(3000) }, { op: 'copy', from: '/x', path: '/y' }], StateTooLargeError, 'max_value_bytes'],
  ];
  for (const [patch, cls, says] of cases) {
    const shown = (typeof patch === 'string' ? patch : JSON.stringify(patch) || String(patch)).slice(0, 60);
    await t.test(shown, async () => {
      await rejectsWith(agent.patchState(patch), cls, says);
      assert.deepEqual(await agent.getStateVersioned(), { state: { list: [1, 2, 3], obj: { a: 1 } }, version: 1 }, shown);
    });
  }
  // A second operation's failure undoes the first's; the error names the second.
  const e = await rejectsWith(agent.patchState([{ op: 'add', path: '/z', value: 1 }, { op: 'remove', path: '/q' }]), PathError);
  assert.equal(e.operation, 1);
  assert.equal(e.path, '/q');
  const moved = await rejectsWith(agent.patchState([{ op: 'move', from: '/gone', path: '/x' }]), PathError);
  assert.equal(moved.operation, 0);
  assert.equal(moved.path, '/x', "the operation's path; the message says it is its from");
  assert.ok(moved.message.includes('"from"'), moved.message);
  // A pointer with quotes, backslashes and control characters comes back as written.
  const odd = '/no"pe\\x\u0001y\n';
  const named = await rejectsWith(agent.patchState([{ op: 'remove', path: odd }]), PathError);
  assert.equal(named.path, odd);
  assert.deepEqual(await agent.getStateVersioned(), { state: { list: [1, 2, 3], obj: { a: 1 } }, version: 1 });
  // An aborted signal: nothing written.
  const controller = new AbortController();
  controller.abort();
  await rejectsWith(agent.patchState([{ op: 'add', path: '/z', value: 1 }], { signal: controller.signal }), agentState.CallCancelledError);
  assert.equal((await agent.getStateVersioned()).version, 1);
  assert.ok(JSONError, 'malformed JSON cannot reach the library from here (the package encodes)');
});

eachBackend('getPath and getTail read one place, from the initial state too', async (t, store) => {
  let calls = 0;
  const agent = await store.open({
    initialState: () => {
      calls += 1;
      return { messages: [{ t: 'first' }], 'a/b': { '~': 7 }, calls };
    },
  });
  // From the initial state, which a read never stores (asked afresh, as getState does).
  assert.deepEqual(await agent.getPath('/messages/0/t'), 'first');
  assert.equal(await agent.getPath('/a~1b/~0'), 7);
  const callsBefore = calls;
  assert.equal(await agent.getPath('/calls'), callsBefore + 1);
  assert.deepEqual(await agent.getPath(''), { messages: [{ t: 'first' }], 'a/b': { '~': 7 }, calls: calls });
  assert.equal((await agent.getStateVersioned()).version, 0);
  for (const [pointer, cls] of [
    ['/messages/1', PathError],
    ['/messages/-', PathError],
    ['/messages/00', PathError],
    ['/nope', PathError],
    ['messages', InvalidArgumentError],
    ['/a~2', InvalidArgumentError],
  ]) {
    await rejectsWith(agent.getPath(pointer), cls);
  }
  const missing = await rejectsWith(agent.getPath('/nope'), PathError);
  assert.equal(missing.path, '/nope');
  assert.equal(missing.operation, null);
  await rejectsWith(agent.getPath(1), InvalidArgumentError, 'JSON Pointer');
  assert.deepEqual(await agent.getTail('/messages', 5), [{ t: 'first' }]);
  assert.deepEqual(await agent.getTail('/messages', 0), []);
  await rejectsWith(agent.getTail('/a~1b', 1), InvalidArgumentError);
  await rejectsWith(agent.getTail('/nope', 1), PathError);
  for (const n of [-1, 1.5, NaN, '1', 2 ** 53, undefined]) {
    await rejectsWith(agent.getTail('/messages', n), InvalidArgumentError, 'whole number');
  }

  // After writes: the stored state, decoded (the codec's values come back as themselves).
  for (let i = 0; i < 5; i++) {
    await agent.patchState(append({ t: `m${i}`, at: new Date(i), n: BigInt(i) }));
  }
  assert.deepEqual(await agent.getPath('/messages/5/at'), new Date(4));
  assert.equal(await agent.getPath('/messages/5/n'), 4n);
  assert.deepEqual(await agent.getTail('/messages', 2), [
    { t: 'm3', at: new Date(3), n: 3n },
    { t: 'm4', at: new Date(4), n: 4n },
  ]);
  assert.equal((await agent.getTail('/messages', 100)).length, 6);
  // Another handle's write is seen at once.
  const other = await store.open();
  await other.patchState([{ op: 'remove', path: '/messages/0' }]);
  assert.equal((await agent.getTail('/messages', 100)).length, 5);
  assert.deepEqual(await agent.getPath('/messages/0/t'), 'm0');
  const controller = new AbortController();
  controller.abort();
  await rejectsWith(agent.getPath('', { signal: controller.signal }), agentState.CallCancelledError);
  await agent.close();
  await rejectsWith(agent.getPath(''), agentState.BadHandleError);
  await rejectsWith(agent.patchState([]), agentState.BadHandleError);
});

eachBackend('a list grown by many appends reads back the same from a fresh handle', async (t, store) => {
  const agent = await store.open({ initialState: { messages: [] } });
  const expected = [];
  for (let i = 0; i < 120; i++) {
    const message = { role: i % 2 ? 'assistant' : 'user', text: `message ${i} ${'x'.repeat(150)}`, n: i };
    await agent.patchState(append(message));
    expected.push(message);
  }
  const fresh = await store.open({ initialState: { messages: [] } });
  assert.deepEqual((await fresh.getState()).messages, expected);
  assert.deepEqual(await fresh.getTail('/messages', 1), [expected[119]]);
  assert.equal(await fresh.getPath('/messages/119/n'), 119);
});
