"""The writing process of the fleet bench (bench/live/fleet.sh): many agents, one store.

    fleet.py seed  --store STORE --prefix P --agents N [--out FILE.json]
    fleet.py write --store STORE --prefix P --agents N --rate R --seconds S [--out FILE.json]

STORE is a SQLite file or a postgresql:// URI, as the Python binding opens it.

`seed` stores agents P00000 .. P{N-1} (five digits), each a nested state of about 1 KiB (a
profile, a memory of facts, tasks with steps, counters), with the change log on, so that the
server has every agent before a subscriber connects. `write` merges R*S nested merge patches,
each into an agent drawn at random (seeded: the same agents every run), paced by absolute
deadlines (patch i is due at start + i/R: a late patch does not push the next ones back). A
patch adds a fact (one in five removes the oldest fact it added instead), marks a step done and
bumps the counters: the state grows nested, as agents' states do.

Every patch carries `"t"`: the wall-clock time (ms since the epoch, a float) just before the
call, for the subscribers' delivery latency. The handles are kept in a bounded cache (a SQLite
handle is a file descriptor and a page cache: ten thousand of them would measure the writer);
one not cached is opened before `t` is taken, so the latency is the commit's and the delivery's.
"""

import argparse
import collections
import json
import random
import sys
import time

import agent_state
from writer import KEEP_LAST, paced, percentile

#: Handles kept open by `write` (least recently used closed first).
CACHED = 256
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa")


def agent_id(prefix, i):
    return f"{prefix}{i:05d}"


def open_agent(store, ident):
    return agent_state.Agent(
        store, agent_id=ident, change_log={"keep_last": KEEP_LAST}, synchronous="normal"
    )


def text(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def fact(rng, seq):
    return {"text": text(rng, 8), "score": round(rng.random(), 4), "source": {
        "kind": rng.choice(("chat", "tool", "web")), "seq": seq}}


def seed_state(rng, i):
    return {
        "t": time.time() * 1000.0,
        "profile": {"name": f"agent {i}", "model": "m-3",
                    "limits": {"tokens": 4000, "tools": ["search", "code", "mail"]}},
        "memory": {"summary": text(rng, 20),
                   "facts": {f"f{k}": fact(rng, 0) for k in range(3)}},
        "tasks": {"t0": {"status": "open", "steps": {"s0": {"done": False, "note": text(rng, 4)}}}},
        "stats": {"writes": 0, "last": {"seq": 0, "step": "s0"}},
    }


def seed(args):
    rng = random.Random(1)
    start = time.monotonic()
    # The first agent's handle stays open: on SQLite, closing a file's last connection
    # checkpoints its WAL with a sync, which made each agent cost some 15 ms.
    with open_agent(args.store, agent_id(args.prefix, 0)) as first:
        first.replace_state(seed_state(rng, 0))
        for i in range(1, args.agents):
            with open_agent(args.store, agent_id(args.prefix, i)) as agent:
                agent.replace_state(seed_state(rng, i))
    report = {"agents": args.agents, "seconds": time.monotonic() - start}
    emit(report, args.out)
    return 0


def patch_for(rng, seq, n):
    """The `n`th patch (from 1) of one agent, global sequence number `seq`."""
    facts = {f"w{n}": fact(rng, seq)}
    if n % 5 == 0:
        facts[f"w{n - 4}"] = None  # forget an old one: the state grows, but not without bound
    return {
        "seq": seq,
        "memory": {"facts": facts},
        "tasks": {"t0": {"steps": {f"s{n}": {"done": True, "note": text(rng, 3)}}}},
        "stats": {"writes": n, "last": {"seq": seq, "step": f"s{n}"}},
    }


def write(args):
    rng = random.Random(2)
    total = int(round(args.rate * args.seconds))
    # The plan (which agent, what patch) is made before the clock starts; the loop stamps,
    # opens when not cached, and writes.
    counts = collections.Counter()
    plan = []
    for seq in range(1, total + 1):
        i = rng.randrange(args.agents)
        counts[i] += 1
        plan.append((agent_id(args.prefix, i), patch_for(rng, seq, counts[i])))
    cache = collections.OrderedDict()
    call_ms, late_ms, opens = [], [], 0
    bytes_sent = 0
    period = 1.0 / args.rate
    try:
        start = time.monotonic()
        for ident, patch in (step for step, _ in paced(plan, args.rate, start, late_ms)):
            agent = cache.pop(ident, None)
            if agent is None:
                opens += 1
                agent = open_agent(args.store, ident)
                if len(cache) >= CACHED:
                    cache.popitem(last=False)[1].close()
            cache[ident] = agent
            called = time.monotonic()
            patch["t"] = time.time() * 1000.0
            bytes_sent += len(json.dumps(patch, separators=(",", ":")))
            agent.set_state(patch)
            call_ms.append((time.monotonic() - called) * 1000.0)
        elapsed = time.monotonic() - start
    finally:
        for agent in cache.values():
            agent.close()
    call_ms.sort()
    late_ms.sort()
    report = {
        "writes": total,
        "agents_written": len(counts),
        "most_writes_to_one_agent": max(counts.values(), default=0),
        "target_rate": args.rate,
        "seconds": elapsed,
        # As writer.py: the writes over the time they took, one period added for the last one.
        "achieved_rate": total / (elapsed + period) if elapsed > 0 else None,
        "handle_opens": opens,
        "patch_bytes_mean": bytes_sent / total if total else 0,
        "set_state_ms": {"p50": percentile(call_ms, 50), "p99": percentile(call_ms, 99),
                         "max": call_ms[-1] if call_ms else None},
        "late_ms": {"p50": percentile(late_ms, 50), "p99": percentile(late_ms, 99),
                    "max": late_ms[-1] if late_ms else None},
    }
    emit(report, args.out)
    return 0


def emit(report, out):
    text_ = json.dumps(report, indent=2)
    if out:
        with open(out, "w") as f:
            f.write(text_ + "\n")
    print(text_)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("seed", "write"))
    p.add_argument("--store", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--agents", type=int, required=True)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--out")
    args = p.parse_args()
    if args.agents <= 0 or args.agents > 100_000:
        p.error("--agents must be from 1 to 100000")
    if args.command == "seed":
        return seed(args)
    if args.rate <= 0 or args.seconds <= 0:
        p.error("--rate and --seconds must be positive")
    return write(args)


if __name__ == "__main__":
    sys.exit(main())
