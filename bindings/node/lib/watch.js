'use strict';
// watch(): the changes of a store's agents (by id or by prefix), committed by any process, as an
// async iterator. The library's watcher (one thread per store in the process) queues them, per
// agent in commit order, each once; this file takes them from that queue a few at a time, only
// while the consumer asks for more, and decodes them with the codec.
//
// Where the memory bound lives: in the library's queue (maxPending, default 10,000 events; an
// agent whose reader falls further behind has its queued events replaced by one 'resync' with
// its current state). This side holds at most one batch (PER_TURN events) taken from it. While
// the queue is empty and the consumer waits, the addon's one thread for every watch of the
// process wakes this thread when the next event is queued; the loop never blocks.
//
// The process stays alive while a consumer waits for an event (a `for await` on an open watch),
// and not because a watch is open: an abandoned watch does not hold the process, and is closed
// when the collector takes it.

const native = require('./native');
const codec = require('./codec');
const { translate, InvalidArgumentError, BadHandleError } = require('./errors');
const { settles, PER_TURN } = require('./turns');
const { call, versionArg, isPlainObject } = require('./agent');
const { nativeOptions } = require('./options');

// The keep-alive timer's period while a consumer waits (it never fires in practice; below 2^31
// ms, past which Node fires at once).
const KEEP_ALIVE_MS = 2 ** 30;
const noop = () => {};

function whole(name, value) {
  if (value === undefined || value === null) return undefined;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(`${name} must be a whole number of at least 1, got ${String(value)}`);
  }
  return value;
}

// An agent id: a non-empty string (the library checks its length and content).
function agentIdArg(what, id) {
  if (typeof id !== 'string' || id.length === 0) {
    throw new InvalidArgumentError(`${what} must be a non-empty string (an agent id), got ${id === '' ? 'an empty string' : id === null ? 'null' : typeof id}`);
  }
  return id;
}

// The resume points: {id: version} or a Map of them; a version past 2^53 is refused here (the
// addon takes numbers).
function sinceArg(since) {
  if (since === undefined || since === null) return undefined;
  let entries;
  if (since instanceof Map) entries = [...since];
  else if (isPlainObject(since)) entries = Object.entries(since);
  else throw new InvalidArgumentError('since must be a plain object or a Map of agent id to version ({id: version})');
  const out = {};
  for (const [id, version] of entries) {
    agentIdArg('a key of since', id);
    const v = versionArg(`since[${JSON.stringify(id)}]`, version);
    if (v === null) throw new InvalidArgumentError(`since[${JSON.stringify(id)}] must be a version, got ${String(version)}`);
    if (typeof v === 'bigint') throw new InvalidArgumentError(`since[${JSON.stringify(id)}] is past 2^53; a watch resumes from versions up to 2^53 - 1`);
    out[id] = v;
  }
  return out;
}

// The watch's own options (the rest are the connection's open options).
function specOf(options) {
  const { ids, prefix, since, states, maxPending, pollIntervalMs, rescanIntervalMs } = options;
  if (ids !== undefined && prefix !== undefined) {
    throw new InvalidArgumentError('a watch takes ids or prefix, not both (neither: every agent of the store)');
  }
  if (ids !== undefined && (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string' || id.length === 0))) {
    throw new InvalidArgumentError('ids must be an array of agent ids (non-empty strings)');
  }
  if (prefix !== undefined && typeof prefix !== 'string') {
    throw new InvalidArgumentError(`prefix must be a string ("" is every agent), got ${prefix === null ? 'null' : typeof prefix}`);
  }
  if (states !== undefined && typeof states !== 'boolean') throw new InvalidArgumentError('states must be a boolean');
  return {
    ids: ids === undefined ? undefined : [...ids],
    prefix,
    since: sinceArg(since),
    states,
    maxPending: whole('maxPending', maxPending),
    pollIntervalMs: whole('pollIntervalMs', pollIntervalMs),
    rescanIntervalMs: whole('rescanIntervalMs', rescanIntervalMs),
  };
}

// One event as the consumer gets it: patch and state decoded with the codec (null when absent).
function changeOf(raw) {
  return {
    agentId: raw.agentId,
    version: raw.version,
    kind: raw.kind,
    patch: raw.patch === null || raw.patch === undefined ? null : codec.decode(raw.patch),
    state: raw.state === null || raw.state === undefined ? null : codec.decode(raw.state),
    schema: raw.schema,
    at: raw.atMs ? new Date(raw.atMs) : null,
    migratedFrom: raw.migratedFrom === null || raw.migratedFrom === undefined ? null : raw.migratedFrom,
  };
}

class Watch {
  #native;
  // Events taken from the library's queue, not yet handed out (at most PER_TURN).
  #buffer = [];
  // The pending next()'s wake-up, while the queue is empty.
  #waiting = null;
  #keepAlive = null;
  // next() calls run one after another, so that concurrent ones get the events in order.
  #chain = Promise.resolve();
  #closed = false;
  #closing = null;
  #signal = null;
  #onAbort = null;

  /** Use watch(location, options). */
  constructor(opened, signal) {
    if (!(opened instanceof native.OpenedWatch)) throw new InvalidArgumentError('use watch(location, options) to open a watch');
    // The function the addon keeps reaches the watch only weakly: a watch nobody holds is
    // collected, and closed with its native half.
    const self = new WeakRef(this);
    try {
      this.#native = native.NativeWatch.start(opened, () => {
        const watch = self.deref();
        if (watch !== undefined) watch.#woken();
      });
    } catch (error) {
      throw translate(error);
    }
    if (signal !== undefined && signal !== null) {
      this.#signal = signal;
      this.#onAbort = () => { this.close().catch(noop); };
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /** The next change: `{value, done: false}`, or `{done: true}` once closed. */
  next() {
    const result = this.#chain.then(() => this.#next());
    this.#chain = result.then(noop, noop);
    return result;
  }

  async #next() {
    for (;;) {
      if (this.#closed) return { value: undefined, done: true };
      if (this.#buffer.length === 0) {
        let taken;
        try {
          taken = this.#native.take(PER_TURN, true);
        } catch (error) {
          return this.#failed(translate(error));
        }
        if (taken.length === 0) {
          await this.#wait();
          continue;
        }
        this.#buffer = taken;
      }
      // At most PER_TURN events (with the calls' results) settle in one turn of the loop: a
      // consumer that keeps up with a burst still lets the loop run between batches.
      const turn = settles.enter(null);
      if (turn !== undefined) await turn;
      if (this.#closed) return { value: undefined, done: true };
      return { value: changeOf(this.#buffer.shift()), done: false };
    }
  }

  // The watch failed for good (its store's error, reported once) or was closed underneath.
  async #failed(error) {
    await this.close();
    if (error instanceof BadHandleError) return { value: undefined, done: true };
    throw error;
  }

  #wait() {
    return new Promise((resolve) => {
      this.#waiting = resolve;
      if (this.#keepAlive === null) this.#keepAlive = setInterval(noop, KEEP_ALIVE_MS);
    });
  }

  #woken() {
    const resolve = this.#waiting;
    this.#waiting = null;
    if (this.#keepAlive !== null) {
      clearInterval(this.#keepAlive);
      this.#keepAlive = null;
    }
    if (resolve !== null) resolve();
  }

  /** Follows one more agent (a watch by ids only), from after `since` (default: from now). */
  async add(agentId, since) {
    agentIdArg('add: the agent id', agentId);
    const v = versionArg('since', since);
    if (typeof v === 'bigint') throw new InvalidArgumentError('since is past 2^53; a watch resumes from versions up to 2^53 - 1');
    const handle = this.#handle();
    await call(undefined, () => handle.add(agentId, v));
  }

  /** Stops following an agent (the changes already queued for it are still delivered). */
  async remove(agentId) {
    agentIdArg('remove: the agent id', agentId);
    const handle = this.#handle();
    await call(undefined, () => handle.remove(agentId));
  }

  #handle() {
    if (this.#closed) throw new BadHandleError('the watch is closed');
    return this.#native;
  }

  /** Closes the watch: a waiting next() resolves done; queued changes are dropped. Idempotent. */
  close() {
    if (this.#closing === null) {
      this.#closed = true;
      this.#buffer = [];
      if (this.#signal !== null) this.#signal.removeEventListener('abort', this.#onAbort);
      this.#woken();
      const handle = this.#native;
      this.#closing = call(undefined, () => handle.close()).catch((error) => {
        if (!(error instanceof BadHandleError)) throw error;
      });
    }
    return this.#closing;
  }

  /** Closes the watch (a `break` out of `for await` calls it). */
  async return() {
    await this.close();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

/**
 * Watches the agents of the store at `location` (a file or a postgresql:// URI): `ids` or
 * `prefix` (neither: every agent), `since`, `states`, `maxPending`, `pollIntervalMs`,
 * `rescanIntervalMs`, `signal` (aborting it cancels the opening, then closes the watch), and the
 * connection's open options. Resolves once the watched agents' versions are read: every change
 * committed after that is delivered.
 */
async function watch(location, options = {}) {
  if (typeof location !== 'string' || location.length === 0) {
    throw new InvalidArgumentError('location must be a non-empty string: a file or a postgresql:// URI');
  }
  if (!isPlainObject(options)) throw new InvalidArgumentError('options must be a plain object');
  const {
    ids, prefix, since, states, maxPending, pollIntervalMs, rescanIntervalMs, signal, ...open
  } = options;
  const spec = specOf({ ids, prefix, since, states, maxPending, pollIntervalMs, rescanIntervalMs });
  const json = JSON.stringify(nativeOptions(open));
  const opened = await call(signal, (token) => native.openWatch(location, json, spec, token));
  return new Watch(opened, signal);
}

module.exports = { watch, Watch };
