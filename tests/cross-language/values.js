'use strict';
// The values of the cross-language test, in JavaScript's types (tests/cross-language/README.md).
//
// canonical(): every codec type, nested in objects, arrays, Maps and Sets. Node, Python
// (cross.py) and Go (go/main.go) each write the same logical value, in their own types, as
// the agents "node", "python" and "go" of one store; the stored bytes must be identical.
// Members are written in byte order of their names at every level, because Go's encoder
// writes a map's keys sorted (checkSorted below keeps this file honest).

function bytes(...list) {
  return Uint8Array.from(list).buffer;
}

function canonical() {
  return {
    arrays: [1, 'two', null, true, [3, [4]], { five: 5 }],
    bigints: {
      beyondSafe: 2n ** 53n + 1n,
      huge: 2n ** 200n,
      negHuge: -(3n ** 100n),
      small: 7n,
      zero: 0n,
    },
    bytes: {
      buffer: bytes(0, 1, 2, 127, 128, 255),
      empty: new ArrayBuffer(0),
    },
    dates: {
      epoch: new Date(0),
      far: new Date('9999-12-31T23:59:59.999Z'),
      millis: new Date(Date.UTC(2026, 10, 30, 3, 6, 44, 123)),
      old: new Date(Date.UTC(1969, 6, 20, 20, 17, 40, 0)),
    },
    maps: {
      empty: new Map(),
      numberKeys: new Map([[1, 'one'], [2.5, 'two and a half'], [-3, 'minus three']]),
      objectKeys: new Map([[{ id: 1 }, 'first'], [[1, 2], 'pair'], [null, 'nothing'], [true, 'yes']]),
      stringKeys: new Map([['a', 1], ['b', { c: [1, 2] }]]),
    },
    nested: {
      deep: { deeper: { set: new Set([new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)), new Uint8Array([1, 2])]) } },
      list: [new Map([['k', new Set([1n])]]), { re: /x/g, when: new Date(0) }],
    },
    numbers: {
      float: 1.5,
      int: 42,
      maxSafe: 9007199254740991,
      negative: -7,
      small: 0.001,
    },
    regexps: {
      dotAll: /a.b/s,
      global: /a+b/gi,
      multiline: /^line$/m,
      plain: /^x$/,
      sticky: /\d+/y,
      unicode: /\p{L}+/u,
    },
    sets: {
      empty: new Set(),
      mixed: new Set([1, '1', [1], { a: 1 }, null, 2n]),
      numbers: new Set([3, 1, 2]),
      strings: new Set(['b', 'a']),
    },
    strings: {
      ascii: 'hello',
      escapes: 'quote " backslash \\ newline \n tab \t',
      unicode: 'h\u00e9llo w\u00f6rld \u2713 \u{1F600}',
    },
    tagLike: { $date: 'not a date', note: 'two members: plain data, not a tagged value' },
    typed: {
      BigInt64Array: new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n]),
      BigUint64Array: new BigUint64Array([0n, 2n ** 64n - 1n]),
      DataView: new DataView(bytes(1, 2, 3, 4)),
      Float32Array: new Float32Array([1.5, -0.25, Infinity]),
      Float64Array: new Float64Array([0.1, -1e300, -0, -Infinity]),
      Int16Array: new Int16Array([-32768, 0, 32767]),
      Int32Array: new Int32Array([-2147483648, 2147483647]),
      Int8Array: new Int8Array([-128, -1, 0, 127]),
      Uint16Array: new Uint16Array([0, 65535]),
      Uint32Array: new Uint32Array([0, 4294967295]),
      Uint8Array: new Uint8Array([0, 1, 255]),
      Uint8ClampedArray: new Uint8ClampedArray([0, 128, 255]),
      empty: new Float64Array(0),
    },
  };
}

// JavaScript's own rules (the agent "node-rules", written by Node only): an undefined member is
// left out, -0 is stored as 0, a number beyond 2 ** 53 is written with JavaScript's shortest
// digits (1152921504606847000 for 2 ** 60), a Buffer is a Uint8Array, and a view stores only
// its own bytes.
function nodeRules() {
  const backing = bytes(9, 9, 1, 0, 2, 0, 9, 9);
  return {
    beyondSafe: 2 ** 60, // JavaScript writes 1152921504606847000: the digits beyond 2 ** 53 are lost
    buffer: Buffer.from([1, 2, 3]),
    gone: undefined,
    negZero: -0,
    view: new Uint16Array(backing, 2, 2),
    window: new DataView(backing, 2, 4),
  };
}

// What Node reads back from the agent "node-rules".
function nodeRulesRead() {
  return {
    beyondSafe: 2 ** 60,
    buffer: new Uint8Array([1, 2, 3]),
    negZero: 0,
    view: new Uint16Array([1, 2]),
    window: new DataView(bytes(1, 0, 2, 0)),
  };
}

// The agents "python-extra" and "go-extra": values that only one language writes, and what a
// JavaScript reader gets from them (Date keeps milliseconds; Float16Array where Node has it).
function float16(...halfBits) {
  const Ctor = typeof globalThis.Float16Array === 'function' ? globalThis.Float16Array : Uint16Array;
  return new Ctor(Uint16Array.from(halfBits).buffer);
}

function pythonExtraRead() {
  return {
    float16: float16(0x3c00, 0xc000), // 1.0, -2.0
    micros: new Date('2026-11-30T03:06:44.123Z'), // written as .123456Z
    tupleList: [1, 2, 3], // a tuple is an array
  };
}

function goExtraRead() {
  return {
    float16: float16(0x3c00, 0xc000),
    nanos: new Date('2026-11-30T03:06:44.123Z'), // written as .123456789Z
    struct: { at: new Date(Date.UTC(2026, 10, 30, 0, 0, 0, 0)), name: 'ada', tags: ['x', 'y'] },
  };
}

// Throws unless the members of every plain object are in byte order of their names.
function checkSorted(value, path = '') {
  if (value === null || typeof value !== 'object') return;
  if (value instanceof Map) {
    for (const [k, v] of value) {
      checkSorted(k, `${path}/<key>`);
      checkSorted(v, `${path}/<value>`);
    }
    return;
  }
  if (value instanceof Set || Array.isArray(value)) {
    let i = 0;
    for (const v of value) checkSorted(v, `${path}/${i++}`);
    return;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return;
  const keys = Object.keys(value);
  const sorted = [...keys].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  if (keys.join('\0') !== sorted.join('\0')) {
    throw new Error(`values.js: the members at ${path || '/'} are not in byte order: ${keys.join(', ')}`);
  }
  for (const key of keys) checkSorted(value[key], `${path}/${key}`);
}

module.exports = { canonical, nodeRules, nodeRulesRead, pythonExtraRead, goExtraRead, checkSorted };
