'use strict';
// The Agent class: the reference's API (getState, setState, replaceState, initialState,
// onStateChanged) on one native handle, plus versions, compare-and-set, the validator, the change
// log and cancellation. Every call that may wait runs on the library's worker pool (the addon's
// jobs; not libuv's pool, which fs, dns and crypto share); this file only encodes, decodes and
// orders hooks on the JavaScript thread.

const { AsyncLocalStorage } = require('node:async_hooks');
const native = require('./native');
const codec = require('./codec');
const { Snapshot } = require('./snapshot');
const errors = require('./errors');
const { nativeOptions, storeOptions } = require('./options');
const { starts, settles, NOT_BEGUN } = require('./turns');

const { translate, InvalidArgumentError, BadHandleError, HookError, CallCancelledError } = errors;

// A call's cancel token, fired by its AbortSignal; `done()` detaches the listener.
function cancelFor(signal) {
  if (signal === undefined || signal === null) return { token: null, done() {} };
  checkSignal(signal);
  const token = new native.CancelToken();
  const onAbort = () => token.cancel();
  signal.addEventListener('abort', onAbort, { once: true });
  return { token, done: () => signal.removeEventListener('abort', onAbort) };
}

// Refuses what is not an AbortSignal, and a signal aborted already (nothing started).
function checkSignal(signal) {
  if (typeof signal.addEventListener !== 'function' || typeof signal.aborted !== 'boolean') {
    throw new InvalidArgumentError('signal must be an AbortSignal');
  }
  if (signal.aborted) throw new CallCancelledError(NOT_BEGUN);
}

// Runs one addon job with its AbortSignal, in its turn, translating its error; its outcome is
// handed on in its turn too.
async function call(signal, start) {
  if (signal !== undefined && signal !== null) checkSignal(signal);
  const wait = starts.enter(signal);
  if (wait !== undefined) await wait;
  const cancel = cancelFor(signal);
  let outcome;
  let failed = false;
  try {
    outcome = await start(cancel.token);
  } catch (error) {
    outcome = error;
    failed = true;
  } finally {
    cancel.done();
  }
  const later = settles.enter(null);
  if (later !== undefined) await later;
  if (failed) throw translate(outcome);
  return outcome;
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

const MAX_VERSION = (1n << 64n) - 1n;

// A version as the addon takes it: a safe integer as a number, a larger one (up to 2^64 - 1, as
// the library counts) as a bigint.
function versionArg(name, value) {
  if (value === undefined || value === null) return null;
  if (typeof value === 'bigint') {
    if (value < 0n || value > MAX_VERSION) {
      throw new InvalidArgumentError(`${name} must be a whole number from 0 to 2^64 - 1, got ${value}`);
    }
    return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
  }
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name} must be a whole number of at least 0, got ${String(value)}`);
  }
  return value;
}

// How a HookError names a listener: its function's name, else its place among the listeners.
function hookName(hook, index) {
  return hook && hook.name ? hook.name : `listener ${index + 1} (anonymous)`;
}

// Hook errors kept for the write that made the change; bounded, in case nobody asks.
const MAX_KEPT_HOOK_ERRORS = 1024;

// The agents whose hooks the current async context runs inside: a write made by a hook (or
// anything it awaits) is delivered after that hook returns, so it must not wait for the
// delivery of its own change, which would wait for the hook (a deadlock).
const insideHooks = new AsyncLocalStorage();

class Agent {
  #native = null;
  #path = undefined;
  #options = {};
  #listeners = [];
  // The state as this handle last read or wrote it (lib/snapshot.js), and the read's ticket
  // (0: none, e.g. after a write; the next read confirms it).
  #snap = null;
  #ticket = 0;
  // Hooks run one after another, in commit order, on this thread.
  #delivery = Promise.resolve();
  #hookErrors = new Map();
  // Versions written from inside this agent's hooks: their writes resolved before their delivery,
  // so a hook failure of theirs goes to the write still waiting, the outer one.
  #nested = new Set();
  #closing = null;
  // The validator, held here: the function the addon keeps reaches it through a WeakRef.
  #validator = null;
  // The schema steps of code, by the version each upgrades from (reached the same way).
  #steps = new Map();

  /**
   * Opens the agent `options.agentId` of the store at `path` (a file, or a postgresql:// URI)
   * and returns an instance of the class it is called on (`Conversation.open(...)`).
   */
  static async open(path, options = {}) {
    if (typeof path !== 'string' || path.length === 0) {
      throw new InvalidArgumentError('path must be a non-empty string: a file or a postgresql:// URI');
    }
    if (!isPlainObject(options)) throw new InvalidArgumentError('options must be a plain object');
    const agent = new this();
    await agent.#attach(path, options);
    return agent;
  }

  async #attach(path, options) {
    const { signal, initialState, onStateChanged, validator, ...given } = options;
    // The class form declares its schema as statics (`static schemaVersion = 2`,
    // `static schemaSteps = [...]`); an option of the same name wins.
    const rest = { ...given };
    if (rest.schemaVersion === undefined && this.constructor.schemaVersion !== undefined) {
      rest.schemaVersion = this.constructor.schemaVersion;
    }
    if (rest.schemaSteps === undefined && this.constructor.schemaSteps !== undefined) {
      rest.schemaSteps = this.constructor.schemaSteps;
    }
    const { declarative, code } = splitSteps(rest.schemaSteps);
    if (declarative === undefined) delete rest.schemaSteps;
    else rest.schemaSteps = declarative;
    if (initialState !== undefined && typeof initialState !== 'function' && !isPlainObject(initialState)) {
      throw new InvalidArgumentError('initialState must be a plain object or a function returning one');
    }
    if (onStateChanged !== undefined && typeof onStateChanged !== 'function') {
      throw new InvalidArgumentError('onStateChanged must be a function (next, prev)');
    }
    this.#path = path;
    this.#options = { initialState };
    const initial = this.#initialText();
    // The initial state goes to the library as its option too, so that opening checks it like
    // the other bindings do (the size cap, the codec): a state no write could start from is
    // refused at once.
    const json = JSON.stringify({ ...nativeOptions(rest), initial_state: JSON.parse(initial) });
    const opened = await call(signal, (token) => native.openAgent(path, json, initial, token));
    this.#native = native.NativeAgent.fromOpened(opened);
    if (onStateChanged) this.#listeners.push(onStateChanged);
    if (this.#listeners.length > 0 || this.#overridesHook() || rest.watch === true) this.#native.watchChanges();
    if (rest.watch === true) {
      // The store's watcher delivers other handles' and processes' changes on its own thread,
      // when no call of this handle takes them: the addon wakes this thread then. The function
      // it keeps reaches the agent only weakly (an agent left unclosed is still collected).
      const self = new WeakRef(this);
      this.#native.wakeOnChanges(() => {
        const agent = self.deref();
        if (agent !== undefined) agent.#delivered();
      });
    }
    try {
      if (validator !== undefined && validator !== null) this.setValidator(validator);
      for (const step of code) this.setSchemaStep(step.from, step.upgrade);
    } catch (error) {
      // A handle the caller never gets is closed at once.
      await this.close().catch(() => {});
      throw error;
    }
  }

  // True while one of this agent's hooks runs in the current async context: a call made there must
  // not wait for the delivery under way, which waits for that hook (a deadlock).
  #insideOwnHook() {
    const running = insideHooks.getStore();
    return running !== undefined && running.has(this);
  }

  #overridesHook() {
    return this.onStateChanged !== Agent.prototype.onStateChanged;
  }

  #handle() {
    if (this.#native === null) throw new BadHandleError('the agent is not open (use Agent.open)');
    if (this.#closing !== null) throw new BadHandleError('the agent is closed');
    return this.#native;
  }

  #initialText() {
    const initial = this.initialState();
    if (!isPlainObject(initial)) throw new InvalidArgumentError('initialState() must return a plain object');
    return codec.encode(initial);
  }

  /** The state to show while nothing is stored; never persisted by a read. Override it. */
  initialState() {
    const initial = this.#options.initialState;
    if (typeof initial === 'function') return initial();
    if (initial !== undefined) return codec.decode(codec.encode(initial));
    return {};
  }

  /**
   * Called after every committed change made through this agent, in commit order, with
   * (next, prev, change): change is {version, kind, schema, migratedFrom, patch}. Override it.
   */
  async onStateChanged(next, prev, change) {} // eslint-disable-line no-unused-vars

  /** The stored state, or initialState() while nothing is stored. */
  async getState(options) {
    return (await this.getStateVersioned(options)).state;
  }

  /** The state with its version (0: nothing stored), read together. */
  async getStateVersioned(options = {}) {
    const handle = this.#handle();
    // The hot path: nothing was committed since this handle's last read (shared memory only).
    if (this.#ticket !== 0 && handle.isCurrent(this.#ticket)) {
      return { state: this.#stateOf(this.#snap), version: this.#snap.version };
    }
    // The addon leaves the text out when it is the version this handle holds already (since
    // its own write, or an earlier read whose ticket no longer says so).
    const held = this.#snap;
    const known = held !== null && held.version > 0 ? held.version : null;
    const read = await call(options.signal, (token) => handle.read(token, known));
    const snap = read.state === null || read.state === undefined
      ? held
      : Snapshot.fromText(read.version, read.state);
    this.#snap = snap;
    this.#ticket = read.ticket;
    // A read that found a state of an older schema version committed its migration first: the
    // hooks see it (kind 'migration') before the read resolves, as after a write.
    // (Only then: a read that committed nothing waits for no hook.)
    if (this.#listeners.length > 0 || this.#overridesHook()) {
      const taken = this.#drain();
      if (taken.length > 0) {
        if (this.#insideOwnHook()) this.#nested.add(snap.version);
        else await this.#settle(snap.version);
      }
    }
    return { state: this.#stateOf(snap), version: snap.version };
  }

  // While nothing is stored, initialState() answers every read (computed each time).
  #stateOf(snap) {
    return snap.version === 0 ? this.initialState() : snap.state();
  }

  /** Merges `patch` (RFC 7396: null deletes, objects merge) and returns the merged state. */
  async setState(patch, options = {}) {
    return (await this.#write('setState', patch, options)).state;
  }

  /** Replaces the whole state with `next` and returns it. */
  async replaceState(next, options = {}) {
    return (await this.#write('replaceState', next, options)).state;
  }

  /** setState only at version `expected` (else ConflictError, nothing written): {state, version}. */
  async setStateIf(expected, patch, options = {}) {
    return this.#write('setState', patch, { ...options, expected: versionArg('expected', expected) });
  }

  /** replaceState only at version `expected` (else ConflictError): {state, version}. */
  async replaceStateIf(expected, next, options = {}) {
    return this.#write('replaceState', next, { ...options, expected: versionArg('expected', expected) });
  }

  /**
   * Applies `operations`, an RFC 6902 JSON Patch (an array of {op, path, value?, from?}), in one
   * transaction, all or nothing, and returns the new state. A failed `test`, a path that names
   * nothing or a malformed operation rejects (TestFailedError, PathError, InvalidArgumentError)
   * and nothing is written.
   */
  async patchState(operations, options = {}) {
    return (await this.#write('patchState', operations, options)).state;
  }

  /** patchState only at version `expected` (else ConflictError, nothing written): {state, version}. */
  async patchStateIf(expected, operations, options = {}) {
    return this.#write('patchState', operations, { ...options, expected: versionArg('expected', expected) });
  }

  /**
   * The part of the state at `pointer` (an RFC 6901 JSON Pointer: "/messages/0/text"; "" is the
   * whole state), decoded; only that part crosses from the library. PathError when it names
   * nothing.
   */
  async getPath(pointer, options = {}) {
    const handle = this.#handle();
    if (typeof pointer !== 'string') throw new InvalidArgumentError(`getPath takes a JSON Pointer, a string ("" or "/a/0/b"), got ${typeof pointer}`);
    this.#refreshInitial(handle);
    const text = await call(options.signal, (token) => handle.getPath(pointer, token));
    await this.#deliverAfterRead();
    return codec.decode(text);
  }

  /**
   * The last `n` elements of the array at `pointer`, oldest first (at most `n`; the last message
   * is `(await getTail("/messages", 1))[0]`). PathError when the pointer names nothing,
   * InvalidArgumentError when the value there is not an array.
   */
  async getTail(pointer, n, options = {}) {
    const handle = this.#handle();
    if (typeof pointer !== 'string') throw new InvalidArgumentError(`getTail takes a JSON Pointer, a string ("" or "/a/0/b"), got ${typeof pointer}`);
    if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`getTail: n must be a whole number of at least 0, got ${String(n)}`);
    this.#refreshInitial(handle);
    const text = await call(options.signal, (token) => handle.getTail(pointer, n, token));
    await this.#deliverAfterRead();
    return codec.decode(text);
  }

  // Until this handle has seen a stored state, the library's reads and writes may answer from the
  // initial state: it gets initialState()'s current answer (a function may answer differently).
  #refreshInitial(handle) {
    const held = this.#snap;
    if (held === null || held.version === 0) handle.setInitial(this.#initialText());
  }

  // After a read through the library that is not getState's: a read that found a state of an
  // older schema version committed its migration, which the hooks see before the read resolves.
  async #deliverAfterRead() {
    if (this.#listeners.length === 0 && !this.#overridesHook()) return;
    const taken = this.#drain();
    if (taken.length === 0) return;
    const version = taken[taken.length - 1];
    if (this.#insideOwnHook()) this.#nested.add(version);
    else await this.#settle(version);
  }

  async #write(method, value, options) {
    const handle = this.#handle();
    if (method === 'patchState') {
      if (!Array.isArray(value)) {
        throw new InvalidArgumentError('patchState takes an array of JSON Patch operations (RFC 6902: [{op, path, value}])');
      }
    } else if (!isPlainObject(value)) {
      throw new InvalidArgumentError(`${method} takes a plain object (${method === 'setState' ? 'a merge patch' : 'the whole state'})`);
    }
    const expected = versionArg('expected', options.expected);
    const text = codec.encode(value);
    const held = this.#snap;
    // Until this handle has seen a stored state, a write may start from the initial state.
    this.#refreshInitial(handle);
    let result;
    if (method === 'patchState') {
      // The addon always answers a JSON Patch with the state's text: this side does not apply
      // RFC 6902 itself (a second implementation could disagree with the library's).
      result = await call(options.signal, (token) => handle.patchState(text, expected, token));
    } else {
      const known = held !== null && held.derivable(text) ? held.version : null;
      result = await call(options.signal, (token) => handle[method](text, expected, known, token));
    }
    const snap = result.state === null || result.state === undefined
      ? held.derive(result.version, method, text)
      : Snapshot.fromText(result.version, result.state);
    this.#snap = snap;
    this.#ticket = 0;
    await this.#deliverThrough(result.version);
    return { state: snap.state(), version: snap.version };
  }

  // Delivers every change the handle queued (in commit order, after those already under way),
  // then reports a hook failure of the change at `version`, if it had one.
  async #deliverThrough(version) {
    if (this.#listeners.length === 0 && !this.#overridesHook()) return;
    this.#drain();
    if (this.#insideOwnHook()) {
      // Delivered after the hook returns; the outer write reports a failure of its hooks.
      this.#nested.add(version);
      return;
    }
    await this.#settle(version);
  }

  // Waits for the deliveries under way, and for those that writes from inside the hooks queued
  // meanwhile; then throws the hook failure of the change at `version` (if given), else of a change
  // written from inside a hook.
  async #settle(version) {
    let chain = this.#delivery;
    await chain;
    // Only writes from inside the hooks make it wait again (never other callers' writes, which
    // their own callers await): a steady stream of writes cannot hold this one back.
    while (this.#nested.size > 0 && chain !== this.#delivery) {
      chain = this.#delivery;
      await chain;
    }
    let failure;
    if (version !== undefined) {
      failure = this.#hookErrors.get(version);
      this.#hookErrors.delete(version);
    }
    for (const v of this.#nested) {
      this.#nested.delete(v);
      if (failure === undefined) failure = this.#hookErrors.get(v);
      this.#hookErrors.delete(v);
    }
    if (failure !== undefined) throw failure;
  }

  // Changes the store's watcher queued (the open option `watch`): to the hooks, in commit order
  // after the deliveries under way. A hook's failure is kept like a poll's, for nobody: no call
  // of this handle made the change.
  #delivered() {
    if (this.#native === null || this.#closing !== null) return;
    if (this.#listeners.length > 0 || this.#overridesHook()) this.#drain();
    else this.#native.takeChanges();
  }

  // Queues the changes taken for delivery; returns their versions.
  #drain() {
    const changes = this.#native.takeChanges();
    for (const change of changes) {
      this.#delivery = this.#delivery.then(() => this.#runHooks(change));
    }
    return changes.map((change) => change.version);
  }

  async #runHooks(change) {
    const next = codec.decode(change.next);
    const prev = codec.decode(change.prev);
    const patchText = change.patch === null || change.patch === undefined ? null : change.patch;
    const info = {
      version: change.version,
      kind: change.kind,
      schema: change.schema,
      migratedFrom: change.migratedFrom === undefined ? null : change.migratedFrom,
    };
    const hooks = [];
    if (this.#overridesHook()) hooks.push([(n, p, i) => this.onStateChanged(n, p, i), 'onStateChanged']);
    this.#listeners.forEach((listener, i) => hooks.push([listener, hookName(listener, i)]));
    // Every hook sees every change, as in the other bindings; the first failure is reported.
    let failure;
    const running = new Set(insideHooks.getStore());
    running.add(this);
    for (const [hook, name] of hooks) {
      try {
        // Each hook gets its own decoded patch (the merge patch or the JSON Patch's operations).
        const patch = patchText === null ? null : codec.decode(patchText);
        await insideHooks.run(running, () => hook(next, prev, { ...info, patch }));
      } catch (error) {
        if (failure !== undefined) continue;
        const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        failure = new HookError(`${name} hook raised ${what} (the change, version ${change.version}, is committed)`, { cause: error });
      }
    }
    if (failure !== undefined) {
      if (this.#hookErrors.size >= MAX_KEPT_HOOK_ERRORS) {
        this.#hookErrors.delete(this.#hookErrors.keys().next().value);
      }
      this.#hookErrors.set(change.version, failure);
    }
  }

  /**
   * Adds a listener called like onStateChanged(next, prev) after each change; returns a function
   * that removes it.
   */
  subscribe(listener) {
    if (typeof listener !== 'function') throw new InvalidArgumentError('subscribe takes a function (next, prev)');
    this.#handle().watchChanges();
    this.#listeners.push(listener);
    return () => {
      const i = this.#listeners.indexOf(listener);
      if (i >= 0) this.#listeners.splice(i, 1);
    };
  }

  /**
   * Sets the validator (null removes it): called on this thread with (next, prev, patch,
   * {kind, version}) before a change through this agent commits (patch: the merge patch, a JSON
   * Patch's operations, or null), inside its transaction; return false or a string (the
   * reason), or throw, to reject it (RejectedError, nothing written). Synchronous.
   */
  setValidator(validator) {
    const handle = this.#handle();
    if (validator === null || validator === undefined) {
      handle.setValidator(null);
      this.#validator = null;
      return;
    }
    if (typeof validator !== 'function') throw new InvalidArgumentError('the validator must be a function (next, prev, patch)');
    this.#validator = validator;
    // The function the addon keeps is a root for the collector: it reaches the agent (and so the
    // validator, which often refers to the agent) only weakly, so an agent left unclosed is still
    // collected and closed. While a write runs, its caller's Promise keeps the agent alive.
    const self = new WeakRef(this);
    handle.setValidator(([next, prev, patch, version, kind]) => {
      const agent = self.deref();
      const current = agent === undefined ? null : agent.#validator;
      if (current === null) return 'the agent was collected; the change was not written';
      try {
        const verdict = current(
          codec.decode(next),
          codec.decode(prev),
          patch === null ? null : codec.decode(patch),
          { kind, version },
        );
        if (verdict && typeof verdict.then === 'function') {
          // Refused unawaited: its rejection, if any, must not end the process as unhandled.
          verdict.then(undefined, () => {});
          return 'the validator returned a Promise; validators are synchronous (the write waits inside its transaction)';
        }
        if (verdict === false) return 'the validator rejected the change';
        if (typeof verdict === 'string') return verdict || 'the validator rejected the change';
        return '';
      } catch (error) {
        return `the validator raised ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
      }
    });
  }

  /**
   * Sets (null removes) the schema step of code that upgrades a state from schema version `from`
   * to `from + 1`: `step(state, from)` returns the upgraded state (a plain object). It runs on
   * this thread inside the transaction that migrates, while the write waits: synchronous; a
   * throw, a Promise or anything but a plain object fails the migration (MigrationError,
   * nothing written). Set steps right after opening, before the first read or write.
   */
  setSchemaStep(from, step) {
    const handle = this.#handle();
    if (!Number.isSafeInteger(from) || from < 0 || from > 0xffffffff) {
      throw new InvalidArgumentError(`setSchemaStep: from must be a schema version, a whole number of at least 0, got ${String(from)}`);
    }
    if (step === null || step === undefined) {
      handle.setSchemaStep(from, null);
      this.#steps.delete(from);
      return;
    }
    if (typeof step !== 'function') throw new InvalidArgumentError('setSchemaStep: the step must be a function (state, from) returning the upgraded state');
    const self = new WeakRef(this);
    try {
      handle.setSchemaStep(from, ([text, k]) => {
        const agent = self.deref();
        const current = agent === undefined ? undefined : agent.#steps.get(k);
        if (current === undefined) return { error: 'the agent was collected or the step removed' };
        const name = current.name || 'the step';
        try {
          const out = current(codec.decode(text), k);
          if (out && typeof out.then === 'function') {
            out.then(undefined, () => {});
            return { error: `${name} returned a Promise; schema steps are synchronous (the migration waits inside its transaction)` };
          }
          if (!isPlainObject(out)) return { error: `${name} returned ${out === null ? 'null' : typeof out}, not a plain object (the upgraded state)` };
          return { state: codec.encode(out) };
        } catch (error) {
          return { error: `${name} raised ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}` };
        }
      });
    } catch (error) {
      throw translate(error);
    }
    this.#steps.set(from, step);
  }

  /** The schema version this agent declares (the `schemaVersion` option, default 0). */
  get schemaVersion() {
    return this.#handle().schemaVersion();
  }

  /** The state at `version` as stored, not upgraded, with its schema version: {state, schema}. */
  async stateAtStored(version, options = {}) {
    const handle = this.#handle();
    const v = versionArg('version', version);
    const stored = await call(options.signal, (token) => handle.stateAtStored(v, token));
    return { state: codec.decode(stored.state), schema: stored.schema };
  }

  /** `state`, stored under schema version `from`, upgraded to this agent's version; writes nothing. */
  async upgradeState(state, from, options = {}) {
    const handle = this.#handle();
    if (!isPlainObject(state)) throw new InvalidArgumentError('upgradeState takes a plain object (the state as stored)');
    if (!Number.isSafeInteger(from) || from < 0 || from > 0xffffffff) {
      throw new InvalidArgumentError(`upgradeState: from must be a schema version, a whole number of at least 0, got ${String(from)}`);
    }
    const text = codec.encode(state);
    return codec.decode(await call(options.signal, (token) => handle.upgradeState(text, from, token)));
  }

  /** The changes committed after version `after` (needs the change log), oldest first. */
  async changesSince(after = 0, options = {}) {
    const handle = this.#handle();
    const from = versionArg('after', after);
    const text = await call(options.signal, (token) => handle.changesSince(from, token));
    return codec.decode(text).map((c) => {
      const migratedFrom = c.migrated_from === undefined ? null : c.migrated_from;
      return {
        version: c.version,
        at: new Date(c.at),
        kind: c.kind !== undefined ? c.kind : changeKind(c.patch, migratedFrom),
        schema: c.schema === undefined ? 0 : c.schema,
        migratedFrom,
        patch: c.patch,
        next: c.next,
      };
    });
  }

  /**
   * The change log as an async iterator, from after version `after`; with `follow`, it waits for
   * new changes (checking every `intervalMs`) until `signal` aborts, then ends (no error), else it
   * ends at the newest.
   */
  async *changes({ after = 0, follow = false, intervalMs = 100, signal } = {}) {
    let last = versionArg('after', after);
    for (;;) {
      let batch;
      try {
        batch = await this.changesSince(last, { signal });
      } catch (error) {
        // Following ends when the signal aborts, whether it was waiting or reading; without
        // `follow`, an aborted read is a cancelled call like any other.
        if (follow && error instanceof CallCancelledError && signal && signal.aborted) return;
        throw error;
      }
      for (const change of batch) {
        last = change.version;
        yield change;
      }
      if (!follow || (signal && signal.aborted)) return;
      if (batch.length === 0) {
        // The wait between checks: ended by its timer or by the signal, whichever comes first;
        // the abort listener goes with it (one per wait would pile up on a long follow).
        await new Promise((resolve) => {
          const onAbort = () => { clearTimeout(timer); resolve(); };
          const timer = setTimeout(() => {
            if (signal) signal.removeEventListener('abort', onAbort);
            resolve();
          }, intervalMs);
          if (signal) signal.addEventListener('abort', onAbort, { once: true });
        });
        if (signal && signal.aborted) return;
      }
    }
  }

  /** The state as it was at `version` (needs the change log). */
  async stateAt(version, options = {}) {
    const handle = this.#handle();
    const v = versionArg('version', version);
    return codec.decode(await call(options.signal, (token) => handle.stateAt(v, token)));
  }

  /** Replaces the state with the state at `version`, as a new change: {state, version}. */
  async restore(version, options = {}) {
    const handle = this.#handle();
    const v = versionArg('version', version);
    const result = await call(options.signal, (token) => handle.restore(v, token));
    this.#snap = Snapshot.fromText(result.version, result.state);
    this.#ticket = 0;
    await this.#deliverThrough(result.version);
    return { state: this.#snap.state(), version: result.version };
  }

  /**
   * Delivers to this agent's hooks the changes other handles and processes committed (with the
   * change log on); resolves to how many.
   */
  async poll(options = {}) {
    const handle = this.#handle();
    await call(options.signal, (token) => handle.poll(token));
    const versions = this.#listeners.length > 0 || this.#overridesHook() ? this.#drain() : [];
    // From inside one of this agent's hooks they are delivered after that hook returns.
    if (this.#insideOwnHook()) return versions.length;
    await this.#settle(undefined);
    // After every delivery, the first hook failure among them (as the other bindings report it).
    let failure;
    for (const v of versions) {
      if (failure === undefined) failure = this.#hookErrors.get(v);
      this.#hookErrors.delete(v);
    }
    if (failure !== undefined) throw failure;
    return versions.length;
  }

  /** The size cap in force for this agent, in bytes. */
  get maxValueBytes() {
    return this.#handle().maxValueBytes();
  }

  /** The store's path or URI. */
  get path() {
    return this.#path;
  }

  /** True until close(). */
  get isOpen() {
    return this.#native !== null && this.#closing === null && this.#native.isOpen();
  }

  /** Closes the agent: later calls fail with BadHandleError; hooks under way finish first. */
  async close() {
    if (this.#native === null) return;
    if (this.#closing === null) {
      const handle = this.#native;
      // From inside one of this agent's hooks, the delivery under way waits for that hook.
      const inside = this.#insideOwnHook();
      this.#closing = (async () => {
        if (!inside) await this.#delivery;
        try {
          // In its turn, after the calls made before it (some may still wait for theirs).
          await call(undefined, () => handle.close());
        } catch (error) {
          const e = translate(error);
          if (!(e instanceof BadHandleError)) throw e;
        }
      })();
    }
    return this.#closing;
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

// A change's kind from a change-log entry of a library that did not write "kind": a migration
// names the version it upgraded from; a replacement has no patch.
function changeKind(patch, migratedFrom) {
  if (migratedFrom !== null) return 'migration';
  return patch === null ? 'replace' : 'merge';
}

// The schemaSteps option split: the declarative steps ({from, ops}) go to the library (their
// values through the codec, as a state's), the steps of code ({from, upgrade}) to setSchemaStep.
function splitSteps(steps) {
  if (steps === undefined || steps === null) return { declarative: undefined, code: [] };
  if (!Array.isArray(steps)) {
    throw new InvalidArgumentError('schemaSteps must be an array of steps: {from, ops: [...]} or {from, upgrade(state)}');
  }
  const declarative = [];
  const code = [];
  steps.forEach((step, i) => {
    if (!isPlainObject(step)) throw new InvalidArgumentError(`schemaSteps[${i}] must be a plain object {from, ops} or {from, upgrade}`);
    if (typeof step.upgrade === 'function') {
      if (step.ops !== undefined) throw new InvalidArgumentError(`schemaSteps[${i}] has both ops and upgrade: one step is one or the other`);
      code.push(step);
    } else if (step.upgrade !== undefined) {
      throw new InvalidArgumentError(`schemaSteps[${i}].upgrade must be a function (state, from) returning the upgraded state`);
    } else {
      declarative.push(step);
    }
  });
  return { declarative: JSON.parse(codec.encode({ steps: declarative })).steps, code };
}

/** The plain-object form: an Agent whose initialState, onStateChanged and validator are options. */
async function openAgent(path, options = {}) {
  return Agent.open(path, options);
}

async function listAgents(path, options = {}) {
  const { prefix = null, after = null, limit = 1000, signal, ...rest } = options;
  const json = JSON.stringify(storeOptions(rest));
  const text = await call(signal, (token) => native.listAgents(path, json, prefix, after, limit, token));
  return JSON.parse(text).map(entryOf);
}

async function deleteAgent(path, agentId, options = {}) {
  const { ifVersion, signal, ...rest } = options;
  const json = JSON.stringify(storeOptions(rest));
  const v = versionArg('ifVersion', ifVersion);
  return call(signal, (token) => native.deleteAgent(path, json, agentId, v, token));
}

async function expireAgents(path, options = {}) {
  const { idleMs, limit = 1000, dryRun = false, signal, ...rest } = options;
  if (typeof idleMs !== 'number') throw new InvalidArgumentError('expireAgents needs idleMs, a number of milliseconds');
  const json = JSON.stringify(storeOptions(rest));
  const text = await call(signal, (token) => native.expireAgents(path, json, idleMs, limit, dryRun, token));
  return JSON.parse(text).map(entryOf);
}

function entryOf(entry) {
  return { agentId: entry.id, version: entry.version, bytes: entry.bytes, writtenAt: new Date(entry.written_at) };
}

module.exports = {
  Agent, openAgent, listAgents, deleteAgent, expireAgents,
  // For lib/watch.js (index.js exports only the names above).
  call, versionArg, isPlainObject,
};
