// The subscribers of bench/live/run.sh: one Node process holding N watch streams on one agent,
// each through the real JS client (crates/agent-state-serve/client/src/index.js) and keeping its
// own copy.
//
//   node --experimental-websocket subscribers.mjs --url http://HOST:PORT --agent ID
//        --token-file F --n N --ready-file R --out OUT.json [--workers W] [--client PATH]
//
// 1. Opens the N subscribers (in batches of --ramp, each batch waited for: every subscriber has
//    its first snapshot, with a deadline), spread over W worker threads (default: the CPUs, at
//    most N) so that parsing the frames is not bounded by one thread, and one probe subscriber
//    on the main thread (its latency is the server's without the client's backlog). Then it
//    writes the ready file: {"ok":true,"connected":N,"version":V}.
// 2. Waits for SIGUSR2 (run.sh sends it when the writer is done; --max-wait seconds at most).
// 3. Reads GET /v1/agents/{id}, waits (--settle seconds at most) until every subscriber is at
//    that version, then deep-compares every copy and version with it, and writes OUT.json: the
//    deliveries, their latency (receive time minus the patch's `t`, the writer's clock),
//    versions seen out of order, reconnects, close codes, errors.
// Exit 0 when the figures were written (run.sh's report judges them), 3 when the harness failed.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !deepEqual(a[k], b[k])) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// A worker: holds its share of the subscribers.
async function workerMain() {
  const { url, agent, token, ids, ramp, clientUrl, connectDeadline } = workerData;
  const { watch } = await import(clientUrl);
  const Base = globalThis.WebSocket;
  if (typeof Base !== 'function') throw new Error('no global WebSocket: run node with --experimental-websocket');
  let lat = new Float64Array(1 << 16);
  let nLat = 0;
  const record = (ms) => {
    if (nLat === lat.length) {
      const bigger = new Float64Array(lat.length * 2);
      bigger.set(lat);
      lat = bigger;
    }
    lat[nLat++] = ms;
  };
  const subs = [];
  const open = (id) => {
    const s = {
      id, handle: null, state: undefined, version: null, firstVersion: null, snapshots: 0,
      patches: 0, replaces: 0, gaps: 0, skipped: 0, connections: 0, closes: {}, errors: 0,
      errorSamples: [], errorCodes: {}, otherTypes: 0,
    };
    // The client is given a WebSocket that counts its connections and close codes.
    class Counted extends Base {
      constructor(...args) {
        super(...args);
        s.connections++;
        this.addEventListener('close', (e) => { s.closes[e.code] = (s.closes[e.code] || 0) + 1; });
      }
    }
    s.handle = watch(url, agent, {
      token,
      WebSocket: Counted,
      onState(state, version, message) {
        const t = now();
        const type = message && message.type ? message.type : (s.firstVersion === null ? 'snapshot' : 'patch');
        if (type === 'snapshot') {
          if (s.firstVersion === null) s.firstVersion = version;
          else if (version > s.version) s.skipped += version - s.version;
          s.snapshots++;
        } else if (type === 'patch' || type === 'replace') {
          if (s.version === null || version !== s.version + 1) s.gaps++;
          if (type === 'patch') {
            s.patches++;
            const sent = message && message.patch ? message.patch.t : state && state.t;
            if (typeof sent === 'number') record(t - sent);
          } else s.replaces++;
        } else {
          s.otherTypes++;
          return;
        }
        s.state = state;
        s.version = version;
      },
      onError(err) {
        s.errors++;
        const code = (err && err.code) || 'unknown';
        s.errorCodes[code] = (s.errorCodes[code] || 0) + 1;
        if (s.errorSamples.length < 3) s.errorSamples.push(String(err && err.message ? err.message : err));
      },
    });
    subs.push(s);
  };
  const ready = () => subs.reduce((n, s) => n + (s.firstVersion !== null ? 1 : 0), 0);
  const elu0 = performance.eventLoopUtilization();
  let elu1 = null;

  // Opening: batch by batch, each waited for (an accept burst of 1,000 is not what is measured).
  const deadline = Date.now() + connectDeadline * 1000;
  for (let i = 0; i < ids.length; i += ramp) {
    for (const id of ids.slice(i, i + ramp)) open(id);
    while (ready() < subs.length && Date.now() < deadline) await sleep(20);
    if (ready() < subs.length) break;
  }
  const connectTimes = subs.map((s) => s.connections);
  parentPort.postMessage({ kind: 'opened', ready: ready(), opened: subs.length });

  parentPort.on('message', async (msg) => {
    if (msg.cmd === 'start') {
      elu1 = performance.eventLoopUtilization();
    } else if (msg.cmd === 'settle') {
      const stored = JSON.parse(msg.stored);
      const end = Date.now() + msg.seconds * 1000;
      while (subs.some((s) => s.version !== stored.version) && Date.now() < end) await sleep(20);
      const elu = performance.eventLoopUtilization(elu1 || elu0);
      const result = subs.map((s, i) => {
        const h = s.handle || {};
        const copy = h.state !== undefined ? h.state : s.state;
        const hv = h.version !== undefined ? h.version : s.version;
        return {
          id: s.id, first_version: s.firstVersion, version: s.version, handle_version: hv,
          equal: s.version === stored.version && hv === stored.version && deepEqual(copy, stored.state),
          snapshots: s.snapshots, patches: s.patches, replaces: s.replaces, gaps: s.gaps,
          skipped: s.skipped, connections: s.connections,
          reconnects_while_opening: Math.max(0, connectTimes[i] - 1),
          reconnects: Math.max(0, s.connections - 1), closes: s.closes, errors: s.errors,
          error_codes: s.errorCodes,
          error_samples: s.errorSamples, other_types: s.otherTypes,
          connected: h.connected,
        };
      });
      for (const s of subs) { try { s.handle.stop(); } catch { /* counted above */ } }
      const out = lat.slice(0, nLat);
      parentPort.postMessage({ kind: 'result', subs: result, lat: out, elu: elu.utilization },
        [out.buffer]);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The main thread: starts the workers, tells run.sh when all are ready, gathers the figures.
function parseArgs(argv) {
  const a = { workers: 0, ramp: 100, connect: 60, settle: 30, maxWait: 3600,
    client: new URL('../../crates/agent-state-serve/client/src/index.js', import.meta.url).href };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`--${k} needs a value`);
    const key = { 'token-file': 'tokenFile', 'ready-file': 'readyFile', 'max-wait': 'maxWait' }[k] || k;
    a[key] = ['n', 'workers', 'ramp', 'connect', 'settle', 'maxWait'].includes(key) ? Number(v) : v;
  }
  for (const k of ['url', 'agent', 'tokenFile', 'n', 'readyFile', 'out']) {
    if (a[k] === undefined) throw new Error(`missing --${k}`);
  }
  if (!a.client.startsWith('file:')) a.client = new URL(a.client, `file://${process.cwd()}/`).href;
  return a;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.round((p / 100) * (sorted.length - 1))))];
}

async function mainThread() {
  const args = parseArgs(process.argv.slice(2));
  let signalled = false;
  process.on('SIGUSR2', () => { signalled = true; });
  const token = readFileSync(args.tokenFile, 'utf8').trim();
  const nWorkers = Math.max(1, Math.min(args.n, args.workers || availableParallelism()));
  const t0 = now();
  const cpu0 = process.cpuUsage();
  const workers = [];
  const inbox = [];
  let finishing = false;
  for (let w = 0; w < nWorkers; w++) {
    const ids = [];
    for (let i = w; i < args.n; i += nWorkers) ids.push(i);
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { url: args.url, agent: args.agent, token, ids, ramp: Math.max(1, Math.ceil(args.ramp / nWorkers)),
        clientUrl: args.client, connectDeadline: args.connect },
    });
    const box = { queue: [], waiters: [] };
    worker.on('message', (m) => {
      const waiter = box.waiters.shift();
      if (waiter) waiter(m); else box.queue.push(m);
    });
    worker.on('error', (e) => { console.error('subscribers.mjs: worker failed:', e); process.exit(3); });
    worker.on('exit', (code) => {
      if (!finishing) { console.error(`subscribers.mjs: a worker exited (${code})`); process.exit(3); }
    });
    workers.push(worker);
    inbox.push(box);
  }
  const next = (w) => new Promise((r) => {
    const m = inbox[w].queue.shift();
    if (m) r(m); else inbox[w].waiters.push(r);
  });
  const ask = (cmd, extra = {}) => Promise.all(workers.map((wk, w) => { wk.postMessage({ cmd, ...extra }); return next(w); }));

  const opened = await Promise.all(workers.map((_, w) => next(w)));
  const connected = opened.reduce((n, m) => n + m.ready, 0);
  const connectSeconds = (now() - t0) / 1000;
  const headers = { Authorization: `Bearer ${token}` };
  const stateUrl = `${args.url}/v1/agents/${encodeURIComponent(args.agent)}`;
  const fetchStored = async () => {
    const res = await fetch(stateUrl, { headers, signal: AbortSignal.timeout(30000) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET ${stateUrl}: ${res.status} ${text}`);
    return text;
  };
  // The probe: one more subscriber, on the main thread's otherwise idle event loop, so its
  // latency is the server's delivery time without the N subscribers' backlog in the client.
  const { watch } = await import(args.client);
  const probe = { version: null, state: undefined, lat: [], errors: 0, gaps: 0 };
  const probeHandle = watch(args.url, args.agent, {
    token,
    onState(state, version, message) {
      const t = now();
      if (message.type === 'patch' || message.type === 'replace') {
        if (version !== probe.version + 1) probe.gaps++;
        if (message.type === 'patch' && typeof message.patch.t === 'number') probe.lat.push(t - message.patch.t);
      }
      probe.state = state;
      probe.version = version;
    },
    onError() { probe.errors++; },
  });
  const probeDeadline = Date.now() + args.connect * 1000;
  while (probe.version === null && Date.now() < probeDeadline) await sleep(20);
  const ok = connected === args.n && probe.version !== null;
  const readyVersion = ok ? JSON.parse(await fetchStored()).version : null;
  // Written whole, then renamed: run.sh never reads half of it.
  writeFileSync(`${args.readyFile}.tmp`, JSON.stringify({ ok, connected, n: args.n, version: readyVersion, connect_seconds: connectSeconds }) + '\n');
  renameSync(`${args.readyFile}.tmp`, args.readyFile);
  console.error(`subscribers.mjs: ${connected}/${args.n} subscribers have their snapshot after ${connectSeconds.toFixed(2)} s (${nWorkers} worker threads)`);
  if (ok) {
    for (const wk of workers) wk.postMessage({ cmd: 'start' });
    const until = Date.now() + args.maxWait * 1000;
    while (!signalled && Date.now() < until) await sleep(50);
    if (!signalled) console.error('subscribers.mjs: no SIGUSR2 from run.sh within --max-wait; comparing anyway');
  }
  const storedText = await fetchStored();
  const stored = JSON.parse(storedText);
  const settle0 = now();
  const results = await ask('settle', { stored: storedText, seconds: ok ? args.settle : 1 });
  const settleSeconds = (now() - settle0) / 1000;
  const probeEnd = Date.now() + 5000;
  while (probe.version !== stored.version && Date.now() < probeEnd) await sleep(20);
  probeHandle.stop();
  probe.lat.sort((x, y) => x - y);

  const subs = results.flatMap((r) => r.subs).sort((a, b) => a.id - b.id);
  let total = 0;
  for (const r of results) total += r.lat.length;
  const lat = new Float64Array(total);
  let off = 0;
  for (const r of results) { lat.set(r.lat, off); off += r.lat.length; }
  lat.sort();
  const sum = (f) => subs.reduce((n, s) => n + f(s), 0);
  const closes = {};
  const errorCodes = {};
  for (const s of subs) {
    for (const [c, k] of Object.entries(s.closes)) closes[c] = (closes[c] || 0) + k;
    for (const [c, k] of Object.entries(s.error_codes)) errorCodes[c] = (errorCodes[c] || 0) + k;
  }
  // A gap the client caught itself (it reconnects from its version) never reaches onState:
  // its version_gap errors count as gaps too.
  const consecutive = (s) => s.first_version !== null && s.gaps === 0 && s.skipped === 0 &&
    !s.error_codes.version_gap &&
    s.patches + s.replaces === s.version - s.first_version;
  const cpu = process.cpuUsage(cpu0);
  const report = {
    subscribers: args.n,
    workers: nWorkers,
    connected,
    connect_seconds: connectSeconds,
    ready_version: readyVersion,
    stored_version: stored.version,
    settle_seconds: settleSeconds,
    deliveries: sum((s) => s.patches + s.replaces),
    latency_samples: total,
    latency_ms: {
      p50: percentile(lat, 50), p90: percentile(lat, 90), p99: percentile(lat, 99),
      max: total ? lat[total - 1] : null, min: total ? lat[0] : null,
      mean: total ? lat.reduce((a, b) => a + b, 0) / total : null,
    },
    copies_equal: subs.filter((s) => s.equal).length,
    versions_consecutive: subs.filter(consecutive).length,
    at_stored_version: subs.filter((s) => s.version === stored.version).length,
    gaps: sum((s) => s.gaps + (s.error_codes.version_gap || 0)),
    skipped_versions: sum((s) => s.skipped),
    extra_snapshots: sum((s) => Math.max(0, s.snapshots - 1)),
    reconnects: sum((s) => s.reconnects),
    reconnects_while_opening: sum((s) => s.reconnects_while_opening),
    close_codes: closes,
    errors: sum((s) => s.errors),
    error_codes: errorCodes,
    error_samples: [...new Set(subs.flatMap((s) => s.error_samples))].slice(0, 5),
    never_connected: subs.filter((s) => s.first_version === null).map((s) => s.id).slice(0, 20),
    event_loop_utilization: results.map((r) => r.elu),
    client_cpu_seconds: (cpu.user + cpu.system) / 1e6,
    client_seconds: (now() - t0) / 1000,
    probe: {
      deliveries: probe.lat.length, errors: probe.errors, gaps: probe.gaps,
      equal: probe.version === stored.version && deepEqual(probe.state, stored.state),
      latency_ms: { p50: percentile(probe.lat, 50), p99: percentile(probe.lat, 99),
        max: probe.lat.length ? probe.lat[probe.lat.length - 1] : null },
    },
    bad: subs.filter((s) => !s.equal || !consecutive(s)).slice(0, 5),
  };
  writeFileSync(args.out, JSON.stringify(report, null, 2) + '\n');
  finishing = true;
  await Promise.all(workers.map((w) => w.terminate()));
  process.exit(0);
}

if (isMainThread) {
  mainThread().catch((e) => { console.error('subscribers.mjs:', e && e.stack ? e.stack : e); process.exit(3); });
} else {
  // Rethrown outside the promise: the main thread sees the worker fail ('error', then 'exit').
  workerMain().catch((e) => { setImmediate(() => { throw e; }); });
}
