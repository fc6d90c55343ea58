// stop() leaves nothing behind: a Node process whose watches are all stopped exits by itself,
// whether stopped while streaming, while waiting to retry, or while still connecting. Run in
// a child process, since only a process's exit shows that no timer or socket is left.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { pathToFileURL } from "node:url";
import { CLIENT, DEADLINE_MS, createAgent, makeStore, startServer } from "../support/live-server.js";

let store;
let server;

before(async () => {
  store = await makeStore();
  await createAgent(store, "x", { alive: true });
  server = await startServer(store);
});

after(async () => {
  await server?.stop();
  await store?.remove();
});

const SCRIPT = `
import { watch } from ${JSON.stringify(pathToFileURL(CLIENT).href)};
const [url, token] = process.argv.slice(-2);
let gotState = false;
// Streaming: stopped from inside onState, by the snapshot.
await new Promise((resolve, reject) => {
  const handle = watch(url, "x", {
    token,
    onState() { gotState = true; handle.stop(); resolve(); },
    onError(error) { reject(error); },
  });
});
// Waiting to retry: a wrong token fails, and stop() comes before the next attempt.
await new Promise((resolve) => {
  const handle = watch(url, "x", { token: "wrong-token-0123456789", onError() { handle.stop(); resolve(); } });
});
// Still connecting.
watch(url, "x", { token }).stop();
// Nowhere to connect to at all: port 1 refuses.
watch("http://127.0.0.1:1", "x", {}).stop();
console.log(gotState ? "stopped" : "no state");
`;

test("a process whose watches are stopped exits on its own", async () => {
  const child = spawn(
    process.execPath,
    ["--experimental-websocket", "--input-type=module", "--eval", SCRIPT, "--", server.url, store.token],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    out += chunk;
  });
  const exit = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve(null), DEADLINE_MS);
  });
  const result = await Promise.race([exit, timeout]);
  clearTimeout(timer);
  if (result === null) {
    child.kill("SIGKILL");
    await exit;
    assert.fail(`the process did not exit within ${DEADLINE_MS} ms (a timer or socket left behind)\n${out}`);
  }
  assert.deepEqual(result, { code: 0, signal: null }, out);
  assert.match(out, /^stopped$/m);
});
