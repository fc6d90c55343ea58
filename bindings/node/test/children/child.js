'use strict';
// The child processes of the tests (started by children.js with AGENT_STATE_NODE_CHILD=1; when
// the test runner runs this file as a test file, it does nothing). The role is argv[2]; the
// store is AGENT_STATE_CHILD_PATH with the open options AGENT_STATE_CHILD_OPTIONS (JSON). Lines
// on stdout are its messages to the test; lines on stdin the test's to it.
//
// - hold [busyMs]: writes {holder: true} with a validator that, inside the write's transaction
//   (so holding the store's write lock, or on PostgreSQL the agent's row), says "holding" and
//   then either waits for the test's "release" line on stdin, or busy-waits busyMs
//   milliseconds; says "committed" after the commit.
// - writer: writes {k<i>: i} for i = 0, 1, ... and says "ack <i>" after each write resolved,
//   until killed.
// - gc: opens agents and leaves them unclosed, collects them, says how many of its file
//   descriptors name the store file before, while open and after (needs --expose-gc).
// - exit: opens an agent with a hook and a validator, writes, leaves it open and returns.
// - crowd n: starts n writes {c<i>: i} at once and says "waiting" (they wait for a lock another
//   process holds); then reads a file with fs.promises.readFile and derives a key with
//   crypto.pbkdf2, both users of libuv's thread pool, and says "pool <bytes read> <key bytes>"
//   when both finished; says "written <n>" when the n writes resolved, each with its own key
//   in the state it returned.
if (process.env.AGENT_STATE_NODE_CHILD !== '1') return;

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const agentState = require(path.join(__dirname, '..', '..'));

const storePath = process.env.AGENT_STATE_CHILD_PATH;
const options = JSON.parse(process.env.AGENT_STATE_CHILD_OPTIONS || '{}');

function say(line) {
  fs.writeSync(1, `${line}\n`);
}

// Blocks this thread until a whole line arrives on stdin.
function readLineSync() {
  const buf = Buffer.alloc(1);
  let line = '';
  for (;;) {
    let n;
    try {
      n = fs.readSync(0, buf, 0, 1, null);
    } catch (error) {
      if (error.code === 'EAGAIN') continue;
      throw error;
    }
    if (n === 0) return line;
    const c = buf.toString();
    if (c === '\n') return line;
    line += c;
  }
}

async function hold(busyMs) {
  const agent = await agentState.openAgent(storePath, options);
  await agent.setState({ ready: true });
  agent.setValidator((next) => {
    if (!next.holder) return undefined;
    say('holding');
    if (busyMs > 0) {
      const end = Date.now() + busyMs;
      while (Date.now() < end) {
        // busy: the JavaScript thread of this process is inside the write's transaction
      }
    } else {
      const line = readLineSync();
      if (line !== 'release') throw new Error(`unexpected line ${line}`);
    }
    return undefined;
  });
  // Under a signal, a PostgreSQL write takes the row's lock before its transaction's work, so
  // the lock is held while the validator runs.
  await agent.setState({ holder: true }, { signal: new AbortController().signal });
  say('committed');
  await agent.close();
}

async function writer() {
  const agent = await agentState.openAgent(storePath, options);
  for (let i = 0; ; i++) {
    await agent.setState({ [`k${i}`]: i });
    say(`ack ${i}`);
  }
}

function fdsOn(file) {
  let n = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      if (target === file || target.startsWith(`${file}-`)) n += 1;
    } catch {
      // closed while listing
    }
  }
  return n;
}

async function collect(file) {
  for (let i = 0; i < 200 && fdsOn(file) > 0; i++) {
    global.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return fdsOn(file);
}

async function gcRole() {
  const file = fs.realpathSync(path.dirname(storePath)) + path.sep + path.basename(storePath);
  const before = fdsOn(file);
  const kinds = {};
  // A connection SQLite keeps open holds back the closed ones' descriptors on the same file, so
  // the kind most likely to stay open comes last.
  for (const kind of ['plain', 'hook', 'subclass', 'validator', 'self-validator']) {
    await (async () => {
      let agent;
      if (kind === 'plain') agent = await agentState.openAgent(storePath, options);
      if (kind === 'hook') agent = await agentState.openAgent(storePath, { ...options, onStateChanged: () => agent.isOpen });
      if (kind === 'validator') {
        agent = await agentState.openAgent(storePath, { ...options, validator: (next) => (next.no ? false : undefined) });
      }
      if (kind === 'self-validator') {
        // A validator that refers to its own agent.
        agent = await agentState.openAgent(storePath, options);
        agent.setValidator((next) => (agent.isOpen ? undefined : false));
      }
      if (kind === 'subclass') {
        class Watched extends agentState.Agent {
          async onStateChanged() {}
        }
        agent = await Watched.open(storePath, options);
      }
      await agent.setState({ [kind]: true });
      await agent.getState();
      kinds[kind] = { open: fdsOn(file) };
    })();
    kinds[kind].collected = await collect(file);
  }
  say(JSON.stringify({ before, kinds }));
}

async function exitRole() {
  const agent = await agentState.openAgent(storePath, { ...options, onStateChanged: () => {} });
  agent.setValidator(() => undefined);
  await agent.setState({ left: 'open' });
  say('written');
}

async function crowd(n) {
  const agent = await agentState.openAgent(storePath, options);
  const writes = Array.from({ length: n }, (_, i) => agent.setState({ [`c${i}`]: i }));
  say('waiting');
  const [text, key] = await Promise.all([
    fs.promises.readFile(__filename),
    new Promise((resolve, reject) => {
      crypto.pbkdf2('secret', 'salt', 1000, 32, 'sha256', (error, derived) => (error ? reject(error) : resolve(derived)));
    }),
  ]);
  say(`pool ${text.length} ${key.length}`);
  const states = await Promise.all(writes);
  const own = states.filter((state, i) => state[`c${i}`] === i).length;
  say(`written ${own}`);
  await agent.close();
}

const roles = {
  hold: () => hold(Number(process.argv[3] || 0)),
  writer,
  gc: gcRole,
  exit: exitRole,
  crowd: () => crowd(Number(process.argv[3])),
};
roles[process.argv[2]]().catch((error) => {
  say(`error ${error.name}: ${error.message}`);
  process.exit(1);
});
