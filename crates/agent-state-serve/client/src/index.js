// @agent-state/client: follow an agent's state served by `agent-state serve`
// (crates/agent-state-serve/PROTOCOL.md is the contract this module implements).
//
// One self-contained ES module without imports: the server inlines this very file into its
// inspector page, ahead of the page's own code in the same <script type="module">, so every
// private top-level name carries the `_as` prefix to stay out of the page's way.

// The watch stream's timing. The server pings every interval (30 s unless it was started with
// another --ping-interval) and each ping says the interval (`interval_ms`): three intervals of
// silence are three missed pings, and the connection is dead even if the socket has not
// noticed (a browser never sees WebSocket-level pings). Until a connection's first ping, the
// default interval's three.
const _AS_DEAD_AFTER_MS = 90000;
const _AS_BACKOFF_FIRST_MS = 100;
const _AS_BACKOFF_CAP_MS = 5000;

function _asIsObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// JSON.parse makes "__proto__" an ordinary own member; a plain assignment would instead set the
// new object's prototype, losing the member and letting a document reach Object.prototype.
function _asPut(object, key, value) {
  if (key === "__proto__") {
    Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    object[key] = value;
  }
}

// RFC 7396's MergePatch. Builds new objects along the patched paths only and shares every
// untouched member, so the cost follows the patch, not the state. With `freeze`, every object it
// builds is frozen (the patch's own values are frozen by the caller beforehand).
function _asMerge(target, patch, freeze) {
  if (!_asIsObject(patch)) return patch;
  const base = _asIsObject(target) ? target : null;
  const out = {};
  // Existing members first, in their order, then the new ones: the server's library
  // (serde_json with preserve_order) orders members the same way.
  if (base !== null) {
    for (const key of Object.keys(base)) {
      if (!Object.hasOwn(patch, key)) {
        _asPut(out, key, base[key]);
      } else if (patch[key] !== null) {
        _asPut(out, key, _asMerge(base[key], patch[key], freeze));
      }
    }
  }
  for (const key of Object.keys(patch)) {
    if (base !== null && Object.hasOwn(base, key)) continue;
    const value = patch[key];
    // A new member that is an object is merged into "nothing", which drops its nulls (RFC 7396
    // appendix A: {} patched with {"a":{"bb":{"ccc":null}}} is {"a":{"bb":{}}}).
    if (value !== null) _asPut(out, key, _asMerge(undefined, value, freeze));
  }
  return freeze ? Object.freeze(out) : out;
}

// RFC 6902 JSON Patch, with RFC 6901 JSON Pointers. Like the merge above it never modifies its
// inputs: each operation builds new containers along its path only and shares everything else,
// so the cost follows the patch, not the state; a failing operation throws and the caller's
// value is untouched (all or nothing). Its meaning is the server library's
// (crates/agent_state_value/src/json_patch.rs): the public RFC 6902 suite runs against both.

function _asPatchError(code, index, op, message) {
  const error = new Error(index === undefined ? message : `operation ${index}${op ? ` (${op.op} ${JSON.stringify(op.path)})` : ""}: ${message}`);
  error.name = "JsonPatchError";
  error.code = code;
  error.index = index;
  return error;
}

// A pointer's reference tokens, unescaped; null when the text is not a pointer.
function _asPointer(text) {
  if (typeof text !== "string") return null;
  if (text === "") return [];
  if (text[0] !== "/" || /~(?![01])/.test(text)) return null;
  return text
    .slice(1)
    .split("/")
    .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
}

// An array index token: "-" (the end), or 0 / digits without a leading zero; else undefined.
function _asIndex(token) {
  if (token === "-") return "-";
  if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
  const index = Number(token);
  return Number.isSafeInteger(index) ? index : undefined;
}

// The value at `tokens` of `doc`, or undefined when there is none (JSON has no undefined).
function _asGet(doc, tokens) {
  let at = doc;
  for (const token of tokens) {
    if (Array.isArray(at)) {
      const index = _asIndex(token);
      if (typeof index !== "number" || index >= at.length) return undefined;
      at = at[index];
    } else if (_asIsObject(at)) {
      if (!Object.hasOwn(at, token)) return undefined;
      at = at[token];
    } else {
      return undefined;
    }
  }
  return at;
}

// JSON equality, for `test`: objects member-wise in any order, arrays element-wise.
function _asJsonEqual(a, b) {
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => _asJsonEqual(item, b[i]));
  }
  if (_asIsObject(a)) {
    if (!_asIsObject(b)) return false;
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && _asJsonEqual(a[k], b[k]));
  }
  return a === b;
}

// A copy of an object with member `key` set to `value` (in its place when it exists, else last)
// or, for `value === undefined`, without it.
function _asWithMember(object, key, value, freeze) {
  const out = {};
  for (const k of Object.keys(object)) {
    if (k !== key) _asPut(out, k, object[k]);
    else if (value !== undefined) _asPut(out, k, value);
  }
  if (value !== undefined && !Object.hasOwn(object, key)) _asPut(out, key, value);
  return freeze ? Object.freeze(out) : out;
}

// `doc` with its parent of `tokens` (which must exist) replaced by `change(parent, last)`.
function _asAtParent(doc, tokens, change, freeze) {
  if (tokens.length === 1) return change(doc, tokens[0]);
  const [first, ...rest] = tokens;
  let child;
  if (Array.isArray(doc)) {
    const index = _asIndex(first);
    if (typeof index !== "number" || index >= doc.length) throw "the parent does not exist";
    child = _asAtParent(doc[index], rest, change, freeze);
    const out = doc.slice();
    out[index] = child;
    return freeze ? Object.freeze(out) : out;
  }
  if (!_asIsObject(doc) || !Object.hasOwn(doc, first)) throw "the parent does not exist";
  child = _asAtParent(doc[first], rest, change, freeze);
  return _asWithMember(doc, first, child, freeze);
}

function _asAdd(doc, tokens, value, freeze) {
  if (tokens.length === 0) return value;
  return _asAtParent(
    doc,
    tokens,
    (parent, last) => {
      if (Array.isArray(parent)) {
        const index = _asIndex(last);
        if (index === undefined) throw `${JSON.stringify(last)} is not an array index`;
        if (index !== "-" && index > parent.length) throw `index ${index} is past the end of an array of ${parent.length}`;
        const out = parent.slice();
        out.splice(index === "-" ? parent.length : index, 0, value);
        return freeze ? Object.freeze(out) : out;
      }
      if (_asIsObject(parent)) return _asWithMember(parent, last, value, freeze);
      throw "the parent has no members";
    },
    freeze,
  );
}

function _asRemove(doc, tokens, freeze) {
  if (tokens.length === 0) throw "cannot remove the whole document";
  return _asAtParent(
    doc,
    tokens,
    (parent, last) => {
      if (Array.isArray(parent)) {
        const index = _asIndex(last);
        if (typeof index !== "number" || index >= parent.length) throw "the path does not exist";
        const out = parent.slice();
        out.splice(index, 1);
        return freeze ? Object.freeze(out) : out;
      }
      if (_asIsObject(parent) && Object.hasOwn(parent, last)) return _asWithMember(parent, last, undefined, freeze);
      throw "the path does not exist";
    },
    freeze,
  );
}

// One operation checked (a malformed patch throws before anything is applied).
function _asOperation(op, index) {
  const malformed = (why) => _asPatchError("malformed", index, undefined, why);
  if (!_asIsObject(op)) throw malformed("an operation is an object");
  if (!["add", "remove", "replace", "move", "copy", "test"].includes(op.op)) {
    throw malformed(`unknown op ${JSON.stringify(op.op)} (one of add, remove, replace, move, copy, test)`);
  }
  const path = _asPointer(op.path);
  if (path === null) throw malformed(`"path" is not a JSON Pointer: ${JSON.stringify(op.path)}`);
  const checked = { op: op.op, path, text: op.path };
  if (op.op === "move" || op.op === "copy") {
    checked.from = _asPointer(op.from);
    if (checked.from === null) throw malformed(`"from" is not a JSON Pointer: ${JSON.stringify(op.from)}`);
  }
  if (op.op === "add" || op.op === "replace" || op.op === "test") {
    // `"value": null` is a value; only an absent member is missing.
    if (!Object.hasOwn(op, "value")) throw malformed(`"value" is missing`);
    checked.value = op.value;
  }
  return checked;
}

function _asApplyOne(doc, op, freeze) {
  switch (op.op) {
    case "add":
      return _asAdd(doc, op.path, op.value, freeze);
    case "remove":
      return _asRemove(doc, op.path, freeze);
    case "replace":
      if (_asGet(doc, op.path) === undefined) throw "the path does not exist";
      if (op.path.length === 0) return op.value;
      // In its place: an element keeps its index, a member its position.
      return _asAtParent(
        doc,
        op.path,
        (parent, last) => {
          if (_asIsObject(parent)) return _asWithMember(parent, last, op.value, freeze);
          const out = parent.slice();
          out[_asIndex(last)] = op.value;
          return freeze ? Object.freeze(out) : out;
        },
        freeze,
      );
    case "move": {
      const value = _asGet(doc, op.from);
      if (value === undefined) throw `"from" does not exist`;
      const same = op.from.length === op.path.length && op.from.every((t, i) => t === op.path[i]);
      if (same) return doc;
      if (op.from.length < op.path.length && op.from.every((t, i) => t === op.path[i])) {
        throw "cannot move a value into its own child";
      }
      return _asAdd(_asRemove(doc, op.from, freeze), op.path, value, freeze);
    }
    case "copy": {
      const value = _asGet(doc, op.from);
      if (value === undefined) throw `"from" does not exist`;
      return _asAdd(doc, op.path, value, freeze);
    }
    default: {
      const actual = _asGet(doc, op.path);
      if (actual === undefined) throw "the path does not exist";
      if (!_asJsonEqual(actual, op.value)) {
        throw _asPatchError("test_failed", undefined, undefined, `the value is ${JSON.stringify(actual)}, not ${JSON.stringify(op.value)}`);
      }
      return doc;
    }
  }
}

function _asJsonPatch(target, ops, freeze) {
  if (!Array.isArray(ops)) throw _asPatchError("malformed", undefined, undefined, "a JSON Patch is an array of operations");
  const checked = ops.map(_asOperation);
  let doc = target;
  checked.forEach((op, index) => {
    try {
      doc = _asApplyOne(doc, op, freeze);
    } catch (why) {
      const code = typeof why === "string" ? "no_such_path" : why.code;
      const message = typeof why === "string" ? why : why.message;
      throw _asPatchError(code, index, { op: op.op, path: op.text }, message);
    }
  });
  return doc;
}

// Deep freeze of a freshly parsed JSON value (no cycles, no shared parts).
function _asFreeze(value) {
  if (value !== null && typeof value === "object") {
    for (const key of Object.keys(value)) _asFreeze(value[key]);
    Object.freeze(value);
  }
  return value;
}

function _asError(code, message, extra) {
  const error = new Error(message);
  error.name = "WatchError";
  error.code = code;
  return Object.assign(error, extra);
}

// The watch URL: the base's scheme mapped to ws/wss, its path kept as a prefix, its query kept.
function _asWatchUrl(base, agentId, since, token) {
  let url;
  try {
    // In a browser a relative base (say "/") resolves against the page.
    url = new URL(String(base), globalThis.location?.href);
  } catch {
    throw new TypeError(`watch: url must be an absolute http(s):// or ws(s):// URL, got ${JSON.stringify(base)}`);
  }
  const scheme = { "http:": "ws:", "https:": "wss:", "ws:": "ws:", "wss:": "wss:" }[url.protocol];
  if (scheme === undefined) {
    throw new TypeError(`watch: url must use http, https, ws or wss, got ${JSON.stringify(url.protocol)}`);
  }
  url.protocol = scheme;
  const prefix = url.pathname.replace(/\/+$/, "");
  url.pathname = `${prefix}/v1/agents/${encodeURIComponent(agentId)}/watch`;
  url.hash = "";
  if (since !== undefined) url.searchParams.set("since", String(since));
  if (token !== undefined) url.searchParams.set("access_token", token);
  return url.href;
}

/**
 * RFC 7396 JSON Merge Patch: returns `patch` applied to `target` as a new value. Neither input
 * is modified; untouched members of `target` are shared with the result, not copied.
 */
export function applyMergePatch(target, patch) {
  return _asMerge(target, patch, false);
}

/**
 * RFC 6902 JSON Patch: returns `ops` (an array of operations: add, remove, replace, move, copy,
 * test) applied in order to `target`, as a new value. Neither input is modified; untouched
 * parts of `target` are shared with the result. All or nothing: when an operation cannot
 * apply, it throws a `JsonPatchError` (`code` "malformed", "no_such_path" or "test_failed";
 * `index` the operation's, when one is to blame) and nothing else happened.
 */
export function applyJsonPatch(target, ops) {
  return _asJsonPatch(target, ops, false);
}

/**
 * Follows one agent's state over `WS {url}/v1/agents/{agentId}/watch`, keeping a local copy
 * up to date and reconnecting with `since` after any interruption. See README.md.
 */
export function watch(url, agentId, options = {}) {
  const opts = options ?? {};
  const WebSocketImpl = opts.WebSocket ?? globalThis.WebSocket;
  if (typeof WebSocketImpl !== "function") {
    throw new TypeError(
      "watch: no WebSocket implementation: pass options.WebSocket, or on Node 20 run " +
        "`node --experimental-websocket` (Node >= 22 has a global WebSocket)",
    );
  }
  if (typeof agentId !== "string") throw new TypeError("watch: agentId must be a string");
  // A URL parser removes the dot segments "." and ".." (even percent-encoded as %2E), so these
  // two ids cannot be named in a URL path at all.
  if (agentId === "." || agentId === "..") {
    throw new TypeError(`watch: the agent id ${JSON.stringify(agentId)} cannot be expressed in a URL path`);
  }
  if (opts.token !== undefined && typeof opts.token !== "string") {
    throw new TypeError("watch: options.token must be a string");
  }
  let version;
  let state;
  if (opts.since !== undefined) {
    if (!Number.isSafeInteger(opts.since) || opts.since < 0) {
      throw new TypeError("watch: options.since must be a non-negative integer");
    }
    // Patches after `since` only make sense on top of the state at `since`.
    if (opts.state === undefined) throw new TypeError("watch: options.since needs options.state, the state at that version");
    version = opts.since;
    state = _asFreeze(JSON.parse(JSON.stringify(opts.state)));
  }
  _asWatchUrl(url, agentId, undefined, opts.token); // a malformed url throws here, not later

  // Set when the copy is known not to be the state (a JSON Patch that does not apply to it):
  // the next connection asks for a snapshot instead of the changes after `version`.
  let resync = false;
  let socket = null; // the current connection; events of any other socket are ignored
  let opened = false;
  let stopped = false;
  let attempt = 0; // consecutive reconnects without a good message, for the backoff
  let retryTimer = null;
  let deadTimer = null;
  let lastHeard = 0;
  let deadAfter = _AS_DEAD_AFTER_MS;

  // Callbacks run last in every handler, after the copy and the timers are in order, so one
  // that throws (reported asynchronously, like any event listener's error) or calls stop()
  // leaves nothing half done.
  function call(callback, ...args) {
    if (stopped || typeof callback !== "function") return;
    try {
      callback(...args);
    } catch (error) {
      queueMicrotask(() => {
        throw error;
      });
    }
  }

  // One timer for the whole stream, re-armed only when it fires early: cheaper than resetting
  // it on every message.
  function armDeadTimer(delay) {
    clearTimeout(deadTimer);
    deadTimer = setTimeout(() => {
      deadTimer = null;
      const silent = performance.now() - lastHeard;
      if (silent < deadAfter) {
        armDeadTimer(deadAfter - silent);
      } else {
        restart(_asError("timeout", `watch: nothing received for ${Math.round(silent / 1000)} s; reconnecting`));
      }
    }, delay);
  }

  function connect() {
    retryTimer = null;
    let ws;
    try {
      ws = new WebSocketImpl(_asWatchUrl(url, agentId, resync ? undefined : version, opts.token));
    } catch (cause) {
      schedule();
      // Deferred: on the first attempt watch() has not returned its handle yet.
      const error = _asError("connect_failed", `watch: cannot open the WebSocket: ${cause?.message ?? cause}`, { cause });
      queueMicrotask(() => call(opts.onError, error));
      return;
    }
    socket = ws;
    opened = false;
    // The silence timer also bounds a connection attempt that hangs.
    lastHeard = performance.now();
    deadAfter = _AS_DEAD_AFTER_MS;
    armDeadTimer(deadAfter);
    ws.addEventListener("open", () => {
      if (ws === socket) opened = true;
    });
    ws.addEventListener("message", (event) => {
      if (ws === socket) receive(event.data);
    });
    ws.addEventListener("close", (event) => {
      if (ws === socket) closed(event.code, event.reason);
    });
    // The standard follows an "error" with a "close" (1006), but Node 20's WebSocket leaves a
    // refused upgrade at that "error", still CONNECTING: so the error is the close.
    ws.addEventListener("error", () => {
      if (ws !== socket) return;
      const wasOpen = opened;
      detach(); // first: close() on a CONNECTING socket fires "error" again, synchronously
      try {
        ws.close(1000);
      } catch {
        // Not closable in its state: detached all the same.
      }
      lost(wasOpen, 1006, "");
    });
  }

  function detach() {
    const ws = socket;
    socket = null;
    opened = false;
    clearTimeout(deadTimer);
    deadTimer = null;
    return ws;
  }

  function schedule() {
    if (stopped) return;
    const ceiling = Math.min(_AS_BACKOFF_CAP_MS, _AS_BACKOFF_FIRST_MS * 2 ** attempt);
    attempt = Math.min(attempt + 1, 16);
    // Jitter in [ceiling/2, ceiling): clients cut off together do not come back together.
    retryTimer = setTimeout(connect, ceiling / 2 + Math.random() * (ceiling / 2));
  }

  // The client gives up on the current connection (bad message, version gap, silence).
  function restart(error) {
    const ws = detach();
    try {
      ws?.close(1000);
    } catch {
      // Already closing: nothing to do.
    }
    schedule();
    call(opts.onError, error);
  }

  function closed(code, reason) {
    const wasOpen = opened;
    detach();
    lost(wasOpen, code, reason);
  }

  // The connection is gone (already detached): retry, and tell why.
  function lost(wasOpen, code, reason) {
    schedule();
    if (wasOpen) {
      call(opts.onError, _asError("closed", `watch: the server closed the stream (${code}${reason ? `: ${reason}` : ""})`, {
        closeCode: code,
        reason: reason ?? "",
      }));
    } else {
      // A browser tells nothing about a refused upgrade (401, 404, 400): only 1006.
      call(opts.onError, _asError("connect_failed", `watch: could not connect (close code ${code})`, {
        closeCode: code,
        reason: reason ?? "",
      }));
    }
  }

  function bad(why) {
    restart(_asError("bad_message", `watch: ${why}; reconnecting`));
  }

  function receive(data) {
    lastHeard = performance.now();
    if (typeof data !== "string") return bad("a binary frame");
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return bad("a frame that is not JSON");
    }
    if (!_asIsObject(message)) return bad("a message that is not an object");
    const type = message.type;
    // A message type this client does not know is ignored, for later versions of the protocol.
    if (!["snapshot", "patch", "json_patch", "replace", "ping"].includes(type)) return;
    const v = message.version;
    if (!Number.isSafeInteger(v) || v < 0) return bad(`a ${type} without a valid version (${JSON.stringify(v)})`);
    if (type === "ping") {
      attempt = 0;
      const every = message.interval_ms;
      if (Number.isSafeInteger(every) && every > 0 && 3 * every !== deadAfter) {
        deadAfter = 3 * every;
        armDeadTimer(deadAfter);
      }
      return;
    }
    if (type === "snapshot") {
      if (!("state" in message)) return bad("a snapshot without state");
      state = _asFreeze(message).state;
      resync = false;
    } else {
      const body = { patch: "patch", json_patch: "ops", replace: "state" }[type];
      if (!(body in message)) return bad(`a ${type} without its ${body}`);
      if (type === "json_patch" && !Array.isArray(message.ops)) return bad("a json_patch whose ops are not an array");
      if (version === undefined) return bad(`a ${type} before any snapshot`);
      if (v !== version + 1) {
        return restart(_asError("version_gap", `watch: version ${v} follows ${version}; reconnecting from ${version}`, {
          expected: version + 1,
          got: v,
        }));
      }
      _asFreeze(message);
      if (type === "json_patch") {
        try {
          state = _asJsonPatch(state, message.ops, true);
        } catch (cause) {
          // They applied to the stored state, so the copy is not that state: start afresh.
          resync = true;
          return restart(_asError("bad_message", `watch: version ${v}'s JSON Patch does not apply to the copy (${cause.message}); reconnecting for a snapshot`, { cause }));
        }
      } else {
        state = type === "patch" ? _asMerge(state, message.patch, true) : message.state;
      }
    }
    version = v;
    attempt = 0;
    call(opts.onState, state, version, message);
  }

  connect();

  return {
    stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(retryTimer);
      retryTimer = null;
      const ws = detach();
      try {
        ws?.close(1000);
      } catch {
        // Already closing.
      }
    },
    get state() {
      return state;
    },
    get version() {
      return version;
    },
    get connected() {
      return opened;
    },
  };
}
