"""The writing process of bench/live/run.sh: merges patches into one agent at a steady rate.

    writer.py seed  --store PATH --agent ID
    writer.py write --store PATH --agent ID --rate R --seconds S [--out FILE.json]

`seed` stores the agent's first state (50 items) with the change log on, so the server has an
agent to serve before any subscriber connects. `write` merges R*S patches, paced by absolute
deadlines (patch i is due at start + i/R: a late patch does not push the next ones back), and
reports the achieved rate, how late the writes ran and what a `set_state` took.

Every patch is `{"t": MS, "seq": N, "items": {KEY: VALUE or null}}`: `t` is the wall-clock time
(ms since the epoch, a float) just before the call, for the subscribers' delivery latency;
`items` adds or replaces one of 50 keys (one patch in ten deletes it instead), so the state
stays bounded (about 50 items of a few hundred bytes) while the patches differ.
"""

import argparse
import json
import random
import sys
import time

import agent_state

KEYS = 50
KEEP_LAST = 10000


def open_agent(store, agent_id):
    return agent_state.Agent(
        store, agent_id=agent_id, change_log={"keep_last": KEEP_LAST}, synchronous="normal"
    )


def item(rng, seq):
    words = " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "omega")) for _ in range(30))
    return {"seq": seq, "score": rng.random(), "tags": [rng.randrange(1000) for _ in range(5)],
            "text": words}


def seed(args):
    rng = random.Random(1)
    with open_agent(args.store, args.agent) as agent:
        agent.replace_state({
            "t": time.time() * 1000.0,
            "seq": 0,
            "items": {f"k{k:02d}": item(rng, 0) for k in range(KEYS)},
        })
        print(json.dumps({"version": agent.get_state_versioned().version}))


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[i]


def paced(plan, rate, start, late_ms):
    """Yields each step of the plan with the time.monotonic() it began, step i when it is due at
    start + i/rate (a late step does not push the next ones back), and appends to late_ms how
    late each one began (ms)."""
    for i, step in enumerate(plan):
        due = start + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
            now = time.monotonic()
        late_ms.append((now - due) * 1000.0)
        yield step, now


def write(args):
    rng = random.Random(2)
    total = int(round(args.rate * args.seconds))
    # The patches' items are made before the clock starts: the loop only stamps and writes.
    plan = []
    for seq in range(1, total + 1):
        key = f"k{rng.randrange(KEYS):02d}"
        plan.append((seq, {key: None if seq % 10 == 0 else item(rng, seq)}))
    call_ms = []
    late_ms = []
    bytes_sent = 0
    with open_agent(args.store, args.agent) as agent:
        first_version = agent.get_state_versioned().version
        period = 1.0 / args.rate
        start = time.monotonic()
        for (seq, items), now in paced(plan, args.rate, start, late_ms):
            patch = {"t": time.time() * 1000.0, "seq": seq, "items": items}
            bytes_sent += len(json.dumps(patch, separators=(",", ":")))
            agent.set_state(patch)
            call_ms.append((time.monotonic() - now) * 1000.0)
        elapsed = time.monotonic() - start
        final = agent.get_state_versioned()
    call_ms.sort()
    late_ms.sort()
    report = {
        "writes": total,
        "target_rate": args.rate,
        "seconds": elapsed,
        # The last write is due at (total-1)/rate, so (total-1) periods elapse between the
        # first and last due times: rate = writes over the time the writes took, one period
        # added for the last one's slot.
        "achieved_rate": total / (elapsed + period) if elapsed > 0 else None,
        "first_version": first_version,
        "final_version": final.version,
        "patch_bytes_mean": bytes_sent / total if total else 0,
        "set_state_ms": {"p50": percentile(call_ms, 50), "p99": percentile(call_ms, 99),
                         "max": call_ms[-1] if call_ms else None},
        "late_ms": {"p50": percentile(late_ms, 50), "p99": percentile(late_ms, 99),
                    "max": late_ms[-1] if late_ms else None},
    }
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    if final.version != first_version + total:
        print(f"writer.py: the store is at version {final.version}, expected "
              f"{first_version + total}: another writer?", file=sys.stderr)
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("seed", "write"))
    p.add_argument("--store", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--out")
    args = p.parse_args()
    if args.command == "seed":
        seed(args)
        return 0
    if args.rate <= 0 or args.seconds <= 0:
        p.error("--rate and --seconds must be positive")
    return write(args)


if __name__ == "__main__":
    sys.exit(main())
