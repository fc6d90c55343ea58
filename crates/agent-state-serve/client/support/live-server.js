// What the live tests (test/*.test.js) share: the agent-state CLI, a temporary store with a
// token file, a real `agent-state serve` child process, and polling for a condition. Kept out
// of test/, where `node --test test/` would run it as one more test file.
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";

const HERE = dirname(fileURLToPath(import.meta.url));
// run-tests.sh passes the binary it built; by default the checkout's release build.
export const CLI = process.env.AGENT_STATE_CLI ?? resolve(HERE, "../../../../target/release/agent-state");
export const CLIENT = resolve(HERE, "../src/index.js");

// Generous: the machine running the suite may be loaded (2 cores, other builds).
export const DEADLINE_MS = 20000;

/** Runs the CLI with `args`; resolves to its standard output, rejects on a non-zero exit. */
export function cli(...args) {
  return new Promise((resolveRun, reject) => {
    execFile(CLI, args, { timeout: 60000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`agent-state ${args.join(" ")}: ${error.message}\n${stderr}`));
      else resolveRun(stdout);
    });
  });
}

/** Writes an agent's first state, switching its change log on (the log is kept per agent). */
export async function createAgent(store, agentId, state) {
  await cli("--agent", agentId, "set", "--change-log", '{"keep_last":1000}', store.db, JSON.stringify(state));
}

export async function setPatch(store, agentId, patch) {
  await cli("--agent", agentId, "set", store.db, JSON.stringify(patch));
}

/** Applies an RFC 6902 JSON Patch (`agent-state patch`). */
export async function patchOps(store, agentId, ops) {
  await cli("--agent", agentId, "patch", store.db, JSON.stringify(ops));
}

/** GET {url}/v1/agents/{id}/state?version=V with the token: `{version, state}`. */
export async function getStateAt(server, store, agentId, version) {
  const response = await fetch(`${server.url}/v1/agents/${encodeURIComponent(agentId)}/state?version=${version}`, {
    headers: { Authorization: `Bearer ${store.token}` },
  });
  if (response.status !== 200) throw new Error(`GET state ${agentId}@${version}: ${response.status} ${await response.text()}`);
  return response.json();
}

export async function replaceState(store, agentId, state) {
  await cli("--agent", agentId, "replace", store.db, JSON.stringify(state));
}

/** A temporary directory with a store path and a token file; `remove()` deletes it. */
export async function makeStore(token = randomBytes(16).toString("hex")) {
  const dir = await mkdtemp(join(tmpdir(), "agent-state-js-"));
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, `${token}\n`, { mode: 0o600 }); // private, as serve requires
  return { dir, db: join(dir, "store.db"), tokenFile, token, remove: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * Starts `agent-state serve` on the store (port 0: a free one; `flags` added to its command
 * line) and resolves once it prints its address. Restarting on a port just freed may briefly fail to bind: retried until the deadline.
 */
export async function startServer(store, port = 0, flags = []) {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    try {
      return await startOnce(store, port, flags);
    } catch (error) {
      if (port === 0 || Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100)); // the pause between bind attempts only
    }
  }
}

function startOnce(store, port, flags) {
  const child = spawn(CLI, ["serve", store.db, "--listen", `127.0.0.1:${port}`, "--token-file", store.tokenFile, ...flags], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`agent-state serve printed no address within ${DEADLINE_MS} ms\n${stderr}`));
    }, DEADLINE_MS);
    const lines = createInterface({ input: child.stdout });
    lines.on("line", (line) => {
      const match = /listening on (http:\/\/([^\s:]+):(\d+))/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      lines.removeAllListeners("line");
      child.stdout.resume(); // keep draining, so the server never blocks on a full pipe
      resolveStart({
        url: match[1],
        port: Number(match[3]),
        process: child,
        exited,
        /** SIGTERM, then waits for the exit (SIGKILL if it does not come). */
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return exited;
          child.kill("SIGTERM");
          const late = setTimeout(() => child.kill("SIGKILL"), DEADLINE_MS);
          const result = await exited;
          clearTimeout(late);
          return result;
        },
      });
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`agent-state serve exited (${code ?? signal}) before listening\n${stderr}`));
    });
  });
}

/** GET {url}/v1/agents/{id} with the token: `{version, state}`. */
export async function getAgent(server, store, agentId) {
  const response = await fetch(`${server.url}/v1/agents/${encodeURIComponent(agentId)}`, {
    headers: { Authorization: `Bearer ${store.token}` },
  });
  if (response.status !== 200) throw new Error(`GET agent ${agentId}: ${response.status} ${await response.text()}`);
  return response.json();
}

/** Polls `condition` (sync or async) every 20 ms until it is truthy or the deadline passes. */
export async function until(condition, what, timeoutMs = DEADLINE_MS) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The options of a watch that records everything it is told. */
export function recorder() {
  const seen = { messages: [], errors: [], states: [] };
  seen.options = {
    onState(state, version, message) {
      seen.states.push({ state, version });
      seen.messages.push(message);
    },
    onError(error) {
      seen.errors.push(error);
    },
  };
  return seen;
}

/** Every state-changing version after the first is the previous one plus one. */
export function assertConsecutive(assert, messages) {
  for (let i = 1; i < messages.length; i++) {
    if (messages[i].type === "snapshot") continue;
    assert.equal(messages[i].version, messages[i - 1].version + 1, `message ${i} (${messages[i].type})`);
  }
}
