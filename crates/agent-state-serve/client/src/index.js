// @agent-state/client: follow an agent's state served by `agent-state serve`
// (crates/agent-state-serve/PROTOCOL.md is the contract this module implements).
//
// One self-contained ES module without imports: the server inlines this very file into its
// inspector page, ahead of the page's own code in the same <script type="module">, so every
// private top-level name carries the `_as` prefix to stay out of the page's way.

// The watch stream's timing. The server pings every 15 s, so 45 s of silence is three missed
// pings: the connection is dead even if the socket has not noticed (a browser never sees
// WebSocket-level pings).
const _AS_DEAD_AFTER_MS = 45000;
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

  let socket = null; // the current connection; events of any other socket are ignored
  let opened = false;
  let stopped = false;
  let attempt = 0; // consecutive reconnects without a good message, for the backoff
  let retryTimer = null;
  let deadTimer = null;
  let lastHeard = 0;

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
      if (silent < _AS_DEAD_AFTER_MS) {
        armDeadTimer(_AS_DEAD_AFTER_MS - silent);
      } else {
        restart(_asError("timeout", `watch: nothing received for ${Math.round(silent / 1000)} s; reconnecting`));
      }
    }, delay);
  }

  function connect() {
    retryTimer = null;
    let ws;
    try {
      ws = new WebSocketImpl(_asWatchUrl(url, agentId, version, opts.token));
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
    armDeadTimer(_AS_DEAD_AFTER_MS);
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
    if (type !== "snapshot" && type !== "patch" && type !== "replace" && type !== "ping") return;
    const v = message.version;
    if (!Number.isSafeInteger(v) || v < 0) return bad(`a ${type} without a valid version (${JSON.stringify(v)})`);
    if (type === "ping") {
      attempt = 0;
      return;
    }
    if (type === "snapshot") {
      if (!("state" in message)) return bad("a snapshot without state");
      state = _asFreeze(message).state;
    } else {
      const body = type === "patch" ? "patch" : "state";
      if (!(body in message)) return bad(`a ${type} without its ${body}`);
      if (version === undefined) return bad(`a ${type} before any snapshot`);
      if (v !== version + 1) {
        return restart(_asError("version_gap", `watch: version ${v} follows ${version}; reconnecting from ${version}`, {
          expected: version + 1,
          got: v,
        }));
      }
      _asFreeze(message);
      state = type === "patch" ? _asMerge(state, message.patch, true) : message.state;
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
