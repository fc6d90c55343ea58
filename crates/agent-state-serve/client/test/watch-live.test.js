// watch() against the real `agent-state serve` (no mocks): the snapshot, a run of CLI writes
// arriving as consecutive patches, a replacement, resuming with `since`, a wrong token, and
// an agent id that needs percent-encoding. The server restart has its own file.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { watch } from "../src/index.js";
import {
  assertConsecutive,
  createAgent,
  getAgent,
  makeStore,
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
  // The server answers 404 for an agent with nothing stored: every agent is written first.
  await createAgent(store, "main", { title: "first", items: [1, 2, 3], nested: { a: 1, b: { c: true } } });
  await createAgent(store, "replaced", { before: 1 });
  await createAgent(store, "resume", { n: 0 });
  await createAgent(store, "a b/c", { odd: "id" });
  server = await startServer(store);
});

after(async () => {
  await server?.stop();
  await store?.remove();
});

/** Starts a watch that is stopped when the test ends, whatever happens. */
function watchFor(t, agentId, seen, extra = {}) {
  const handle = watch(server.url, agentId, { token: store.token, ...seen.options, ...extra });
  t.after(() => handle.stop());
  return handle;
}

test("the first message is a snapshot equal to the stored state", async (t) => {
  const seen = recorder();
  const handle = watchFor(t, "main", seen);
  await until(() => seen.messages.length >= 1, "the snapshot");
  const stored = await getAgent(server, store, "main");
  assert.equal(seen.messages[0].type, "snapshot");
  assert.equal(seen.messages[0].version, stored.version);
  assert.deepEqual(handle.state, stored.state);
  assert.equal(handle.version, stored.version);
  assert.equal(handle.connected, true);
  assert.deepEqual(seen.errors, []);
  // What onState hands out is frozen: a caller cannot corrupt the client's copy.
  assert.ok(Object.isFrozen(handle.state) && Object.isFrozen(handle.state.nested.b));
  assert.throws(() => {
    handle.state.title = "changed";
  }, TypeError);
});

test("50 writes from another process arrive as consecutive patches", async (t) => {
  const seen = recorder();
  const handle = watchFor(t, "main", seen);
  await until(() => seen.messages.length >= 1, "the snapshot");
  const start = handle.version;
  for (let i = 0; i < 50; i++) {
    // Members added, changed and deleted, nested and not.
    await setPatch(store, "main", { [`k${i % 7}`]: i, nested: { b: { [`d${i}`]: i % 3 === 0 ? null : i } }, items: [i] });
    if (i % 10 === 9) await setPatch(store, "main", { [`k${i % 7}`]: null });
  }
  const stored = await getAgent(server, store, "main");
  assert.equal(stored.version, start + 55);
  await until(() => handle.version === stored.version, `version ${stored.version}`);
  assert.deepEqual(handle.state, stored.state);
  // The serialised copy too: members in the server's order.
  assert.equal(JSON.stringify(handle.state), JSON.stringify(stored.state));
  assert.equal(seen.messages[0].type, "snapshot");
  assert.deepEqual(new Set(seen.messages.slice(1).map((m) => m.type)), new Set(["patch"]));
  assert.deepEqual(
    seen.messages.map((m) => m.version),
    Array.from({ length: 56 }, (_, i) => start + i),
  );
  assertConsecutive(assert, seen.messages);
  assert.deepEqual(seen.errors, []);
});

test("a replacement replaces the copy", async (t) => {
  const seen = recorder();
  const handle = watchFor(t, "replaced", seen);
  await until(() => seen.messages.length >= 1, "the snapshot");
  await setPatch(store, "replaced", { during: true });
  await replaceState(store, "replaced", { after: [1, { x: null }] });
  await setPatch(store, "replaced", { more: 2 });
  const stored = await getAgent(server, store, "replaced");
  await until(() => handle.version === stored.version, `version ${stored.version}`);
  assert.deepEqual(
    seen.messages.map((m) => m.type),
    ["snapshot", "patch", "replace", "patch"],
  );
  assert.deepEqual(seen.messages[2].state, { after: [1, { x: null }] });
  assert.deepEqual(handle.state, { after: [1, { x: null }], more: 2 });
  assert.deepEqual(handle.state, stored.state);
  assertConsecutive(assert, seen.messages);
});

test("options.since resumes without a snapshot; a ws:// base works too", async (t) => {
  const first = await getAgent(server, store, "resume");
  await setPatch(store, "resume", { n: 1 });
  await setPatch(store, "resume", { n: 2, m: "x" });
  const seen = recorder();
  const handle = watch(server.url.replace(/^http:/, "ws:"), "resume", {
    token: store.token,
    since: first.version,
    state: first.state,
    ...seen.options,
  });
  t.after(() => handle.stop());
  const stored = await getAgent(server, store, "resume");
  await until(() => handle.version === stored.version, `version ${stored.version}`);
  assert.deepEqual(
    seen.messages.map((m) => [m.type, m.version]),
    [
      ["patch", first.version + 1],
      ["patch", first.version + 2],
    ],
  );
  assert.deepEqual(handle.state, stored.state);
});

test("a wrong token gets no state and an error", async (t) => {
  const seen = recorder();
  const handle = watch(server.url, "main", { token: "wrong-token-0123456789", ...seen.options });
  t.after(() => handle.stop());
  // A WebSocket client is told nothing about a refused upgrade (1006): any error will do.
  await until(() => seen.errors.length >= 2, "two errors (the first attempt and a retry)");
  assert.deepEqual(seen.states, []);
  assert.equal(handle.state, undefined);
  assert.equal(handle.version, undefined);
  assert.equal(handle.connected, false);
  for (const error of seen.errors) {
    assert.ok(error instanceof Error);
    assert.equal(typeof error.code, "string");
    assert.equal(error.code, "connect_failed");
  }
  // And the same request with the token, as HTTP, is refused with the documented body.
  const response = await fetch(`${server.url}/v1/agents/main`, { headers: { Authorization: "Bearer wrong-token-0123456789" } });
  assert.equal(response.status, 401);
  assert.deepEqual(await response.json(), { error: { code: "unauthorized" } });
});

test("a token with URL-special characters reaches the server intact", async (t) => {
  // Visible ASCII, as PROTOCOL.md allows: every character a query string treats specially.
  const special = await makeStore('a+b&c%2Fd/e=f?g#h!~"x');
  t.after(() => special.remove());
  await createAgent(special, "t", { ok: true });
  const own = await startServer(special);
  t.after(() => own.stop());
  const seen = recorder();
  const handle = watch(own.url, "t", { token: special.token, ...seen.options });
  t.after(() => handle.stop());
  await until(() => seen.messages.length >= 1 || seen.errors.length >= 1, "the snapshot or an error");
  assert.deepEqual(seen.errors, []);
  assert.deepEqual(handle.state, { ok: true });
});

test("an agent id with a space and a slash is percent-encoded", async (t) => {
  const seen = recorder();
  const handle = watchFor(t, "a b/c", seen);
  await until(() => seen.messages.length >= 1, "the snapshot");
  assert.deepEqual(handle.state, { odd: "id" });
  await setPatch(store, "a b/c", { more: 1 });
  const stored = await getAgent(server, store, "a b/c");
  await until(() => handle.version === stored.version, `version ${stored.version}`);
  assert.deepEqual(handle.state, { odd: "id", more: 1 });
  assert.deepEqual(seen.errors, []);
});

test("after stop() no callback runs, even for changes that follow", async () => {
  const seen = recorder();
  const handle = watch(server.url, "main", { token: store.token, ...seen.options });
  await until(() => seen.messages.length >= 1, "the snapshot");
  handle.stop();
  assert.equal(handle.connected, false);
  const count = seen.messages.length;
  await setPatch(store, "main", { afterStop: true });
  // A second watch sees the change, so it was delivered to whoever listened.
  const other = recorder();
  const witness = watch(server.url, "main", { token: store.token, ...other.options });
  try {
    await until(() => other.messages.some((m) => m.type === "snapshot" && m.state.afterStop === true), "the change");
  } finally {
    witness.stop();
  }
  assert.equal(seen.messages.length, count);
  assert.deepEqual(seen.errors, []);
  handle.stop(); // a second stop() is harmless
});
