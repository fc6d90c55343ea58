"""Benchmark of the Python binding against the standard-library code a user would write instead.

``make bench`` runs it (through bench.sh). Both sides do the same job at each state size:
``set_state`` merges a two-member patch and returns the merged state as a dict; ``get_state``
returns the state as a dict. The hand-rolled side is sqlite3 + json + an RFC 7396 merge
function, in a ``BEGIN IMMEDIATE`` transaction, on its own file in the same directory, with the
same pragmas (WAL, synchronous=NORMAL). The contenders run in alternating rounds; each figure
is the median of its rounds.

The async binding's targets ("Never block an event loop") add two parts, in the same run:

* The asyncio wrapper's cost per call at 1 KiB on SQLite: ``await AsyncAgent.set_state(patch)``
  against ``Agent.set_state(patch)``, and likewise ``get_state``, each on its own file with the
  same options (target: at most 1.3x the sync call). Two references run in the same
  alternating rounds: the floor of the mechanism, ``await loop.run_in_executor(pool, noop)`` on
  a thread pool of the same default size as AsyncAgent's (the share of the async overhead that
  is the thread handoff itself), and the sync call offloaded by hand, ``await
  loop.run_in_executor(pool, agent.set_state, patch)`` (what AsyncAgent's own layer, its cancel
  token and shielding, adds on top). The async calls are awaited one after another by one
  coroutine, on one event loop made for the bench.
* Throughput on PostgreSQL (the server at ``AGENT_STATE_TEST_PG_URI``; bench/run.sh runs this
  script under tests/pg/with-server.sh): 100 coroutines on one event loop, each with its own
  AsyncAgent on its own agent_id (100 agents of one store, a 1 KiB state each), against 100
  threads, each with its own sync Agent on the same 100 agent_ids; writes of a two-member patch,
  then reads. All handles share the process's one connection pool to the server (its default
  size); the coroutines share AsyncAgent's bounded worker pool. Each round, every worker does
  the same number of calls; the figure is total calls per second from the start to the last
  one's end, median of alternating rounds. Without a server, these rows say they were skipped.
  Its 100 agents (``pybench_<pid>_<time>_<n>``) stay on the server (the binding has no way to
  drop an agent, and the venv no SQL client): a server of your own keeps 100 small rows a run.
"""

import argparse
import asyncio
import concurrent.futures
import ctypes
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time

from agent_state import Agent, AsyncAgent
from agent_state import _native
from agent_state.codec import encode_state

# The test suite's loop-lag monitor and lock holder, shared with the async tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests"))
from lock_holder import Holder  # noqa: E402
from loop_lag import LoopLag  # noqa: E402

#: The async binding's target: an awaited AsyncAgent call costs at most this many sync calls.
ASYNC_TARGET = 1.3
#: The async binding's throughput target on PostgreSQL: coroutines / threads at least this.
THROUGHPUT_TARGET = 1.5
#: The async binding's throughput case: this many coroutines against this many threads.
WORKERS = 100
#: The write-cost target for Python: the binding's own cost per call at 1 KiB (the Python call
#: minus the bare C call, see binding_overhead) before the work on it, in seconds: the medians
#: of three runs of this script's overhead part (`python bench.py --only overhead`, with the
#: package of commit 9fb4fc5, i.e. `git archive 9fb4fc5 bindings/python/src`, on PYTHONPATH) on
#: 2026-12-01, on this project's 2-core VM (set_state 18.5 / 11.2 / 12.1 µs, get_state 7.3 /
#: 6.5 / 6.7 µs). The target is at most half of it.
OVERHEAD_BASELINE_S = {"set_state": 12.1e-6, "get_state": 6.7e-6}


def make_state(size):
    """A state of about ``size`` bytes, the same shape as the C ABI benchmark's."""
    parts = ['{"status":"idle"']
    length = len(parts[0])
    i = 0
    while length + 260 < size or i < 2:
        part = (
            ',"m%d":{"id":%d,"name":"member %d","tags":["alpha","beta"],"score":0.5,"text":"%s"}'
            % (i, i, i, "x" * 150)
        )
        parts.append(part)
        length += len(part)
        i += 1
    parts.append("}")
    return json.loads("".join(parts))


def merge_patch(target, patch):
    """RFC 7396, as a user would write it."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


class HandRolled:
    """One JSON blob in a plain SQLite table."""

    def __init__(self, path, state):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self.db.execute(
            "INSERT INTO kv VALUES ('state', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
            (json.dumps(state, separators=(",", ":")),),
        )

    def set_state(self, patch):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            (raw,) = self.db.execute("SELECT v FROM kv WHERE k = 'state'").fetchone()
            state = merge_patch(json.loads(raw), patch)
            self.db.execute(
                "UPDATE kv SET v = ? WHERE k = 'state'",
                (json.dumps(state, separators=(",", ":")),),
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return state

    def get_state(self):
        (raw,) = self.db.execute("SELECT v FROM kv WHERE k = 'state'").fetchone()
        return json.loads(raw)


def race(contenders, rounds, ops):
    """Median seconds per operation of each contender, run in alternating rounds."""
    samples = [[] for _ in contenders]
    counter = 0
    for f in contenders:
        f(0)
    for r in range(rounds):
        for k in range(len(contenders)):
            c = (r + k) % len(contenders)
            start = time.perf_counter()
            for _ in range(ops):
                counter += 1
                contenders[c](counter)
            samples[c].append((time.perf_counter() - start) / ops)
    return [statistics.median(s) for s in samples]


def alternate(contenders, rounds):
    """Median figure of each contender, run in alternating rounds (one warm-up round first);
    a contender is a function that runs one round and returns its figure."""
    samples = [[] for _ in contenders]
    for f in contenders:
        f()
    for r in range(rounds):
        for k in range(len(contenders)):
            c = (r + k) % len(contenders)
            samples[c].append(contenders[c]())
    return [statistics.median(s) for s in samples]


def _noop():
    return None


def async_per_call(work, rounds, ops):
    """The async binding, first part: seconds per call at 1 KiB on SQLite, in alternating rounds, of
    the sync call, the awaited AsyncAgent call, the same sync call offloaded by hand with
    ``loop.run_in_executor`` (a reference), and the executor floor (``run_in_executor`` of a
    no-op). Each agent has its own file, with the same options."""
    size = 1024
    state = make_state(size)
    patches = [
        {"status": "s%d" % i, "m1": {"id": i, "score": (i % 7) + 0.25}} for i in range(64)
    ]
    loop = asyncio.new_event_loop()
    # The default size, as AsyncAgent's own pool: min(32, os.cpu_count() + 4).
    pool = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="bench-floor")

    def open_sync(name):
        return Agent(os.path.join(work, name), synchronous="normal", initial_state=state)

    sync, offload = open_sync("sync_1.db"), open_sync("offload_1.db")
    aagent = AsyncAgent(
        os.path.join(work, "async_1.db"), synchronous="normal", initial_state=state
    )

    def sync_round(write):
        def run():
            start = time.perf_counter()
            if write:
                for i in range(ops):
                    sync.set_state(patches[i & 63])
            else:
                for _ in range(ops):
                    sync.get_state()
            return (time.perf_counter() - start) / ops

        return run

    def async_round(write):
        async def timed():
            start = time.perf_counter()
            if write:
                for i in range(ops):
                    await aagent.set_state(patches[i & 63])
            else:
                for _ in range(ops):
                    await aagent.get_state()
            return (time.perf_counter() - start) / ops

        return lambda: loop.run_until_complete(timed())

    def hot_round():
        async def timed():
            # A sync read on the loop's thread leaves its validated copy of the state: the
            # awaited reads then complete at once, without a hand-off.
            aagent.sync.get_state()
            start = time.perf_counter()
            for _ in range(ops):
                await aagent.get_state()
            return (time.perf_counter() - start) / ops

        return lambda: loop.run_until_complete(timed())

    def offload_round(write):
        async def timed():
            start = time.perf_counter()
            if write:
                for i in range(ops):
                    await loop.run_in_executor(pool, offload.set_state, patches[i & 63])
            else:
                for _ in range(ops):
                    await loop.run_in_executor(pool, offload.get_state)
            return (time.perf_counter() - start) / ops

        return lambda: loop.run_until_complete(timed())

    async def floor_round():
        start = time.perf_counter()
        for _ in range(ops):
            await loop.run_in_executor(pool, _noop)
        return (time.perf_counter() - start) / ops

    try:
        figures = alternate(
            [
                sync_round(True),
                async_round(True),
                offload_round(True),
                sync_round(False),
                async_round(False),
                offload_round(False),
                lambda: loop.run_until_complete(floor_round()),
                hot_round(),
            ],
            rounds,
        )
    finally:
        sync.close()
        offload.close()
        loop.run_until_complete(aagent.aclose())
        pool.shutdown()
        loop.close()
    floor_s = figures[6]
    hot_s = figures[7]
    rows = []
    for op, (sync_s, async_s, offload_s) in (
        ("set_state", figures[0:3]),
        ("get_state", figures[3:6]),
    ):
        ratio = async_s / sync_s
        rows.append(
            {
                "target_group": "async",
                "kind": "async_per_call",
                "op": op,
                "size": size,
                "where": "SQLite, disk, normal",
                "calls_per_round": ops,
                "sync_s": sync_s,
                "async_s": async_s,
                "offload_s": offload_s,
                "floor_s": floor_s,
                "hot_s": hot_s if op == "get_state" else None,
                "ratio": ratio,
                "target_max": ASYNC_TARGET,
                "verdict": "PASS" if ratio <= ASYNC_TARGET else "MISS",
            }
        )
    return rows


#: The loop-lag cases: a 1 ms ticker's largest gap (tests/loop_lag.py) must stay at most this long.
LOOP_LAG_TARGET_S = 0.010
#: gather-1000: this many agents (a file each) x this many writes each, all started at once.
GATHER_AGENTS, GATHER_WRITES = 50, 20
#: How long the lock is held while one call waits for it (the "one waiting call" case).
HOLD_S = 1.0


def loop_lag(work, rounds, hold_s):
    """The loop-lag cases, on one event loop, SQLite (disk, synchronous normal), 1 KiB states:
    the largest gap of a 1 ms ticker (LoopLag) while ``asyncio.gather`` awaits 1,000
    ``set_state`` calls (50 agents x 20), while it awaits 200 calls on one agent, and while one
    ``set_state`` waits ``hold_s`` seconds for the store's lock, which another handle's write
    holds (lock_holder.Holder: its validator waits on an event). Each figure is the median of
    ``rounds`` rounds; the worst round is kept too."""
    state = make_state(1024)
    loop = asyncio.new_event_loop()
    agents = [
        AsyncAgent(os.path.join(work, "lag_%d.db" % n), synchronous="normal", initial_state=state,
                   busy_timeout_ms=60_000)
        for n in range(GATHER_AGENTS)
    ]
    twin = Agent(os.path.join(work, "lag_0.db"), synchronous="normal", initial_state=state,
                 busy_timeout_ms=60_000)

    def patch(w, i):
        return {"status": "w%d-%d" % (w, i), "m1": {"score": (i % 7) + 0.25}}

    async def gathered(pairs):
        async with LoopLag() as lag:
            start = time.perf_counter()
            await asyncio.gather(*(agents[w].set_state(patch(w, i)) for w, i in pairs))
            took = time.perf_counter() - start
        return lag.largest, took

    def gather_1000():
        return loop.run_until_complete(
            gathered([(w, i) for i in range(GATHER_WRITES) for w in range(GATHER_AGENTS)])
        )

    def one_agent_200():
        return loop.run_until_complete(gathered([(0, i) for i in range(200)]))

    def one_waiting():
        twin.set_state({"holder": None})  # the holder's write must change the state

        async def waiting():
            holder = Holder(twin)
            try:
                async with LoopLag() as lag:
                    start = time.perf_counter()
                    write = asyncio.ensure_future(agents[0].set_state({"waiting": True}))
                    await asyncio.sleep(hold_s)
                    assert not write.done(), "the write did not wait for the lock"
                    await loop.run_in_executor(None, holder.release)
                    await write
                    took = time.perf_counter() - start
            finally:
                holder.release()
            return lag.largest, took

        return loop.run_until_complete(waiting())

    async def floor():
        async with LoopLag() as lag:
            start = time.perf_counter()
            await asyncio.gather(*(asyncio.sleep(0) for _ in range(1000)))
            took = time.perf_counter() - start
        return lag.largest, took

    cases = [
        ("gather-1000", "asyncio.gather of 1,000 set_state (50 agents x 20)", 1000, gather_1000),
        ("gather-1000-floor", "reference: asyncio.gather of 1,000 `asyncio.sleep(0)` (asyncio's own "
         "cost for as many tasks)", 1000, lambda: loop.run_until_complete(floor())),
        ("one-agent-200", "asyncio.gather of 200 set_state on one agent", 200, one_agent_200),
        ("one-waiting", "one set_state waiting %g s for a lock another handle holds" % hold_s, 1,
         one_waiting),
    ]
    rows = []
    try:
        for case, what, calls, run in cases:
            run()  # warm-up
            samples = [run() for _ in range(rounds)]
            gaps = [g for g, _ in samples]
            gap = statistics.median(gaps)
            rows.append(
                {
                    "target_group": "async",
                    "kind": "loop_lag",
                    "case": case,
                    "what": what,
                    "size": 1024,
                    "where": "SQLite, disk, normal",
                    "calls": calls,
                    "rounds": rounds,
                    "gap_s": gap,
                    "worst_gap_s": max(gaps),
                    "elapsed_s": statistics.median([t for _, t in samples]),
                    "target_max_s": None if case.endswith("floor") else LOOP_LAG_TARGET_S,
                    "verdict": "" if case.endswith("floor") else ("PASS" if gap <= LOOP_LAG_TARGET_S else "MISS"),
                }
            )
    finally:
        twin.close()
        for a in agents:
            loop.run_until_complete(a.aclose())
        loop.close()
    return rows


def pg_throughput(uri, rounds, calls):
    """The async binding, second part: calls per second of WORKERS coroutines (an AsyncAgent each)
    against WORKERS threads (a sync Agent each) on the same WORKERS agents of the server at
    ``uri``, for writes then reads, in alternating rounds."""
    prefix = "pybench_%d_%x_" % (os.getpid(), int(time.time()))
    ids = [prefix + str(n) for n in range(WORKERS)]
    state = make_state(1024)
    loop = asyncio.new_event_loop()
    aagents, agents = [], []
    try:
        for agent_id in ids:
            aagents.append(AsyncAgent(uri, agent_id=agent_id, initial_state=state))
            agents.append(Agent(uri, agent_id=agent_id, initial_state=state))

        def patch(w, i):
            return {"status": "w%d-%d" % (w, i), "m1": {"score": (i % 7) + 0.25}}

        def coroutines(write):
            async def one(w, a):
                if write:
                    for i in range(calls):
                        await a.set_state(patch(w, i))
                else:
                    for _ in range(calls):
                        await a.get_state()

            async def all_of_them():
                start = time.perf_counter()
                await asyncio.gather(*(one(w, a) for w, a in enumerate(aagents)))
                return WORKERS * calls / (time.perf_counter() - start)

            return loop.run_until_complete(all_of_them())

        def threads(write):
            go = threading.Barrier(WORKERS + 1)
            errors = []

            def one(w, a):
                go.wait()
                try:
                    if write:
                        for i in range(calls):
                            a.set_state(patch(w, i))
                    else:
                        for _ in range(calls):
                            a.get_state()
                except BaseException as e:  # reported once all have ended
                    errors.append(e)

            pool = [threading.Thread(target=one, args=(w, a)) for w, a in enumerate(agents)]
            for t in pool:
                t.start()
            go.wait()  # every thread started and waiting: the clock starts with their calls
            start = time.perf_counter()
            for t in pool:
                t.join()
            elapsed = time.perf_counter() - start
            if errors:
                raise errors[0]
            return WORKERS * calls / elapsed

        figures = {}
        for op, write in (("set_state", True), ("get_state", False)):
            figures[op] = alternate(
                [lambda w=write: coroutines(w), lambda w=write: threads(w)], rounds
            )
    finally:
        for a in agents:
            a.close()
        for a in aagents:
            loop.run_until_complete(a.aclose())
        loop.close()
    rows = []
    for op, (coro_ops, thread_ops) in figures.items():
        rows.append(
            {
                "target_group": "async",
                "kind": "pg_throughput",
                "op": op,
                "size": 1024,
                "where": "PostgreSQL, synchronous full (default), %d agents of one store" % WORKERS,
                "workers": WORKERS,
                "calls_per_worker": calls,
                "async_ops_s": coro_ops,
                "threads_ops_s": thread_ops,
                "ratio": coro_ops / thread_ops,
                "target_min": THROUGHPUT_TARGET,
                "verdict": "PASS" if coro_ops / thread_ops >= THROUGHPUT_TARGET else "MISS",
            }
        )
    return rows


def writes_at_the_floor(smoke):
    """Figure 10 of "Writes at the floor": set_state at least 1.5x / 3x faster than the
    hand-rolled read-merge-write at 1 / 16 KiB; the other rows are information."""
    rounds = 3 if smoke else 11
    targets = {1024: 1.5, 16 * 1024: 3.0}
    rows = []
    with tempfile.TemporaryDirectory(prefix="agent_state_py_bench_") as work:
        for size in (1024, 16 * 1024, 256 * 1024):
            state = make_state(size)
            patches = [
                {"status": "s%d" % i, "m1": {"id": i, "score": (i % 7) + 0.25}} for i in range(64)
            ]
            ops = 10 if smoke else max(10, 2_000_000 // (size * 4 + 20_000))
            with Agent(
                os.path.join(work, "ours_%d.db" % size),
                synchronous="normal",
                max_value_bytes=4 << 20,
            ) as agent:
                agent.replace_state(state)
                hand = HandRolled(os.path.join(work, "hand_%d.db" % size), state)
                ours_set, hand_set = race(
                    [
                        lambda i: agent.set_state(patches[i % 64]),
                        lambda i: hand.set_state(patches[i % 64]),
                    ],
                    rounds,
                    ops,
                )
                ours_get, hand_get = race(
                    [lambda i: agent.get_state(), lambda i: hand.get_state()], rounds, ops
                )
                hand.db.close()
            for op, ours, alt, target in (
                ("set_state", ours_set, hand_set, targets.get(size)),
                ("get_state", ours_get, hand_get, None),
            ):
                ratio = alt / ours
                verdict = "" if target is None else ("PASS" if ratio >= target else "MISS")
                rows.append(
                    {
                        "fig": "10" if target is not None else "",
                        "op": op,
                        "size": size,
                        "ours_s": ours,
                        "hand_rolled_s": alt,
                        "ratio": ratio,
                        "target": target,
                        "verdict": verdict,
                    }
                )
    print(
        "| fig. | Python operation | state | agent_state (µs) | sqlite3+json+merge (µs) | ratio | target | |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| %s | %s | %d KiB | %.1f | %.1f | %.2f× | %s | %s |"
            % (
                r["fig"],
                r["op"],
                r["size"] // 1024,
                r["ours_s"] * 1e6,
                r["hand_rolled_s"] * 1e6,
                r["ratio"],
                "≥ %g×" % r["target"] if r["target"] else "",
                r["verdict"],
            )
        )
    return rows


class _Buffer(ctypes.Structure):
    """``struct AgentBuffer`` of agent_state.h, declared here: the bare calls use nothing of the
    binding but the library's path and the agent's handle."""

    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t), ("owner", ctypes.c_void_p)]


class BareCalls:
    """The C calls that ``Agent.set_state`` / ``get_state`` make, on the same handle, through
    ctypes function objects of this script's own (argtypes and restype declared once, one output
    buffer passed by a reference made once), on the library the package loaded (opened again:
    the same one in memory). The patch is encoded beforehand; the output is freed, never read."""

    def __init__(self, agent):
        lib = ctypes.CDLL(_native.library_path())
        buf_p = ctypes.POINTER(_Buffer)
        self._set = lib.agent_set_state
        self._set.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, buf_p]
        self._set.restype = ctypes.c_int32
        self._get = lib.agent_get_state
        self._get.argtypes = [ctypes.c_uint64, buf_p]
        self._get.restype = ctypes.c_int32
        self._free = lib.agent_buffer_free
        self._free.argtypes = [buf_p]
        self._free.restype = None
        self._handle = agent._handle
        self._buf = _Buffer()
        self._out = ctypes.byref(self._buf)

    def set_state(self, data):
        if self._set(self._handle, data, len(data), self._out):
            raise RuntimeError("agent_set_state failed")
        self._free(self._out)

    def get_state(self):
        if self._get(self._handle, self._out):
            raise RuntimeError("agent_get_state failed")
        self._free(self._out)


def binding_overhead(smoke):
    """The write-cost target for Python: the binding's own cost, ``Agent.set_state(patch)`` and
    ``Agent.get_state()`` against the bare C calls they make (:class:`BareCalls`: the same patch
    bytes, the same agent), in alternating rounds; the overhead is the difference of the
    medians. Target at 1 KiB: at most half of OVERHEAD_BASELINE_S; 16 KiB is information."""
    rounds = 3 if smoke else 21
    rows = []
    with tempfile.TemporaryDirectory(prefix="agent_state_py_bench_overhead_") as work:
        for size in (1024, 16 * 1024):
            state = make_state(size)
            patches = [
                {"status": "s%d" % i, "m1": {"id": i, "score": (i % 7) + 0.25}} for i in range(64)
            ]
            datas = [encode_state(p, "patch") for p in patches]
            set_ops = 10 if smoke else max(20, 800_000 // (size + 20_000))
            get_ops = 10 if smoke else max(20, 8_000_000 // (size * 4 + 20_000))
            with Agent(
                os.path.join(work, "overhead_%d.db" % size), synchronous="normal"
            ) as agent:
                agent.replace_state(state)
                bare = BareCalls(agent)
                py_set, bare_set = race(
                    [
                        lambda i: agent.set_state(patches[i & 63]),
                        lambda i: bare.set_state(datas[i & 63]),
                    ],
                    rounds,
                    set_ops,
                )
                py_get, bare_get = race(
                    [lambda i: agent.get_state(), lambda i: bare.get_state()], rounds, get_ops
                )
            for op, py, c, ops in (
                ("set_state", py_set, bare_set, set_ops),
                ("get_state", py_get, bare_get, get_ops),
            ):
                overhead = py - c
                baseline = OVERHEAD_BASELINE_S[op] if size == 1024 else None
                row = {
                    "target_group": "write-cost",
                    "kind": "binding_overhead",
                    "op": op,
                    "size": size,
                    "where": "SQLite, disk, normal",
                    "calls_per_round": ops,
                    "python_s": py,
                    "bare_s": c,
                    "overhead_s": overhead,
                    "baseline_overhead_s": baseline,
                    "target_max_s": None if baseline is None else baseline / 2,
                    "verdict": "",
                }
                if baseline is not None:
                    row["ratio"] = overhead / baseline
                    row["verdict"] = "PASS" if overhead <= baseline / 2 else "MISS"
                rows.append(row)
    print(
        "The write-cost target for Python: the binding's own cost per call (`Agent` call minus "
        "the bare C call it makes, same patch bytes, same agent; SQLite, disk, synchronous normal)"
    )
    print()
    print(
        "| operation | state | Agent (µs) | bare C call (µs) | overhead (µs) | baseline "
        "overhead (µs) | overhead / baseline | target | |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        base = r["baseline_overhead_s"]
        print(
            "| %s | %d KiB | %.1f | %.1f | %.1f | %s | %s | %s | %s |"
            % (
                r["op"],
                r["size"] // 1024,
                r["python_s"] * 1e6,
                r["bare_s"] * 1e6,
                r["overhead_s"] * 1e6,
                "" if base is None else "%.1f" % (base * 1e6),
                "" if base is None else "%.2f×" % r["ratio"],
                "" if base is None else "≤ %.1f µs (half)" % (base / 2 * 1e6),
                r["verdict"],
            )
        )
    return rows


def async_cost(smoke):
    """The async binding: the awaited call against the sync call, printed."""
    ops = 100 if smoke else 2000
    with tempfile.TemporaryDirectory(prefix="agent_state_py_bench_async_") as work:
        rows = async_per_call(work, 3 if smoke else 11, ops)
    print(
        "The async binding: an awaited AsyncAgent call against the sync Agent call, 1 KiB state, "
        "SQLite (disk, synchronous normal), one coroutine awaiting one call after another, "
        "%d calls per round" % ops
    )
    print()
    print("| operation | Agent (µs) | AsyncAgent (µs) | overhead (µs) | ratio | target | |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| %s | %.1f | %.1f | %.1f | %.2f× | ≤ %g× | %s |"
            % (
                r["op"],
                r["sync_s"] * 1e6,
                r["async_s"] * 1e6,
                (r["async_s"] - r["sync_s"]) * 1e6,
                r["ratio"],
                r["target_max"],
                r["verdict"],
            )
        )
    for r in rows:
        print(
            "| reference: `await loop.run_in_executor(pool, agent.%s%s)`, by hand | %.1f | %.1f "
            "| %.1f | %.2f× | | |"
            % (
                r["op"],
                ", patch" if r["op"] == "set_state" else "",
                r["sync_s"] * 1e6,
                r["offload_s"] * 1e6,
                (r["offload_s"] - r["sync_s"]) * 1e6,
                r["offload_s"] / r["sync_s"],
            )
        )
    get = rows[1]
    print(
        "| reference: `await AsyncAgent.get_state()` after one `agent.sync.get_state()` on the "
        "loop's thread (its validated copy answers: no hand-off) | %.1f | %.1f | %.1f | %.2f× | | |"
        % (get["sync_s"] * 1e6, get["hot_s"] * 1e6, (get["hot_s"] - get["sync_s"]) * 1e6,
           get["hot_s"] / get["sync_s"])
    )
    floor_s = rows[0]["floor_s"]
    print(
        "| reference: `await loop.run_in_executor(pool, noop)`, the thread handoff alone "
        "| 0 | %.1f | %.1f | | | |" % (floor_s * 1e6, floor_s * 1e6)
    )
    return rows


def async_loop_lag(smoke):
    """The async binding: how long awaited calls keep the event loop from running, printed."""
    rounds = 3 if smoke else 7
    with tempfile.TemporaryDirectory(prefix="agent_state_py_bench_lag_") as work:
        rows = loop_lag(work, rounds, 0.2 if smoke else HOLD_S)
    print(
        "The async binding: the event loop's largest stall (the largest gap of a 1 ms ticker, "
        "tests/loop_lag.py) while awaited AsyncAgent calls run, 1 KiB states, SQLite (disk, "
        "synchronous normal); median of %d rounds" % rounds
    )
    print()
    print("| case | calls | ticker's largest gap (ms) | worst round (ms) | all calls done in (ms) | target | |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| %s | %d | %.1f | %.1f | %.1f | %s | %s |"
            % (r["what"], r["calls"], r["gap_s"] * 1e3, r["worst_gap_s"] * 1e3,
               r["elapsed_s"] * 1e3,
               "≤ %g ms" % (r["target_max_s"] * 1e3) if r["target_max_s"] else "", r["verdict"])
        )
    return rows


def async_throughput(smoke):
    """The async binding: coroutines against threads on PostgreSQL, printed (or why not)."""
    uri = os.environ.get("AGENT_STATE_TEST_PG_URI")
    if not uri:
        print(
            "The async binding, PostgreSQL throughput (%d coroutines vs %d threads): skipped: "
            "AGENT_STATE_TEST_PG_URI is not set (bench/run.sh runs this under "
            "tests/pg/with-server.sh, which could not start a server)" % (WORKERS, WORKERS)
        )
        return [
            {
                "target_group": "async",
                "kind": "pg_throughput",
                "workers": WORKERS,
                "skipped": "no PostgreSQL server (AGENT_STATE_TEST_PG_URI unset)",
            }
        ]
    calls = 3 if smoke else 50
    rows = pg_throughput(uri, 3 if smoke else 7, calls)
    print(
        "The async binding: throughput on PostgreSQL, %d coroutines (an AsyncAgent each) against "
        "%d threads (a sync Agent each), each worker on its own agent_id of one store (%d agents), "
        "1 KiB state, synchronous full (the default), %d calls per worker per round"
        % (WORKERS, WORKERS, WORKERS, calls)
    )
    print()
    print(
        "| operation | %d coroutines (calls/s) | %d threads (calls/s) | coroutines / threads "
        "| target | |" % (WORKERS, WORKERS)
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| %s | %.0f | %.0f | %.2f× | ≥ %g× | %s |"
            % (r["op"], r["async_ops_s"], r["threads_ops_s"], r["ratio"], r["target_min"],
               r["verdict"])
        )
    return rows


PARTS = {
    "fig10": writes_at_the_floor,
    "overhead": binding_overhead,
    "async": async_cost,
    "loop-lag": async_loop_lag,
    "pg-async": async_throughput,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a few operations per case")
    parser.add_argument("--out", help="write the raw figures as JSON to this file")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(PARTS),
        help="run only this part (may be repeated): fig10 (sqlite3 + json + merge), overhead "
        "(the binding's own cost: Agent calls against the bare C calls), async "
        "(AsyncAgent against Agent, SQLite), loop-lag (the event loop's stalls while awaited "
        "calls run, SQLite), pg-async (coroutines against threads, PostgreSQL)",
    )
    args = parser.parse_args()
    rows = []
    for n, name in enumerate(args.only or list(PARTS)):
        if n:
            print()
        rows.extend(PARTS[name](args.smoke))
    if args.out:
        if os.path.dirname(args.out):
            os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
