'use strict';
// The storage codec in JavaScript's own types. A state travels to the library as JSON text in
// which Date, Map, Set, ArrayBuffer, every TypedArray, DataView, BigInt and RegExp are tagged
// values ({"$date": ...}, see the book's codec page, docs/src/concepts/codec.md): byte for byte what the other languages
// write. Reading turns the tags back into the JavaScript values.
//
// Rules for what JSON has no word for (the book's codec page says the same):
// - `undefined` as an object member is left out (as JSON.stringify does): it does not delete;
//   `null` deletes. `undefined` in an array, a hole in a sparse array, NaN and ±Infinity are a
//   CodecError (JSON would silently write `null`). -0 is written as 0.
// - functions, symbols, class instances (anything but plain objects and the types above),
//   WeakMap/WeakSet/Promise and cycles are a CodecError naming the path; nothing is written.
// - a Buffer is a Uint8Array and reads back as one; symbol-named members are not stored.

const { CodecError } = require('./errors');

const TYPED = new Map([
  [Int8Array, 'Int8Array'], [Uint8Array, 'Uint8Array'], [Uint8ClampedArray, 'Uint8ClampedArray'],
  [Int16Array, 'Int16Array'], [Uint16Array, 'Uint16Array'], [Int32Array, 'Int32Array'],
  [Uint32Array, 'Uint32Array'], [Float32Array, 'Float32Array'], [Float64Array, 'Float64Array'],
  [BigInt64Array, 'BigInt64Array'], [BigUint64Array, 'BigUint64Array'],
]);
if (typeof globalThis.Float16Array === 'function') TYPED.set(globalThis.Float16Array, 'Float16Array');
const CONSTRUCTORS = new Map([...TYPED].map(([ctor, name]) => [name, ctor]));
const TypedArrayPrototype = Object.getPrototypeOf(Int8Array.prototype);

function pointer(path) {
  return path.length === 0 ? '/' : '/' + path.join('/');
}

function refuse(what, path) {
  return new CodecError(`${what} at ${pointer(path)}`);
}

function typedName(view) {
  let proto = Object.getPrototypeOf(view);
  // A subclass (Buffer is one of Uint8Array) is stored as the standard type it extends.
  while (proto && proto !== TypedArrayPrototype) {
    const name = TYPED.get(proto.constructor);
    if (name) return name;
    proto = Object.getPrototypeOf(proto);
  }
  return undefined;
}

function bytesBase64(view) {
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString('base64');
}

// The library's nesting limit, counted as it counts: an object or array is one level, a tagged
// value one ($date, $bigint, $arraybuffer, $typedarray, $regexp), a $set two and a $map three
// (its members below them). Deeper is a CodecError at every depth, also past the library
// parser's 128 levels (where the library alone would see malformed JSON).
const MAX_DEPTH = 64;

function level(depth, levels, path) {
  if (depth + levels > MAX_DEPTH) throw refuse(`nesting deeper than ${MAX_DEPTH} levels is not storable`, path);
  return depth + levels;
}

const TAG_NAMES = new Set(['$date', '$bigint', '$map', '$set', '$arraybuffer', '$typedarray', '$regexp']);

// The tag name when a plain object's only stored member is one: it would be written as a tagged
// value and read back as another type, so it is refused (every binding does).
function onlyTag(object, keys) {
  let tag;
  for (const key of keys) {
    if (object[key] === undefined) continue;
    if (tag !== undefined || !TAG_NAMES.has(key)) return undefined;
    tag = key;
  }
  return tag;
}

// Returns `value` itself when it holds nothing to tag (so the common state is not copied), or a
// copy with the tagged forms in place. `depth`: the levels above `value`.
function wire(value, path, ancestors, depth) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw refuse(`${value} is not a JSON number (store null or a string)`, path);
      return value;
    case 'bigint':
      level(depth, 1, path);
      return { $bigint: value.toString() };
    case 'undefined':
      throw refuse('undefined is not storable (leave the member out, or store null)', path);
    case 'function':
      throw refuse('a function is not storable', path);
    case 'symbol':
      throw refuse('a symbol is not storable', path);
    default:
      break;
  }
  if (value === null) return null;
  if (ancestors.has(value)) throw refuse('circular reference', path);
  ancestors.add(value);
  try {
    return wireObject(value, path, ancestors, depth);
  } finally {
    ancestors.delete(value);
  }
}

function wireObject(value, path, ancestors, depth) {
  if (Array.isArray(value)) {
    const inner = level(depth, 1, path);
    let copy;
    for (let i = 0; i < value.length; i++) {
      if (!(i in value)) throw refuse('a hole in a sparse array is not storable', [...path, i]);
      const item = value[i];
      path.push(i);
      const out = wire(item, path, ancestors, inner);
      path.pop();
      if (out !== item && copy === undefined) copy = value.slice(0, i);
      if (copy !== undefined) copy.push(out);
    }
    return copy === undefined ? value : copy;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    const inner = level(depth, 1, path);
    let copy;
    const keys = Object.keys(value);
    const tag = onlyTag(value, keys);
    if (tag !== undefined) {
      throw refuse(`a plain object whose only member is ${tag} is not storable (it would read back as the tagged type, not an object)`, path);
    }
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k];
      const member = value[key];
      if (member === undefined) {
        // Left out, as JSON.stringify does.
        if (copy === undefined) copy = copyUpTo(value, keys, k);
        continue;
      }
      path.push(key);
      const out = wire(member, path, ancestors, inner);
      path.pop();
      if (out !== member && copy === undefined) copy = copyUpTo(value, keys, k);
      if (copy !== undefined) setMember(copy, key, out);
    }
    return copy === undefined ? value : copy;
  }
  if (value instanceof Map || value instanceof Set) depth = level(depth, value instanceof Map ? 3 : 2, path);
  else depth = level(depth, 1, path);
  if (value instanceof Date) {
    const t = value.getTime();
    if (Number.isNaN(t)) throw refuse('an invalid Date is not storable', path);
    return { $date: value.toISOString() };
  }
  if (value instanceof Map) {
    const entries = [];
    let i = 0;
    for (const [k, v] of value) {
      path.push(i, 0);
      const key = wire(k, path, ancestors, depth);
      path.pop();
      path.push(1);
      const val = wire(v, path, ancestors, depth);
      path.pop();
      path.pop();
      entries.push([key, val]);
      i++;
    }
    return { $map: entries };
  }
  if (value instanceof Set) {
    const items = [];
    let i = 0;
    for (const v of value) {
      path.push(i);
      items.push(wire(v, path, ancestors, depth));
      path.pop();
      i++;
    }
    return { $set: items };
  }
  if (value instanceof RegExp) {
    return { $regexp: { source: value.source, flags: value.flags } };
  }
  if (value instanceof ArrayBuffer) {
    return { $arraybuffer: Buffer.from(value).toString('base64') };
  }
  if (value instanceof DataView) {
    return { $typedarray: { type: 'DataView', base64: bytesBase64(value) } };
  }
  if (ArrayBuffer.isView(value)) {
    const type = typedName(value);
    if (type === undefined) throw refuse('a typed array of an unknown kind is not storable', path);
    return { $typedarray: { type, base64: bytesBase64(value) } };
  }
  const name = (proto && proto.constructor && proto.constructor.name) || 'object';
  throw refuse(`a ${name} instance is not storable (only plain objects, arrays and the codec's types are)`, path);
}

// Sets a member, also one named __proto__ (which an assignment would take as the prototype).
function setMember(object, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

function copyUpTo(object, keys, end) {
  const copy = {};
  for (let k = 0; k < end; k++) {
    if (object[keys[k]] !== undefined) setMember(copy, keys[k], object[keys[k]]);
  }
  return copy;
}

// The JSON text of a state or patch (a plain object at the top). Throws CodecError.
function encode(value) {
  const out = wire(value, [], new Set(), 0);
  return JSON.stringify(out);
}

// Only texts holding a tag name need the walk that turns tags into values.
const TAG = /"\$(date|bigint|map|set|arraybuffer|typedarray|regexp)"/;

function decode(text) {
  const value = JSON.parse(text);
  return TAG.test(text) ? revive(value) : value;
}

function arrayBufferOf(base64) {
  const bytes = Buffer.from(base64, 'base64');
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}

function revive(value) {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = revive(value[i]);
    return value;
  }
  const keys = Object.keys(value);
  if (keys.length === 1) {
    const inner = value[keys[0]];
    switch (keys[0]) {
      case '$date':
        // Microseconds and nanoseconds (Python, Go) are cut to a Date's milliseconds.
        return new Date(inner.replace(/(\.\d{3})\d+Z$/, '$1Z'));
      case '$bigint':
        return BigInt(inner);
      case '$map':
        return new Map(inner.map(([k, v]) => [revive(k), revive(v)]));
      case '$set':
        return new Set(inner.map(revive));
      case '$arraybuffer':
        return arrayBufferOf(inner);
      case '$regexp':
        return new RegExp(inner.source, inner.flags);
      case '$typedarray': {
        const buffer = arrayBufferOf(inner.base64);
        if (inner.type === 'DataView') return new DataView(buffer);
        const Ctor = CONSTRUCTORS.get(inner.type);
        // Float16Array on a Node without it: the bytes, as a Uint16Array of the same length.
        return Ctor ? new Ctor(buffer) : new Uint16Array(buffer);
      }
      default:
        break;
    }
  }
  for (const key of keys) value[key] = revive(value[key]);
  return value;
}

module.exports = { encode, decode, pointer, setMember };
