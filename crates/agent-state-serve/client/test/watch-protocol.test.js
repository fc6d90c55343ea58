// The client's own checks, on misbehaviour the real server never shows (a skipped version,
// a malformed frame, a close code of its choosing) and on what needs a clock (the backoff):
// watch() is given a scripted WebSocket through options.WebSocket. Everything the real
// server does is tested against it in the watch-*.test.js files beside this one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { watch } from "../src/index.js";

/** A WebSocket whose server side the test plays. */
class ScriptedSocket extends EventTarget {
  static made = [];
  constructor(url) {
    super();
    this.url = url;
    this.closedWith = undefined;
    ScriptedSocket.made.push(this);
  }
  close(code) {
    this.closedWith = code ?? 1005;
  }
  fire(type, fields = {}) {
    this.dispatchEvent(Object.assign(new Event(type), fields));
  }
  open() {
    this.fire("open");
  }
  deliver(message) {
    this.fire("message", { data: typeof message === "string" ? message : JSON.stringify(message) });
  }
  serverClose(code, reason = "") {
    this.fire("close", { code, reason, wasClean: code !== 1006 });
  }
}

function scripted(t, options = {}, url = "http://127.0.0.1:7420", agentId = "agent") {
  ScriptedSocket.made = [];
  const seen = { states: [], errors: [] };
  const handle = watch(url, agentId, {
    WebSocket: ScriptedSocket,
    onState: (state, version, message) => seen.states.push({ state, version, type: message.type }),
    onError: (error) => seen.errors.push(error),
    ...options,
  });
  t.after(() => handle.stop());
  return { handle, seen, socket: (i) => ScriptedSocket.made[i], count: () => ScriptedSocket.made.length };
}

// The next connection: scheduled after a backoff of at most 100 ms here (a message resets it).
async function nextSocket(w, index) {
  const deadline = Date.now() + 5000;
  while (w.count() <= index) {
    if (Date.now() > deadline) throw new Error(`no connection ${index}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  return w.socket(index);
}

test("the watch URL: scheme, path prefix, encoded id, token, since on reconnect", async (t) => {
  const w = scripted(t, { token: "a&b c" }, "https://example.test:8443/base/path/", "a b/c");
  assert.equal(w.socket(0).url, "wss://example.test:8443/base/path/v1/agents/a%20b%2Fc/watch?access_token=a%26b+c");
  w.socket(0).open();
  w.socket(0).deliver({ type: "snapshot", version: 7, state: {} });
  w.socket(0).serverClose(1011, "store failed");
  const again = await nextSocket(w, 1);
  assert.equal(again.url, "wss://example.test:8443/base/path/v1/agents/a%20b%2Fc/watch?since=7&access_token=a%26b+c");

  const plain = scripted(t, {}, "ws://127.0.0.1:9", "");
  assert.equal(plain.socket(0).url, "ws://127.0.0.1:9/v1/agents//watch");
  assert.throws(() => watch("ftp://x", "a", { WebSocket: ScriptedSocket }), TypeError);
  assert.throws(() => watch("not a url", "a", { WebSocket: ScriptedSocket }), TypeError);
  assert.throws(() => watch("http://x", "..", { WebSocket: ScriptedSocket }), TypeError);
  assert.throws(() => watch("http://x", "a", { WebSocket: ScriptedSocket, since: 3 }), /needs options.state/);
});

test("no WebSocket at all is a TypeError that names the Node 20 flag", () => {
  const saved = Object.getOwnPropertyDescriptor(globalThis, "WebSocket");
  delete globalThis.WebSocket;
  try {
    assert.throws(() => watch("http://127.0.0.1:7420", "a"), (error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /node --experimental-websocket/);
      return true;
    });
  } finally {
    if (saved) Object.defineProperty(globalThis, "WebSocket", saved);
  }
});

test("snapshot, patch, replace build the copy; pings and unknown types change nothing", (t) => {
  const w = scripted(t);
  const s = w.socket(0);
  assert.equal(w.handle.connected, false);
  s.open();
  assert.equal(w.handle.connected, true);
  s.deliver({ type: "snapshot", version: 3, state: { a: 1, b: { c: 2 } } });
  s.deliver({ type: "ping", version: 3 });
  s.deliver({ type: "patch", version: 4, patch: { b: { c: null, d: 4 } } });
  s.deliver({ type: "future-kind", version: 99 });
  s.deliver({ type: "future-kind-without-version" });
  s.deliver({ type: "replace", version: 5, state: [1, 2] });
  s.deliver({ type: "patch", version: 6, patch: { x: 1 } });
  assert.deepEqual(
    w.seen.states.map((e) => [e.type, e.version, e.state]),
    [
      ["snapshot", 3, { a: 1, b: { c: 2 } }],
      ["patch", 4, { a: 1, b: { d: 4 } }],
      ["replace", 5, [1, 2]],
      ["patch", 6, { x: 1 }],
    ],
  );
  assert.deepEqual(w.seen.errors, []);
  assert.equal(w.handle.version, 6);
  assert.ok(Object.isFrozen(w.handle.state));
});

test("a skipped version is a version_gap: reconnect from the last good version", async (t) => {
  const w = scripted(t);
  const s = w.socket(0);
  s.open();
  s.deliver({ type: "snapshot", version: 5, state: { n: 5 } });
  s.deliver({ type: "patch", version: 6, patch: { n: 6 } });
  s.deliver({ type: "patch", version: 8, patch: { n: 8 } });
  s.deliver({ type: "patch", version: 9, patch: { n: 9 } }); // from the abandoned socket: ignored
  assert.equal(w.seen.errors.length, 1);
  const [gap] = w.seen.errors;
  assert.ok(gap instanceof Error);
  assert.deepEqual([gap.code, gap.expected, gap.got], ["version_gap", 7, 8]);
  assert.equal(s.closedWith, 1000);
  assert.equal(w.handle.connected, false);
  assert.deepEqual(w.handle.state, { n: 6 });
  const again = await nextSocket(w, 1);
  assert.match(again.url, /\?since=6$/);
  again.open();
  again.deliver({ type: "patch", version: 7, patch: { n: 7 } });
  assert.deepEqual(w.handle.state, { n: 7 });
  // A replace is checked the same way; so is a version that goes back.
  again.deliver({ type: "replace", version: 7, state: {} });
  assert.equal(w.seen.errors.at(-1).code, "version_gap");
});

test("malformed messages are bad_message and the client reconnects", async (t) => {
  const cases = [
    "not json",
    "[1,2]",
    JSON.stringify({ type: "snapshot", state: {} }),
    JSON.stringify({ type: "snapshot", version: -1, state: {} }),
    JSON.stringify({ type: "snapshot", version: 1 }),
    JSON.stringify({ type: "patch", version: 1, patch: {} }), // before any snapshot
  ];
  for (const frame of cases) {
    const w = scripted(t);
    w.socket(0).open();
    w.socket(0).deliver(frame);
    assert.deepEqual(w.seen.errors.map((e) => e.code), ["bad_message"], frame);
    assert.deepEqual(w.seen.states, [], frame);
    assert.equal(w.socket(0).closedWith, 1000, frame);
    await nextSocket(w, 1);
    w.handle.stop();
  }
});

test("server closes are reported with their code; a close before open is connect_failed", async (t) => {
  const w = scripted(t);
  w.socket(0).serverClose(1006);
  assert.deepEqual([w.seen.errors[0].code, w.seen.errors[0].closeCode], ["connect_failed", 1006]);
  const s = await nextSocket(w, 1);
  s.open();
  s.deliver({ type: "snapshot", version: 1, state: {} });
  s.serverClose(4001, "too slow");
  const closed = w.seen.errors[1];
  assert.deepEqual([closed.code, closed.closeCode, closed.reason], ["closed", 4001, "too slow"]);
  assert.match((await nextSocket(w, 2)).url, /since=1/);
});

test('an "error" without a "close" (Node 20 on a refused upgrade) is a failed connection', async (t) => {
  const w = scripted(t);
  w.socket(0).fire("error");
  assert.deepEqual(w.seen.errors.map((e) => [e.code, e.closeCode]), [["connect_failed", 1006]]);
  assert.equal(w.socket(0).closedWith, 1000);
  const s = await nextSocket(w, 1);
  // The standard's "close" after it, late, is not a second failure.
  w.socket(0).serverClose(1006);
  assert.equal(w.seen.errors.length, 1);
  s.open();
  s.deliver({ type: "snapshot", version: 2, state: { ok: true } });
  s.fire("error");
  assert.deepEqual(w.seen.errors.at(-1).code, "closed");
  assert.match((await nextSocket(w, 2)).url, /since=2/);
});

test("backoff: 100 ms doubling to a 5 s cap, with jitter, reset by a message", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const w = scripted(t);
  // Each failed attempt waits in [ceiling/2, ceiling) before the next.
  const ceilings = [100, 200, 400, 800, 1600, 3200, 5000, 5000];
  for (const [i, ceiling] of ceilings.entries()) {
    w.socket(i).serverClose(1006);
    t.mock.timers.tick(ceiling / 2 - 1);
    assert.equal(w.count(), i + 1, `attempt ${i + 1} came before ${ceiling / 2} ms`);
    t.mock.timers.tick(ceiling / 2 + 1);
    assert.equal(w.count(), i + 2, `attempt ${i + 1} did not come within ${ceiling} ms`);
  }
  const s = w.socket(ceilings.length);
  s.open();
  s.deliver({ type: "snapshot", version: 1, state: {} });
  s.serverClose(1001);
  t.mock.timers.tick(99);
  assert.equal(w.count(), ceilings.length + 2, "after a message the backoff starts again at 100 ms");
});

test("stop(): no callback afterwards and no reconnect", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const w = scripted(t);
  const s = w.socket(0);
  s.open();
  s.deliver({ type: "snapshot", version: 1, state: {} });
  w.handle.stop();
  assert.equal(s.closedWith, 1000);
  s.deliver({ type: "patch", version: 2, patch: { a: 1 } });
  s.serverClose(1000);
  t.mock.timers.tick(60000);
  assert.equal(w.count(), 1);
  assert.equal(w.seen.states.length, 1);
  assert.deepEqual(w.seen.errors, []);
  assert.equal(w.handle.connected, false);
  assert.equal(w.handle.version, 1);
});

test("options.since with options.state: the first connection resumes", (t) => {
  const start = { a: [1] };
  const w = scripted(t, { since: 4, state: start });
  assert.match(w.socket(0).url, /\?since=4$/);
  assert.deepEqual(w.handle.state, start);
  assert.notEqual(w.handle.state, start); // copied: the caller's object is not frozen
  assert.ok(!Object.isFrozen(start));
  w.socket(0).open();
  w.socket(0).deliver({ type: "patch", version: 5, patch: { b: 2 } });
  assert.deepEqual(w.handle.state, { a: [1], b: 2 });
});
