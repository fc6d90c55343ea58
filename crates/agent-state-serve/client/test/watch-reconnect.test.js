// watch() across a restart of the real server: stopped while the client watches, written to
// while it is down, started again on the same port. The client reconnects with `since` and
// catches up on patches and replacements alone: the change log still holds them.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { watch } from "../src/index.js";
import {
  DEADLINE_MS,
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

const cleanup = [];
after(async () => {
  for (const step of cleanup.reverse()) await step();
});

test("after a server restart the client catches up from its version", async () => {
  const store = await makeStore();
  cleanup.push(() => store.remove());
  await createAgent(store, "r", { count: 0, log: [] });
  let server = await startServer(store);
  cleanup.push(() => server.stop());
  const port = server.port;

  const seen = recorder();
  const handle = watch(server.url, "r", { token: store.token, ...seen.options });
  cleanup.push(() => handle.stop());
  await until(() => seen.messages.length >= 1, "the snapshot");
  for (let i = 1; i <= 5; i++) await setPatch(store, "r", { count: i });
  const live = await getAgent(server, store, "r");
  await until(() => handle.version === live.version, `version ${live.version}`);

  // SIGTERM: the server closes the stream with 1001 (PROTOCOL.md) and exits.
  await server.stop();
  await until(() => seen.errors.some((e) => e.code === "closed"), "the close");
  const close = seen.errors.find((e) => e.code === "closed");
  assert.equal(close.closeCode, 1001);
  assert.equal(handle.connected, false);

  // Written while nobody serves the store: the client learns of these only after the restart.
  for (let i = 6; i <= 15; i++) await setPatch(store, "r", { count: i, [`w${i}`]: true });
  await replaceState(store, "r", { count: 100, replaced: true });
  await setPatch(store, "r", { after: "replace" });
  await setPatch(store, "r", { count: null });

  server = await startServer(store, port);
  const stored = await getAgent(server, store, "r");
  // The backoff may have grown to 5 s while the server was down.
  await until(() => handle.version === stored.version, `version ${stored.version}`, DEADLINE_MS + 10000);
  assert.deepEqual(handle.state, stored.state);
  assert.deepEqual(stored.state, { replaced: true, after: "replace" });
  assert.equal(handle.connected, true);

  // One snapshot, at the start; everything since came as a change, each version once.
  const types = seen.messages.map((m) => m.type);
  assert.equal(types[0], "snapshot");
  assert.deepEqual(types.slice(1).filter((t) => t === "snapshot"), []);
  assert.equal(types.filter((t) => t === "replace").length, 1);
  assertConsecutive(assert, seen.messages);
  assert.deepEqual(
    seen.messages.map((m) => m.version),
    Array.from({ length: seen.messages.length }, (_, i) => seen.messages[0].version + i),
  );
  assert.equal(seen.messages.at(-1).version, stored.version);
  // The errors are the close and the refused attempts while the server was down, nothing else.
  for (const error of seen.errors) assert.ok(["closed", "connect_failed"].includes(error.code), error.message);
});
