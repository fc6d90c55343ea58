// watch() and the liveness of the real server's stream. First the pings: every interval (the
// server's --ping-interval, 2 s here so the test is short; 30 s by default), carrying the last
// version sent and the interval, and no state change for the client. Then a server that stops
// answering without closing anything: the process is frozen with SIGSTOP, so the TCP
// connection stays up and only the pings stop; after three intervals of silence the client
// takes the stream as dead and reconnects.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { watch } from "../src/index.js";
import { assertConsecutive, createAgent, getAgent, makeStore, recorder, setPatch, startServer, until } from "../support/live-server.js";

const cleanup = [];
after(async () => {
  for (const step of cleanup.reverse()) await step();
});

const INTERVAL_MS = 2000;

test("pings change nothing; three ping intervals without a message are a dead stream: the client reconnects", { timeout: 240000 }, async () => {
  const store = await makeStore();
  cleanup.push(() => store.remove());
  await createAgent(store, "s", { step: 0 });
  const server = await startServer(store, 0, ["--ping-interval", `${INTERVAL_MS}ms`]);
  cleanup.push(() => server.stop());
  // Whatever happens, the server is thawed before it is stopped (a frozen one keeps SIGTERM).
  cleanup.push(() => server.process.kill("SIGCONT"));

  const seen = recorder();
  const handle = watch(server.url, "s", { token: store.token, ...seen.options });
  cleanup.push(() => handle.stop());
  await until(() => seen.messages.length >= 1, "the snapshot");
  // Beside it, a bare WebSocket shows what watch() does not pass on: the pings. Both streams
  // ping at the same instants, so once the bare one has had two pings, watch()'s stream has had
  // at least one, which told the client the interval.
  const raw = [];
  const socket = new WebSocket(`${server.url.replace(/^http/, "ws")}/v1/agents/s/watch?access_token=${store.token}`);
  socket.addEventListener("message", (event) => raw.push(JSON.parse(event.data)));
  cleanup.push(() => socket.close());

  const pings = () => raw.filter((m) => m.type === "ping");
  await until(() => pings().length >= 2, "two pings", 60000);
  assert.deepEqual(pings()[0], { type: "ping", version: seen.messages[0].version, interval_ms: INTERVAL_MS });
  assert.equal(seen.messages.length, 1, "a ping is no state change");
  assert.deepEqual(seen.errors, []);

  const frozenAt = Date.now();
  server.process.kill("SIGSTOP");
  // A reader frozen in the middle of nothing holds no lock: the store takes writes.
  await setPatch(store, "s", { step: 1 });
  await setPatch(store, "s", { step: 2, during: "stall" });
  await until(() => seen.errors.some((e) => e.code === "timeout"), "the silence timeout", 120000);
  // Not before three intervals of silence, counted by the client from the last ping it
  // received: the one the bare stream had last (just before the freeze), or the one before if
  // the freeze came between the two streams' pings of one instant. So at least two intervals
  // from the freeze.
  const silent = Date.now() - frozenAt;
  assert.ok(silent >= 2 * INTERVAL_MS - 250, `timed out after ${silent} ms`);
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
