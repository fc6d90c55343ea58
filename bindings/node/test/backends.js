'use strict';
// Which backends each test runs on, and where its store lives there
// (tests/conformance/README.md, "Where the stores live"):
// - SQLite, always: a fresh file, store.db, in a fresh mkdtemp directory, removed afterwards;
// - PostgreSQL when AGENT_STATE_TEST_PG_URI is set: the server at that URI and a fresh agentId
//   (node_<pid>_<start time>_<n>), unique among the tests, runners and processes sharing the
//   database. Without the URI the PostgreSQL variants are skipped, except under CI=true, where
//   a missing server is a failure.
//
// `eachBackend(name, fn)` declares the test `name [sqlite]` (and `name [postgres]`); `fn(t, store)`
// gets a `store`: `{ name, path, options, dir, open(extra), fresh() }`. `store.options` names the
// store's agent (`{ agentId }` on PostgreSQL, `{}` on a file): pass it with every open.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const test = require('node:test');

const agentState = require('..');

const PG_URI = process.env.AGENT_STATE_TEST_PG_URI || '';
const CI = process.env.CI === 'true';
if (PG_URI && !/^postgres(ql)?:\/\//.test(PG_URI)) {
  throw new Error(`AGENT_STATE_TEST_PG_URI=${PG_URI} is not a postgres:// or postgresql:// URI`);
}

const prefix = `node_${process.pid}_${Date.now().toString(16)}_`;
let counter = 0;

/** A fresh agentId: no other test, runner or process uses it. */
function newAgentId() {
  counter += 1;
  return `${prefix}${counter}`;
}

function freshDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'agent-state-node-'));
}

class Store {
  constructor(name, t) {
    this.name = name;
    // Every test gets a directory of its own for its helpers' files (scripts, locks).
    this.dir = freshDir();
    this.agents = [];
    if (name === 'sqlite') {
      this.path = path.join(this.dir, 'store.db');
      this.options = {};
    } else {
      this.path = PG_URI;
      this.options = { agentId: newAgentId() };
    }
    t.after(async () => {
      for (const agent of this.agents) {
        try {
          await agent.close();
        } catch {
          // closed already, or its store is gone: nothing to release
        }
      }
      fs.rmSync(this.dir, { recursive: true, force: true });
    });
  }

  get postgres() {
    return this.name === 'postgres';
  }

  /** Opens this store's agent with `extra` options (closed when the test ends). */
  async open(extra = {}, cls = agentState.Agent) {
    const agent = await cls.open(this.path, { ...extra, ...this.options });
    this.agents.push(agent);
    return agent;
  }

  /** Another agent of the same store (its own agentId on PostgreSQL, its own file on SQLite). */
  fresh() {
    const other = Object.create(Store.prototype);
    other.name = this.name;
    other.dir = this.dir;
    other.agents = this.agents;
    if (this.name === 'sqlite') {
      counter += 1;
      other.path = path.join(this.dir, `other_${counter}.db`);
      other.options = {};
    } else {
      other.path = PG_URI;
      other.options = { agentId: newAgentId() };
    }
    return other;
  }
}

/** The backends of this run: sqlite, and postgres when the server is known. */
function backendNames() {
  const only = process.env.AGENT_STATE_TEST_BACKENDS;
  const names = ['sqlite', 'postgres'];
  return only ? names.filter((n) => only.split(',').includes(n)) : names;
}

/**
 * Declares `name [backend]` for each backend; `fn(t, store)`. `options` go to node:test
 * (timeout, ...). Under CI=true a missing PostgreSQL server fails the postgres variant.
 */
function eachBackend(name, fn, options = {}) {
  for (const backend of backendNames()) {
    const title = `${name} [${backend}]`;
    if (backend === 'postgres' && !PG_URI) {
      if (CI) {
        test(title, () => {
          throw new Error('AGENT_STATE_TEST_PG_URI is not set: under CI=true the PostgreSQL tests must run (tests/pg/with-server.sh starts a server)');
        });
      } else {
        test(title, { skip: 'PostgreSQL: skipped (no server; set AGENT_STATE_TEST_PG_URI)' }, () => {});
      }
      continue;
    }
    test(title, options, async (t) => fn(t, new Store(backend, t)));
  }
}

/** Asserts that `promise` rejects with an error of class `cls` (and `status`), returning it. */
async function rejectsWith(promise, cls, messagePart) {
  let error;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  const assert = require('node:assert/strict');
  assert.ok(error !== undefined, `expected ${cls.name}, but the call succeeded`);
  assert.ok(error instanceof cls, `expected ${cls.name}, got ${error && error.name}: ${error && error.message}`);
  assert.ok(error instanceof agentState.AgentError, `${error.name} is not an AgentError`);
  assert.equal(error.status, cls.status);
  assert.equal(error.code, cls.code);
  if (messagePart !== undefined) {
    assert.ok(String(error.message).includes(messagePart), `message ${JSON.stringify(error.message)} does not contain ${JSON.stringify(messagePart)}`);
  }
  return error;
}

module.exports = { eachBackend, newAgentId, freshDir, rejectsWith, PG_URI, CI, agentState, backendNames };
