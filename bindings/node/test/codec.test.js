'use strict';
// The codec in JavaScript's types: Date, Map (any keys), Set, ArrayBuffer, every TypedArray,
// DataView, BigInt and RegExp go through the store and come back as themselves; the rules for
// what JSON has no word for (undefined members left out, -0 stored as 0); and the decisions
// every binding shares (tests/conformance/README.md, "The decisions the binding values record").

const assert = require('node:assert/strict');
const test = require('node:test');
const { eachBackend, rejectsWith, agentState } = require('./backends');

const { encodeState, decodeState, CodecError } = agentState;

function everyType() {
  const bytes = new Uint8Array([0, 1, 2, 255]);
  const typed = {
    i8: new Int8Array([-128, 0, 127]),
    u8: new Uint8Array([0, 255]),
    u8c: new Uint8ClampedArray([0, 255]),
    i16: new Int16Array([-32768, 32767]),
    u16: new Uint16Array([0, 65535]),
    i32: new Int32Array([-(2 ** 31), 2 ** 31 - 1]),
    u32: new Uint32Array([0, 2 ** 32 - 1]),
    f32: new Float32Array([0.5, -1.25]),
    f64: new Float64Array([Math.PI, -0.1]),
    i64: new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n]),
    u64: new BigUint64Array([0n, 2n ** 64n - 1n]),
    empty: new Float64Array(0),
  };
  if (typeof globalThis.Float16Array === 'function') typed.f16 = new globalThis.Float16Array([1.5]);
  return {
    date: new Date('2026-11-30T03:06:44.123Z'),
    epoch: new Date(0),
    early: new Date('0001-01-01T00:00:00.000Z'),
    big: 12345678901234567890123n,
    negative: -5n,
    zero: 0n,
    map: new Map([
      ['b', 1],
      [1, 'one'],
      [{ k: [2] }, { v: null }],
      [[1, 2], true],
      [null, false],
      [new Date(7), 'a date key'],
      [new Map([[1, 2]]), 'a map key'],
      [5n, new Set([1])],
    ]),
    emptyMap: new Map(),
    set: new Set([3, '3', [3], { a: 1 }, null, true, 3n, new Date(1)]),
    emptySet: new Set(),
    buffer: bytes.buffer,
    emptyBuffer: new ArrayBuffer(0),
    typed,
    view: new DataView(new Uint8Array([9, 8, 7]).buffer),
    regexps: [/a+b/gi, /^x$/, /(?<n>.)/dgimsy, /\u{1F600}/u, /[\p{L}--[a-z]]/v],
    nested: [{ s: new Set([new Map([[new Uint8Array([1]), [new Date(2)]]])]) }],
    plain: { n: 1.5, s: 'café 中 😀', list: [null, true, { deep: {} }] },
  };
}

eachBackend('every codec type round-trips through the store as itself (deepStrictEqual)', async (t, store) => {
  const agent = await store.open();
  const state = everyType();
  const written = await agent.replaceState(state);
  assert.deepStrictEqual(written, state);
  assert.deepStrictEqual(await agent.getState(), state);
  // Another handle, and a fresh decode of the stored text, read the same values.
  const other = await store.open();
  const read = await other.getState();
  assert.deepStrictEqual(read, state);
  assert.ok(read.typed.u8c instanceof Uint8ClampedArray);
  assert.ok(read.view instanceof DataView);
  assert.ok(read.buffer instanceof ArrayBuffer);
  assert.equal(read.regexps[2].flags, 'dgimsy');
  assert.equal(read.regexps[4].flags, 'v');
  // Map keys keep their order and kind.
  assert.deepStrictEqual([...read.map.keys()].map((k) => typeof k), ['string', 'number', 'object', 'object', 'object', 'object', 'object', 'bigint']);
  // Through setState too, as a patch and in the merged result.
  const merged = await agent.setState({ plain: { extra: new Set(['x']) } });
  assert.deepStrictEqual(merged.plain, { ...state.plain, extra: new Set(['x']) });
  assert.deepStrictEqual(merged.map, state.map);
});

eachBackend('a Buffer is stored as a Uint8Array and reads back as one', async (t, store) => {
  const agent = await store.open();
  const state = await agent.setState({ b: Buffer.from('hello') });
  assert.ok(state.b instanceof Uint8Array);
  assert.deepEqual(Buffer.from(state.b).toString(), 'hello');
  // A view on part of a larger buffer stores only its own bytes.
  const whole = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);
  const part = new Uint16Array(whole.buffer, 2, 2);
  const read = await agent.setState({ part });
  assert.deepStrictEqual(read.part, new Uint16Array(new Uint8Array([3, 4, 5, 6]).buffer));
});

eachBackend('undefined members are left out (they do not delete); null deletes', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ a: 1, b: 2, nested: { c: 3 } });
  const state = await agent.setState({ a: undefined, nested: { c: undefined, d: 4 }, e: undefined });
  assert.deepStrictEqual(state, { a: 1, b: 2, nested: { c: 3, d: 4 } });
  assert.ok(!Object.hasOwn(state, 'e'));
  assert.deepStrictEqual(await agent.replaceState({ x: undefined, y: 1 }), { y: 1 });
  assert.deepStrictEqual(await agent.setState({ y: null }), {});
  assert.equal(encodeState({ a: undefined, b: [1] }), '{"b":[1]}');
});

eachBackend('-0 is stored as 0', async (t, store) => {
  const agent = await store.open();
  const state = await agent.setState({ z: -0, list: [-0], m: new Map([[-0, -0]]) });
  assert.ok(Object.is(state.z, 0));
  assert.ok(Object.is(state.list[0], 0));
  assert.ok(Object.is([...state.m.keys()][0], 0));
  assert.ok(Object.is((await agent.getState()).z, 0));
  assert.equal(encodeState({ z: -0 }), '{"z":0}');
});

eachBackend('a Date keeps its milliseconds; a stored date with finer digits reads truncated to them', async (t, store) => {
  const agent = await store.open();
  const d = new Date('2026-12-31T23:59:59.999Z');
  assert.deepStrictEqual((await agent.setState({ d })).d, d);
  // Microseconds and nanoseconds written by another language read as the Date of their
  // milliseconds, truncated (never rounded into the next second or year).
  const other = decodeState('{"us":{"$date":"2026-12-31T23:59:59.999999Z"},"ns":{"$date":"2026-12-31T23:59:59.999999999Z"}}');
  assert.deepStrictEqual(other, { us: d, ns: d });
  await agent.replaceState(other);
  assert.deepStrictEqual(await agent.getState(), { us: d, ns: d });
  assert.equal(encodeState({ d }), '{"d":{"$date":"2026-12-31T23:59:59.999Z"}}');
});

test('the wire forms are the codec page\'s tags', () => {
  assert.equal(encodeState({ d: new Date('2026-11-30T03:06:44.123Z') }), '{"d":{"$date":"2026-11-30T03:06:44.123Z"}}');
  assert.equal(encodeState({ b: -1234567890123456789012n }), '{"b":{"$bigint":"-1234567890123456789012"}}');
  assert.equal(encodeState({ m: new Map([[1, 'one'], ['1', null]]) }), '{"m":{"$map":[[1,"one"],["1",null]]}}');
  assert.equal(encodeState({ s: new Set([3, '3', [3]]) }), '{"s":{"$set":[3,"3",[3]]}}');
  assert.equal(encodeState({ a: new Uint8Array([0, 1, 2, 255]).buffer }), '{"a":{"$arraybuffer":"AAEC/w=="}}');
  assert.equal(encodeState({ t: new Float32Array([0, 1]) }), '{"t":{"$typedarray":{"type":"Float32Array","base64":"AAAAAAAAgD8="}}}');
  assert.equal(encodeState({ r: /a+b/gi }), '{"r":{"$regexp":{"source":"a+b","flags":"gi"}}}');
  assert.equal(encodeState({ s: '\b\f\n\r\t"\\/\u0000\u001f\u007f\u00e9\u2028😀' }), '{"s":"\\b\\f\\n\\r\\t\\"\\\\/\\u0000\\u001f\u007f\u00e9\u2028😀"}');
});

// Decision 1: a plain object whose only key is a tag name would be stored as a tagged value and
// come back as another type; every binding refuses it as a codec error. With another key it is
// plain data.
eachBackend('a plain object whose only key is a tag name is a CodecError, never stored as the tagged type', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ keep: 1 });
  const tagged = [
    { $date: '2026-11-30T03:06:44.123Z' },
    { $bigint: '1' },
    { $map: [] },
    { $set: [1] },
    { $arraybuffer: '' },
    { $typedarray: { type: 'Int8Array', base64: '' } },
    { $regexp: { source: 'a', flags: '' } },
  ];
  for (const value of tagged) {
    const name = Object.keys(value)[0];
    assert.throws(() => encodeState({ v: value }), CodecError, `encodeState of {${name}: ...}`);
    await rejectsWith(agent.setState({ v: value }), CodecError, name);
    await rejectsWith(agent.setState({ list: [value] }), CodecError);
    await rejectsWith(agent.replaceState(value), CodecError);
  }
  assert.deepEqual(await agent.getStateVersioned(), { state: { keep: 1 }, version: 1 });
  // With another member it is plain data, and stays a plain object.
  const plain = await agent.setState({ v: { $date: 'not a date', other: 1 } });
  assert.deepStrictEqual(plain.v, { $date: 'not a date', other: 1 });
});

// Decision 3: a value nested deeper than 64 levels is a codec error at every depth, also past
// the library parser's 128 (where the library alone would report malformed JSON).
eachBackend('nesting: 64 levels are stored, deeper is a CodecError at every depth', async (t, store) => {
  const agent = await store.open();
  const nest = (depth, leaf) => {
    let value = leaf;
    for (let i = 0; i < depth; i++) value = { a: value };
    return value;
  };
  const deepest = nest(63, {});
  assert.deepStrictEqual(await agent.replaceState(deepest), deepest);
  for (const depth of [64, 100, 126, 127, 128, 150, 199, 200, 5000]) {
    await rejectsWith(agent.replaceState(nest(depth, {})), CodecError, undefined);
  }
  // Tagged values count as the library counts them: a Set two levels, a Map three.
  const inArrays = (count, leaf) => {
    let value = leaf;
    for (let i = 0; i < count; i++) value = [value];
    return { a: value };
  };
  await agent.replaceState(inArrays(60, new Set([[]])));
  await rejectsWith(agent.replaceState(inArrays(61, new Set([[]]))), CodecError);
  await agent.replaceState(inArrays(60, new Map([[1, 2]])));
  await rejectsWith(agent.replaceState(inArrays(61, new Map([[1, 2]]))), CodecError);
  await rejectsWith(agent.replaceState(inArrays(63, new Date(0))), CodecError);
  assert.equal((await agent.getStateVersioned()).version, 3);
});

eachBackend('Map keys and Set items that are one for the library are a CodecError', async (t, store) => {
  const agent = await store.open();
  // Two distinct objects with the same content are one key for the library (its JSON text).
  await rejectsWith(agent.setState({ m: new Map([[{ a: 1 }, 1], [{ a: 1 }, 2]]) }), CodecError);
  await rejectsWith(agent.setState({ s: new Set([[1, 2], [1, 2]]) }), CodecError);
  // Keys that differ for the library are kept apart.
  const m = new Map([[1, 'n'], ['1', 's'], [true, 't'], [[1], 'a'], [{ a: 1, b: 2 }, 1], [{ b: 2, a: 1 }, 2]]);
  assert.deepStrictEqual((await agent.setState({ m })).m, m);
});

test('decodeState and encodeState are inverse on the codec types', () => {
  const state = everyType();
  assert.deepStrictEqual(decodeState(encodeState(state)), state);
  assert.equal(encodeState(decodeState(encodeState(state))), encodeState(state));
});

// A member named __proto__ (a user-chosen key, such as a user name) is data like any other: an
// assignment would set the object's prototype instead of the member.
eachBackend('a member named __proto__ is stored and read back as a member', async (t, store) => {
  const agent = await store.open();
  await agent.setState({ a: 1 });
  const patch = JSON.parse('{"__proto__":{"x":1},"b":2}');
  const want = JSON.parse('{"a":1,"__proto__":{"x":1},"b":2}');
  const written = await agent.setState(patch);
  assert.deepStrictEqual(written, want);
  assert.equal(Object.getPrototypeOf(written), Object.prototype);
  assert.deepStrictEqual(await agent.getState(), want);
  const other = await store.open();
  assert.deepStrictEqual(await other.getState(), want);
  // Also beside a member the codec tags (the encoder then writes a copy of the object).
  const tagged = { ['__proto__']: 'kept', d: new Date(3) };
  assert.equal(encodeState(tagged), '{"__proto__":"kept","d":{"$date":"1970-01-01T00:00:00.003Z"}}');
  const replaced = await agent.replaceState(tagged);
  assert.deepStrictEqual(replaced, tagged);
  assert.deepStrictEqual(await other.getState(), tagged);
  // And deleted by null like any member.
  assert.deepStrictEqual(await agent.setState(JSON.parse('{"__proto__":null}')), { d: new Date(3) });
  assert.deepStrictEqual(await other.getState(), { d: new Date(3) });
});
