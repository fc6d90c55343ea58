// watch() and the liveness of the real server's stream. First the pings: every 15 s, carrying
// the last version sent, and no state change for the client. Then a server that stops
// answering without closing anything: the process is frozen with SIGSTOP, so the TCP
// connection stays up and only the pings stop; after 45 s of silence the client takes the
// stream as dead and reconnects. About a minute, by design: 15 s and 45 s are the protocol's.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { watch } from "../src/index.js";
import { assertConsecutive, createAgent, getAgent, makeStore, recorder, setPatch, startServer, until } from "../support/live-server.js";

const cleanup = [];
after(async () => {
  for (const step of cleanup.reverse()) await step();
});

test("pings change nothing; 45 s without a message is a dead stream: the client reconnects", { timeout: 240000 }, async () => {
  const store = await makeStore();
  cleanup.push(() => store.remove());
  await createAgent(store, "s", { step: 0 });
  const server = await startServer(store);
  cleanup.push(() => server.stop());
  // Whatever happens, the server is thawed before it is stopped (a frozen one keeps SIGTERM).
  cleanup.push(() => server.process.kill("SIGCONT"));

  const seen = recorder();
  const handle = watch(server.url, "s", { token: store.token, ...seen.options });
  cleanup.push(() => handle.stop());
  // The bare WebSocket opens once watch()'s stream has started, so that the server's first
  // ping on watch()'s stream comes before the first on the bare one, after which the server
  // is frozen (each stream pings 15 s after it started).
  await until(() => seen.messages.length >= 1, "the snapshot");
  // Beside it, a bare WebSocket shows what watch() does not pass on: the pings.
  const raw = [];
  const socket = new WebSocket(`${server.url.replace(/^http/, "ws")}/v1/agents/s/watch?access_token=${store.token}`);
  socket.addEventListener("message", (event) => raw.push(JSON.parse(event.data)));
  cleanup.push(() => socket.close());
  await until(() => seen.messages.length >= 1, "the snapshot");

  await until(() => raw.some((m) => m.type === "ping"), "a ping", 30000);
  const ping = raw.find((m) => m.type === "ping");
  assert.deepEqual(ping, { type: "ping", version: seen.messages[0].version });
  assert.equal(seen.messages.length, 1, "a ping is no state change");
  assert.deepEqual(seen.errors, []);

  const frozenAt = Date.now();
  server.process.kill("SIGSTOP");
  // A reader frozen in the middle of nothing holds no lock: the store takes writes.
  await setPatch(store, "s", { step: 1 });
  await setPatch(store, "s", { step: 2, during: "stall" });
  await until(() => seen.errors.some((e) => e.code === "timeout"), "the silence timeout", 90000);
  // Not before 45 s of silence (measured here from the freeze, so a little less than the client's).
  assert.ok(Date.now() - frozenAt >= 44000, `timed out after ${Date.now() - frozenAt} ms`);
  assert.equal(seen.messages.length, 1);
  server.process.kill("SIGCONT");

  const stored = await getAgent(server, store, "s");
  await until(() => handle.version === stored.version, `version ${stored.version}`, 60000);
  assert.deepEqual(handle.state, stored.state);
  assert.deepEqual(
    seen.messages.map((m) => m.type),
    ["snapshot", "patch", "patch"],
  );
  assertConsecutive(assert, seen.messages);
});
