'use strict';
// Starts a child process of the tests (children/child.js) and talks to it by lines: `next()`
// resolves to the child's next line of stdout, `send(line)` writes a line to its stdin. No
// sleeps: every step waits for the child's message. `env`: variables added to the child's
// environment (this process's own are passed on too).

const { spawn } = require('node:child_process');
const path = require('node:path');

const CHILD = path.join(__dirname, 'children', 'child.js');

function startChild(role, args, store, extraOptions = {}, nodeFlags = [], env = {}) {
  const child = spawn(process.execPath, [...nodeFlags, CHILD, role, ...args.map(String)], {
    env: {
      ...process.env,
      ...env,
      AGENT_STATE_NODE_CHILD: '1',
      AGENT_STATE_CHILD_PATH: store.path,
      AGENT_STATE_CHILD_OPTIONS: JSON.stringify({ ...extraOptions, ...store.options }),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = [];
  const waiting = [];
  let buffered = '';
  let ended = false;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (waiting.length > 0) waiting.shift().resolve(line);
      else lines.push(line);
    }
  });
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      ended = true;
      for (const w of waiting.splice(0)) w.reject(new Error(`the child (${role}) ended (${code ?? signal}) before its next line`));
      resolve({ code, signal });
    });
  });
  child.stdin.on('error', () => {}); // a child that ended: its pipe is closed
  return {
    process: child,
    exited,
    /** The child's next line. */
    next() {
      if (lines.length > 0) return Promise.resolve(lines.shift());
      if (ended) return Promise.reject(new Error(`the child (${role}) has ended`));
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
    /** Waits for the line `want`, failing on any other. */
    async expect(want) {
      const line = await this.next();
      if (line !== want) throw new Error(`the child (${role}) said ${JSON.stringify(line)}, expected ${JSON.stringify(want)}`);
    },
    send(line) {
      child.stdin.write(`${line}\n`);
    },
    kill(signal = 'SIGKILL') {
      if (!ended) child.kill(signal);
      return exited;
    },
  };
}

module.exports = { startChild };
