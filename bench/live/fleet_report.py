"""The report of the fleet bench (bench/live/fleet.sh): joins the client's, the writer's and the
server's figures, marks the two targets (the server idle under 2% of one core with every agent
watched; delivery p99 under 100 ms) PASS or MISS, prints a markdown table, writes the JSON, and
exits 1 when a correctness check failed (a copy that differs, a version gap, a stream that never
connected, a change delivered while nothing was written, a writer that failed). The targets
never fail the run."""

import argparse
import json
import sys

from report import finish, fmt

#: The targets: the server's CPU while idle, % of one core; the delivery latency's p99, ms.
IDLE_CPU_PCT = 2.0
P99_MS = 100.0


def pairs(text):
    """`k=v,k=v` with empty values as None; `v` may be `a:b`, kept as text."""
    out = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        out[k] = v if v.strip() else None
    return out


def span(text):
    """`a:b` -> (int a, int b), or None when either is missing."""
    a, _, b = (text or "").partition(":")
    try:
        return int(a), int(b)
    except ValueError:
        return None


def cpu_pct(phase, hz):
    """The server's CPU over a phase as % of one core, and the phase's seconds."""
    cpu, ms = span(phase["cpu"]), span(phase["ms"])
    if not cpu or not ms or ms[1] <= ms[0]:
        return None, None
    seconds = (ms[1] - ms[0]) / 1000.0
    return (cpu[1] - cpu[0]) / hz / seconds * 100.0, seconds


def verdict(value, limit):
    return None if value is None else ("PASS" if value < limit else "MISS")


def main():
    p = argparse.ArgumentParser()
    for name in ("mode", "backend", "label", "out", "subscribers", "seed", "writer",
                 "server-err", "idle", "load", "threads", "rss-kb"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--pg-idle", default="")
    p.add_argument("--writer-rc", type=int, required=True)
    p.add_argument("--server-rc", type=int, required=True)
    p.add_argument("--hz", type=int, required=True)
    p.add_argument("--load-start", default="")
    p.add_argument("--load-end", default="")
    a = p.parse_args()

    def load(path):
        with open(path) as f:
            return json.load(f)
    subs, seed, writer = load(a.subscribers), load(a.seed), load(a.writer)
    with open(a.server_err, errors="replace") as f:
        server_err = f.read().splitlines()[-20:]
    n = subs["agents"]
    threads = {k: (int(v) if v else None) for k, v in pairs(a.threads).items()}
    rss = {k: (int(v) / 1024.0 if v else None) for k, v in pairs(a.rss_kb).items()}
    idle_pct, idle_s = cpu_pct(pairs(a.idle), a.hz)
    load_pct, load_s = cpu_pct(pairs(a.load), a.hz)
    marks = subs.get("marks", {})
    idle_changes = None
    if "idle_start" in marks and "idle_end" in marks:
        idle_changes = marks["idle_end"]["changes"] - marks["idle_start"]["changes"]
    pg = None
    if a.backend == "postgres":
        before, _, after = a.pg_idle.partition(":")
        try:
            (x0, s0), (x1, s1) = [tuple(int(x) for x in t.split()) for t in (before, after)]
            # The bench's own first reading is one of the transactions counted.
            pg = {"transactions": x1 - x0 - 1, "table_scans": s1 - s0,
                  "transactions_per_s": (x1 - x0 - 1) / idle_s if idle_s else None,
                  "note": "pg_stat_database xact_commit + xact_rollback of the store's "
                          "database, less the bench's own reading; scans (seq + idx) of the "
                          "agent_* tables; the server flushes a backend's counts within "
                          "about a second"}
        except ValueError:
            pg = {"error": "no statistics read (%r)" % a.pg_idle}
    lat = subs["latency_ms"]
    writes = writer.get("writes")

    checks = {
        "every stream connected": subs["connected"] == n and not subs["never_connected"],
        "every final copy equals the stored state": subs["copies_equal"] == n,
        "versions consecutive": subs["versions_consecutive"] == n and subs["gaps"] == 0
        and subs["skipped_versions"] == 0,
        "deliveries = writes (one stream per agent)": writes is not None
        and subs["deliveries"] == writes,
        "no change delivered while idle": idle_changes == 0,
        "the writer wrote every change": a.writer_rc == 0,
    }
    targets = {
        "idle_cpu_pct": {"what": "server CPU while idle, % of one core", "value": idle_pct,
                         "target": "< %g" % IDLE_CPU_PCT, "verdict": verdict(idle_pct, IDLE_CPU_PCT)},
        "p99_ms": {"what": "delivery latency p99, ms", "value": lat["p99"],
                   "target": "< %g" % P99_MS, "verdict": verdict(lat["p99"], P99_MS)},
    }
    result = {
        "backend": a.backend, "mode": a.mode, "label": a.label, "agents": n,
        "load_average": {"start": a.load_start, "end": a.load_end},
        "ok": all(checks.values()), "checks": checks, "targets": targets,
        "idle": {"seconds": idle_s, "server_cpu_pct": idle_pct, "server_threads": threads["idle"],
                 "changes_delivered": idle_changes, "postgres": pg},
        "load": {"seconds": load_s, "writes": writes, "target_rate": writer.get("target_rate"),
                 "achieved_rate": writer.get("achieved_rate"), "server_cpu_pct": load_pct,
                 "server_threads": threads["load"], "latency_ms": lat},
        "server": {"threads_ready": threads["ready"], "rss_mib": rss,
                   "exit_code_on_sigterm": a.server_rc, "stderr_tail": server_err},
        "seed": seed, "writer": writer, "subscribers": subs,
    }
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")

    def mark(t):
        return f" ({t['verdict']}, target {t['target']})" if t["verdict"] else ""
    rows = [
        ("agents, one stream each", f"{n} (created in {fmt(seed.get('seconds'))} s; connected "
                                    f"in {fmt(subs['connect_seconds'])} s)"),
        ("server threads (ready / idle / writing)",
         f"{fmt(threads['ready'])} / {fmt(threads['idle'])} / {fmt(threads['load'])}"),
        ("server CPU idle, % of one core", f"{fmt(idle_pct, 2)} over {fmt(idle_s)} s"
                                           + mark(targets["idle_cpu_pct"])),
    ]
    if pg is not None:
        rows.append(("PostgreSQL while idle: transactions / table scans",
                     f"{fmt(pg.get('transactions'))} ({fmt(pg.get('transactions_per_s'), 2)}/s) / "
                     f"{fmt(pg.get('table_scans'))}" if "error" not in pg else pg["error"]))
    rows += [
        ("changes delivered while idle", fmt(idle_changes)),
        ("writes", f"{fmt(writes)} to {fmt(writer.get('agents_written'))} agents "
                   f"({fmt(writer.get('target_rate'), 0)}/s target, "
                   f"{fmt(writer.get('achieved_rate'))}/s achieved)"),
        ("deliveries", f"{subs['deliveries']} of {fmt(writes)}"),
        ("latency p50 / p99 / max", f"{fmt(lat['p50'], 2)} / {fmt(lat['p99'], 2)} / "
                                    f"{fmt(lat['max'], 2)} ms" + mark(targets["p99_ms"])),
        ("server CPU writing, % of one core", f"{fmt(load_pct, 1)} over {fmt(load_s)} s"),
        ("final copies equal", f"{subs['copies_equal']}/{n}"),
        ("versions consecutive", "yes" if checks["versions consecutive"] else
         f"no ({subs['versions_consecutive']}/{n}, {subs['gaps']} gaps, "
         f"{subs['skipped_versions']} skipped)"),
        ("closes / errors", f"{sum(subs['close_codes'].values())} / {subs['errors']}"
         + (f" (close codes {subs['close_codes']}, errors {subs['error_codes']})"
            if subs["close_codes"] or subs["error_codes"] else "")),
        ("server RSS with all connected / at end (hwm)",
         f"{fmt(rss['ready'])} / {fmt(rss['end'])} MiB ({fmt(rss['hwm'])})"),
        ("client CPU (busy fraction of its threads)",
         f"{fmt(subs['client_cpu_seconds'], 2)} s ({fmt(subs['busy_fraction'], 2)})"),
    ]
    print(f"### Changes pushed to a fleet ({a.label})\n")
    print("| figure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    if subs["error_samples"]:
        print(f"\nnote: client errors: {'; '.join(subs['error_samples'])}")
    failed = [k for k, ok in checks.items() if not ok]
    return finish(a, failed, subs.get("bad", []), "stream")


if __name__ == "__main__":
    sys.exit(main())
