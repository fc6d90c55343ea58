// applyMergePatch against RFC 7396: every example of its appendix A, member order, and that
// neither input is ever modified.
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyMergePatch } from "../src/index.js";

// RFC 7396 appendix A, all fifteen rows, in the RFC's order: [original, patch, result].
const APPENDIX_A = [
  [{ a: "b" }, { a: "c" }, { a: "c" }],
  [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
  [{ a: "b" }, { a: null }, {}],
  [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
  [{ a: ["b"] }, { a: "c" }, { a: "c" }],
  [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
  [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
  [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
  [["a", "b"], ["c", "d"], ["c", "d"]],
  [{ a: "b" }, ["c"], ["c"]],
  [{ a: "foo" }, null, null],
  [{ a: "foo" }, "bar", "bar"],
  [{ e: null }, { a: 1 }, { e: null, a: 1 }],
  [[1, 2], { a: "b", c: null }, { a: "b" }],
  [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
];

test("RFC 7396 appendix A: every example", () => {
  assert.equal(APPENDIX_A.length, 15);
  for (const [original, patch, result] of APPENDIX_A) {
    const label = `${JSON.stringify(original)} + ${JSON.stringify(patch)}`;
    const got = applyMergePatch(original, patch);
    assert.deepEqual(got, result, label);
    // The serialisation too: member order is part of the result.
    assert.equal(JSON.stringify(got), JSON.stringify(result), label);
  }
});

test("neither input is modified (every appendix example, deeply frozen)", () => {
  const freeze = (v) => {
    if (v !== null && typeof v === "object") {
      Object.values(v).forEach(freeze);
      Object.freeze(v);
    }
    return v;
  };
  for (const [original, patch] of APPENDIX_A) {
    const before = [JSON.stringify(original), JSON.stringify(patch)];
    // Frozen inputs: a write to them would throw here (ES modules are strict).
    applyMergePatch(freeze(structuredClone(original)), freeze(structuredClone(patch)));
    applyMergePatch(original, patch);
    assert.deepEqual([JSON.stringify(original), JSON.stringify(patch)], before);
  }
});

test("a mutation of the result does not reach the target", () => {
  const target = { keep: { deep: [1, 2] }, change: { x: 1 } };
  const result = applyMergePatch(target, { change: { y: 2 } });
  assert.deepEqual(result, { keep: { deep: [1, 2] }, change: { x: 1, y: 2 } });
  result.change.z = 3;
  assert.deepEqual(target.change, { x: 1 });
  // Untouched members are shared, not copied: the cost follows the patch.
  assert.equal(result.keep, target.keep);
});

test("member order: existing members keep their place, new ones are appended", () => {
  const target = { z: 1, m: { c: 1, a: 2 }, a: 3 };
  const result = applyMergePatch(target, { n: 0, a: 30, m: { b: 9, c: 10 }, b: 4 });
  assert.deepEqual(Object.keys(result), ["z", "m", "a", "n", "b"]);
  assert.deepEqual(Object.keys(result.m), ["c", "a", "b"]);
  assert.equal(JSON.stringify(result), '{"z":1,"m":{"c":10,"a":2,"b":9},"a":30,"n":0,"b":4}');
  // A member deleted and added again goes to the end, like a new one.
  const again = applyMergePatch(applyMergePatch({ a: 1, b: 2 }, { a: null }), { a: 1 });
  assert.deepEqual(Object.keys(again), ["b", "a"]);
});

test("a non-object patch replaces the whole target; a non-object target becomes {}", () => {
  assert.deepEqual(applyMergePatch({ a: 1 }, [1, { b: null }]), [1, { b: null }]);
  assert.equal(applyMergePatch({ a: 1 }, 7), 7);
  assert.equal(applyMergePatch({ a: 1 }, false), false);
  assert.deepEqual(applyMergePatch("text", { a: 1, b: null }), { a: 1 });
  assert.deepEqual(applyMergePatch(null, { a: null }), {});
  assert.deepEqual(applyMergePatch(undefined, { a: { b: 1 } }), { a: { b: 1 } });
  // A null for a member that does not exist is no change.
  assert.deepEqual(applyMergePatch({ a: 1 }, { b: null }), { a: 1 });
  // An empty patch object changes nothing (but is a new object).
  const target = { a: { b: 1 } };
  const same = applyMergePatch(target, {});
  assert.deepEqual(same, target);
  assert.notEqual(same, target);
});

test('"__proto__" is an ordinary member, as JSON.parse makes it', () => {
  const patch = JSON.parse('{"__proto__":{"polluted":true},"a":1}');
  const result = applyMergePatch({}, patch);
  assert.deepEqual(Object.keys(result), ["__proto__", "a"]);
  assert.equal(Object.getPrototypeOf(result), Object.prototype);
  assert.equal({}.polluted, undefined);
  assert.equal(JSON.stringify(result), '{"__proto__":{"polluted":true},"a":1}');
  const removed = applyMergePatch(result, JSON.parse('{"__proto__":null}'));
  assert.equal(JSON.stringify(removed), '{"a":1}');
});
