'use strict';
// States as this package hands them out: immutable snapshots. A state of plain JSON (no codec
// types) is decoded once per version, deep-frozen, and the same object is returned by every
// read until something is committed; a write through the agent builds the next snapshot from the
// previous one and its patch (RFC 7396, on the JavaScript side), sharing every member the patch
// did not touch. So a read costs nothing and a write costs what it changes, not the state's size.
//
// A state holding codec types (Date, Map, Set, ArrayBuffer, typed arrays, BigInt, RegExp) cannot
// be frozen (a Map's entries or a typed array's bytes stay writable), so it is decoded afresh on
// every read instead: editing what a read returned never changes what the next read returns.

const { decode, setMember } = require('./codec');

// Only texts holding a tag name contain codec types.
const TAGGED = /"\$(date|bigint|map|set|arraybuffer|typedarray|regexp)"/;

function deepFreeze(value) {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) deepFreeze(value[i]);
    } else {
      for (const key in value) deepFreeze(value[key]);
    }
  }
  return value;
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// RFC 7396 on frozen snapshots: `patch` comes from JSON.parse of the patch's own text (so it
// is this package's copy, never the caller's object).
function merge(target, patch) {
  if (!isObject(patch)) return deepFreeze(patch);
  const out = isObject(target) ? { ...target } : {};
  for (const key of Object.keys(patch)) {
    const member = patch[key];
    if (member === null) delete out[key];
    else setMember(out, key, merge(Object.hasOwn(out, key) ? out[key] : undefined, member));
  }
  return Object.freeze(out);
}

// One version of the state as this handle last saw it.
class Snapshot {
  constructor(version, text, value) {
    this.version = version;
    this.text = text; // undefined when `value` was derived (the text is then not needed)
    this.value = value; // the frozen state; undefined when it holds codec types
  }

  static fromText(version, text) {
    if (TAGGED.test(text)) return new Snapshot(version, text, undefined);
    return new Snapshot(version, undefined, deepFreeze(JSON.parse(text)));
  }

  // The snapshot a write of `patchText` (a merge) or of a replacement makes from this one, when it
  // can be derived without the stored text: both plain JSON.
  derive(version, kind, inputText) {
    if (this.value === undefined || TAGGED.test(inputText)) return undefined;
    if (version === this.version) return this;
    const input = JSON.parse(inputText);
    const value = kind === 'replaceState' ? deepFreeze(input) : merge(this.value, input);
    return new Snapshot(version, undefined, value);
  }

  // Whether a write can tell the addon it holds this state (so the addon need not send the
  // result's text back).
  derivable(inputText) {
    return this.version > 0 && this.value !== undefined && !TAGGED.test(inputText);
  }

  state() {
    return this.value !== undefined ? this.value : decode(this.text);
  }
}

module.exports = { Snapshot, deepFreeze, merge, TAGGED };
