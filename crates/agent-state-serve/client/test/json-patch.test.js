// applyJsonPatch against the public RFC 6902 suite (json-patch/json-patch-tests: tests.json and
// spec_tests.json, the RFC's own examples, every record not disabled), beside the checkout in
// ../shared/corpora as for the server library's run of it; and that it never modifies its
// inputs, keeps member order as the server does, and fails all or nothing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { applyJsonPatch } from "../src/index.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const CORPUS = resolve(HERE, "../../../../../shared/corpora/json-patch-tests");

const deepFreeze = (v) => {
  if (v !== null && typeof v === "object") {
    Object.values(v).forEach(deepFreeze);
    Object.freeze(v);
  }
  return v;
};

function records(name) {
  return JSON.parse(readFileSync(resolve(CORPUS, name), "utf8"));
}

function runFile(name) {
  let ran = 0;
  let disabled = 0;
  const failures = [];
  records(name).forEach((record, i) => {
    if (record.disabled === true) {
      disabled += 1;
      return;
    }
    ran += 1;
    const label = `${name}[${i}] ${record.comment ?? ""}`;
    const before = JSON.stringify(record.doc);
    // Frozen inputs: a write to them would throw (ES modules are strict).
    const doc = deepFreeze(structuredClone(record.doc));
    const patch = deepFreeze(structuredClone(record.patch));
    let got;
    let error;
    try {
      got = applyJsonPatch(doc, patch);
    } catch (e) {
      error = e;
    }
    if (error !== undefined && !(error instanceof Error && error.name === "JsonPatchError")) {
      failures.push(`${label}: threw something else: ${error}`);
    } else if ("expected" in record) {
      if (error !== undefined) failures.push(`${label}: refused (${error.message}), expected ${JSON.stringify(record.expected)}`);
      else {
        try {
          assert.deepStrictEqual(got, record.expected);
        } catch {
          failures.push(`${label}: got ${JSON.stringify(got)}, expected ${JSON.stringify(record.expected)}`);
        }
      }
    } else if ("error" in record) {
      if (error === undefined) failures.push(`${label}: applied as ${JSON.stringify(got)}, expected an error (${record.error})`);
    } else if (error !== undefined) {
      failures.push(`${label}: refused (${error.message}), expected to apply`);
    }
    if (JSON.stringify(record.doc) !== before) failures.push(`${label}: the document was modified`);
  });
  assert.deepEqual(failures, [], `${failures.length} of ${ran} records failed`);
  return [ran, disabled];
}

test("the public RFC 6902 suite passes", (t) => {
  if (!existsSync(CORPUS)) {
    // CI always has ../shared beside the checkout: there a missing corpus is a failure.
    assert.notEqual(process.env.CI, "true", `no RFC 6902 corpus at ${CORPUS}`);
    t.skip(`no RFC 6902 corpus at ${CORPUS}`);
    return;
  }
  assert.deepEqual(runFile("tests.json"), [92, 3], "tests.json's records");
  assert.deepEqual(runFile("spec_tests.json"), [16, 1], "spec_tests.json's records");
});

test("every operation, in order, each reading what the previous one wrote", () => {
  const doc = deepFreeze({ status: "idle", messages: [{ id: 1 }], draft: { text: "hi" } });
  const out = applyJsonPatch(doc, [
    { op: "add", path: "/messages/-", value: { id: 2 } },
    { op: "add", path: "/messages/0", value: { id: 0 } },
    { op: "replace", path: "/status", value: "busy" },
    { op: "move", from: "/draft/text", path: "/last" },
    { op: "copy", from: "/messages/2", path: "/newest" },
    { op: "remove", path: "/draft" },
    { op: "test", path: "/newest/id", value: 2 },
  ]);
  const expected = { status: "busy", messages: [{ id: 0 }, { id: 1 }, { id: 2 }], last: "hi", newest: { id: 2 } };
  assert.deepEqual(out, expected);
  // Member order as the server's library keeps it: a replaced member stays, new ones go last.
  assert.equal(JSON.stringify(out), JSON.stringify(expected));
  assert.deepEqual(doc, { status: "idle", messages: [{ id: 1 }], draft: { text: "hi" } });
});

test("untouched parts are shared, not copied", () => {
  const doc = { keep: { deep: [1, 2] }, list: [{ a: 1 }, { b: 2 }] };
  const out = applyJsonPatch(doc, [{ op: "replace", path: "/list/1/b", value: 3 }]);
  assert.equal(out.keep, doc.keep);
  assert.equal(out.list[0], doc.list[0]);
  assert.notEqual(out.list, doc.list);
  assert.deepEqual(doc.list[1], { b: 2 });
});

test("a failure says which operation and why, and changes nothing", () => {
  const doc = deepFreeze({ a: [1, 2], s: "x" });
  const cases = [
    [{ op: "add", path: "/a/-", value: 3 }, { op: "remove", path: "/missing" }, "no_such_path", 1],
    [{ op: "add", path: "/a/5", value: 3 }, "no_such_path", 0],
    [{ op: "replace", path: "/a/01", value: 3 }, "no_such_path", 0],
    [{ op: "move", from: "/a", path: "/a/0" }, "no_such_path", 0],
    [{ op: "remove", path: "" }, "no_such_path", 0],
    [{ op: "add", path: "/s", value: 1 }, { op: "test", path: "/s", value: "x" }, "test_failed", 1],
    [{ op: "test", path: "/a", value: [1, 2, 3] }, "test_failed", 0],
    [{ op: "add", path: "/x~2", value: 1 }, "malformed", 0],
    [{ op: "append", path: "/x", value: 1 }, "malformed", 0],
    [{ op: "add", path: "/x" }, "malformed", 0],
    [{ op: "copy", path: "/x" }, "malformed", 0],
    [{ op: "add", path: "x", value: 1 }, "malformed", 0],
  ];
  for (const c of cases) {
    const [index, code] = [c.pop(), c.pop()];
    assert.throws(
      () => applyJsonPatch(doc, c),
      (e) => e.name === "JsonPatchError" && e.code === code && e.index === index,
      JSON.stringify(c),
    );
  }
  assert.throws(() => applyJsonPatch(doc, { op: "add" }), (e) => e.code === "malformed" && e.index === undefined);
  // A malformed operation later in the patch is found before anything applies.
  assert.throws(
    () => applyJsonPatch(doc, [{ op: "remove", path: "/missing" }, { op: "bad" }]),
    (e) => e.code === "malformed" && e.index === 1,
  );
  assert.deepEqual(doc, { a: [1, 2], s: "x" });
});

test("__proto__ is an ordinary member name", () => {
  const doc = JSON.parse('{"__proto__":{"x":1}}');
  const out = applyJsonPatch(doc, [
    { op: "add", path: "/__proto__/y", value: 2 },
    { op: "copy", from: "/__proto__", path: "/c" },
  ]);
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
  assert.equal(JSON.stringify(out), '{"__proto__":{"x":1,"y":2},"c":{"x":1,"y":2}}');
  assert.equal({}.y, undefined);
  assert.throws(() => applyJsonPatch({}, [{ op: "test", path: "/constructor", value: null }]), (e) => e.code === "no_such_path");
});
