// watch() against the real `agent-state serve` when writers use RFC 6902 JSON Patches
// (`agent-state patch`): each arrives as a json_patch message, the copy equals the stored state
// after every message (checked against the server's state at that version), catching up from
// the change log gives the same, and a copy the operations do not apply to is resynchronised
// from a snapshot.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { watch } from "../src/index.js";
import {
  assertConsecutive,
  createAgent,
  getAgent,
  getStateAt,
  makeStore,
  patchOps,
  recorder,
  replaceState,
  setPatch,
  startServer,
  until,
} from "../support/live-server.js";

let store;
let server;

before(async () => {
  store = await makeStore();
  await createAgent(store, "chat", { status: "idle", messages: [{ role: "user", text: "hi" }], meta: { tags: ["a"] } });
  await createAgent(store, "drift", { items: ["x"] });
  server = await startServer(store);
});

after(async () => {
  await server?.stop();
  await store?.remove();
});

// The writes: JSON Patches of every operation, between merge patches and a replacement.
async function writeMix(agentId) {
  await patchOps(store, agentId, [{ op: "add", path: "/messages/-", value: { role: "agent", text: "hello" } }]);
  await patchOps(store, agentId, [
    { op: "test", path: "/status", value: "idle" },
    { op: "replace", path: "/status", value: "busy" },
    { op: "copy", from: "/messages/1", path: "/last" },
  ]);
  await setPatch(store, agentId, { meta: { seen: 2 } });
  await patchOps(store, agentId, [
    { op: "add", path: "/messages/0", value: { role: "system", text: "be brief" } },
    { op: "move", from: "/last/text", path: "/meta/headline" },
    { op: "remove", path: "/last" },
    { op: "add", path: "/meta/tags/-", value: null },
  ]);
  await replaceState(store, agentId, { status: "reset", messages: [], meta: { tags: [] } });
  await patchOps(store, agentId, [
    { op: "add", path: "/messages/-", value: { role: "user", text: "again", n: 1.5 } },
    { op: "add", path: "/messages/-", value: { role: "agent", text: "yes" } },
    { op: "move", from: "/messages/0", path: "/messages/1" },
    { op: "replace", path: "/meta", value: { tags: ["z"], "a/b~c": true } },
    { op: "remove", path: "/meta/a~1b~0c" },
  ]);
}

// Every state the watch handed out is the server's state at that version, and the last one
// is the current state (members in the server's order too).
async function assertEveryCopyStored(seen, handle) {
  for (const { state, version } of seen.states) {
    const stored = await getStateAt(server, store, "chat", version);
    assert.deepEqual(state, stored.state, `the copy at version ${version}`);
    assert.equal(JSON.stringify(state), JSON.stringify(stored.state), `member order at version ${version}`);
  }
  const current = await getAgent(server, store, "chat");
  assert.equal(handle.version, current.version);
  assert.deepEqual(handle.state, current.state);
}

test("JSON Patches arrive as json_patch messages and the copy follows each exactly", async (t) => {
  const seen = recorder();
  const handle = watch(server.url, "chat", { token: store.token, ...seen.options });
  t.after(() => handle.stop());
  await until(() => seen.messages.length >= 1, "the snapshot");
  const start = handle.version;
  await writeMix("chat");
  const stored = await getAgent(server, store, "chat");
  assert.equal(stored.version, start + 6);
  await until(() => handle.version === stored.version, `version ${stored.version}`);
  assert.deepEqual(
    seen.messages.map((m) => m.type),
    ["snapshot", "json_patch", "json_patch", "patch", "json_patch", "replace", "json_patch"],
  );
  assert.deepEqual(seen.messages[1], {
    type: "json_patch",
    version: start + 1,
    ops: [{ op: "add", path: "/messages/-", value: { role: "agent", text: "hello" } }],
  });
  assertConsecutive(assert, seen.messages);
  assert.deepEqual(seen.errors, []);
  assert.ok(Object.isFrozen(handle.state) && Object.isFrozen(handle.state.messages));
  await assertEveryCopyStored(seen, handle);

  // Resumed from the first version: the same changes, read from the change log.
  const first = await getStateAt(server, store, "chat", start);
  const back = recorder();
  const resumed = watch(server.url, "chat", { token: store.token, since: start, state: first.state, ...back.options });
  t.after(() => resumed.stop());
  await until(() => resumed.version === stored.version, `resumed at version ${stored.version}`);
  assert.deepEqual(
    back.messages.map((m) => [m.type, m.version]),
    seen.messages.slice(1).map((m) => [m.type, m.version]),
  );
  assert.deepEqual(back.errors, []);
  await assertEveryCopyStored(back, resumed);
});

test("a copy the operations do not apply to is replaced by a snapshot", async (t) => {
  const current = await getAgent(server, store, "drift");
  const seen = recorder();
  // A wrong copy for this version: the next JSON Patch removes what it does not have.
  const handle = watch(server.url, "drift", {
    token: store.token,
    since: current.version,
    state: { items: [] },
    ...seen.options,
  });
  t.after(() => handle.stop());
  await patchOps(store, "drift", [{ op: "remove", path: "/items/0" }, { op: "add", path: "/items/-", value: "y" }]);
  const stored = await getAgent(server, store, "drift");
  await until(() => seen.messages.some((m) => m.type === "snapshot"), "the snapshot after the failed patch");
  await until(() => handle.version === stored.version, `version ${stored.version}`);
  assert.deepEqual(handle.state, { items: ["y"] });
  assert.deepEqual(handle.state, stored.state);
  assert.equal(seen.errors[0].code, "bad_message");
  assert.equal(seen.errors[0].cause.name, "JsonPatchError");
  assert.equal(seen.errors[0].cause.code, "no_such_path");
  assert.deepEqual(
    seen.messages.map((m) => m.type),
    ["snapshot"],
    "the failed patch was not handed out",
  );
});
