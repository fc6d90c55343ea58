"""The report of bench/live/run.sh: joins the subscribers', the writer's and the server's figures,
prints a markdown table, writes the JSON, and exits 1 when a correctness check failed (a copy
that differs, a version gap, a subscriber that never connected, a writer that failed). Slow
latency is reported, never judged."""

import argparse
import json
import sys


def pairs(text):
    out = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        out[k] = int(v) if v.strip() else None
    return out


def mib(kb):
    return None if kb is None else kb / 1024.0


def fmt(v, digits=1):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def main():
    p = argparse.ArgumentParser()
    for name in ("mode", "label", "out", "subscribers", "writer", "rss", "rss-kb", "cpu-ticks",
                 "marks", "server-err"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--writer-rc", type=int, required=True)
    p.add_argument("--server-rc", type=int, required=True)
    p.add_argument("--hz", type=int, required=True)
    p.add_argument("--load-start", default="")
    p.add_argument("--load-end", default="")
    a = p.parse_args()

    with open(a.subscribers) as f:
        subs = json.load(f)
    with open(a.writer) as f:
        writer = json.load(f)
    timeline = []  # (ms since the epoch, VmRSS kB), every 500 ms
    with open(a.rss) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                timeline.append((int(parts[0]), int(parts[1])))
    samples = [kb for _, kb in timeline]
    marks = pairs(a.marks)

    def phase_max(lo, hi):
        return max((kb for t, kb in timeline if lo <= t < hi), default=None)
    rss = pairs(a.rss_kb)
    cpu = pairs(a.cpu_ticks)
    with open(a.server_err, errors="replace") as f:
        server_err = f.read().splitlines()[-20:]

    n = subs["subscribers"]
    # subscribers.mjs's figures name no client; live_subscribers.rs's say "rust". Only the JS
    # one runs a probe (one more subscriber on an idle event loop: the Rust client's backlog is
    # its per-thread busy fraction instead).
    client = subs.get("client", "js")
    probe = subs.get("probe")
    writes = writer.get("writes")
    expected = n * writes if writes is not None else None
    rss_max = max(samples + [v for v in (rss["ready"], rss["end"]) if v is not None], default=None)
    secs = lambda a_, b_: (cpu[b_] - cpu[a_]) / a.hz  # noqa: E731

    checks = {
        "every subscriber connected": subs["connected"] == n and not subs["never_connected"],
        "every final copy equals the stored state": subs["copies_equal"] == n
        and (probe is None or probe["equal"]),
        "versions consecutive": subs["versions_consecutive"] == n and subs["gaps"] == 0
        and subs["skipped_versions"] == 0 and (probe is None or probe["gaps"] == 0),
        "deliveries = subscribers x writes": expected is not None
        and subs["deliveries"] == expected,
        "the writer wrote every change": a.writer_rc == 0
        and writer.get("final_version") == subs["stored_version"],
    }
    result = {
        "mode": a.mode,
        "client": client,
        "label": a.label,
        "load_average": {"start": a.load_start, "end": a.load_end},
        "ok": all(checks.values()),
        "checks": checks,
        "subscribers": subs,
        "writer": writer,
        "server": {
            "rss_mib": {"start": mib(rss["start"]), "ready": mib(rss["ready"]),
                        "max": mib(rss_max), "end": mib(rss["end"]), "hwm": mib(rss["hwm"])},
            # VmHWM may lag VmRSS: the kernel updates the high-water mark lazily.
            "rss_max_mib_by_phase": {
                "connect": mib(phase_max(0, marks["ready"])),
                "writing": mib(phase_max(marks["ready"], marks["written"])),
                "settle": mib(phase_max(marks["written"], marks["end"] + 1)),
            },
            "rss_samples": len(samples),
            "rss_timeline_mib": [[round((t - marks["ready"]) / 1000.0, 1), round(kb / 1024.0, 1)]
                                 for t, kb in timeline],
            "cpu_seconds": {"total": secs("start", "end"), "connect": secs("start", "ready"),
                            "writing": secs("ready", "written"), "settle": secs("written", "end")},
            "exit_code_on_sigterm": a.server_rc,
            "stderr_tail": server_err,
        },
    }
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")

    lat = subs["latency_ms"]
    srv = result["server"]
    rows = [
        ("subscribers", f"{n} ({client} client, {subs['workers']} threads)"),
        ("writes", f"{fmt(writes)} ({fmt(writer.get('target_rate'), 0)}/s target)"),
        ("achieved rate", f"{fmt(writer.get('achieved_rate'))}/s"),
        ("deliveries", f"{subs['deliveries']} of {fmt(expected)}"),
        ("latency p50 / p99 / max", f"{fmt(lat['p50'], 2)} / {fmt(lat['p99'], 2)} / "
                                    f"{fmt(lat['max'], 2)} ms"),
    ]
    if probe is not None:
        rows.append(("probe latency p50 / p99 / max", f"{fmt(probe['latency_ms']['p50'], 2)} / "
                     f"{fmt(probe['latency_ms']['p99'], 2)} / {fmt(probe['latency_ms']['max'], 2)}"
                     " ms (one more subscriber, alone on its event loop)"))
    busy = "thread busy while writing" if client == "rust" else "event loop use"
    rows += [
        ("final copies equal", f"{subs['copies_equal']}/{n}"),
        ("versions consecutive", "yes" if checks["versions consecutive"] else
         f"no ({subs['versions_consecutive']}/{n}, {subs['gaps']} gaps, "
         f"{subs['skipped_versions']} skipped)"),
        ("reconnects / errors", f"{subs['reconnects']} / {subs['errors']}"
         + (f" (close codes {subs['close_codes']}, errors {subs['error_codes']})"
            if subs["close_codes"] or subs["error_codes"] else "")),
        ("server RSS max (hwm)", f"{fmt(srv['rss_mib']['max'])} MiB "
                                 f"({fmt(srv['rss_mib']['hwm'])}; "
                                 f"{fmt(srv['rss_mib']['ready'])} with all connected)"),
        ("server RSS max while writing / after", f"{fmt(srv['rss_max_mib_by_phase']['writing'])}"
         f" / {fmt(srv['rss_max_mib_by_phase']['settle'])} MiB"),
        ("server CPU", f"{fmt(srv['cpu_seconds']['total'], 2)} s "
                       f"({fmt(srv['cpu_seconds']['writing'], 2)} s while writing)"),
        (f"client CPU ({busy})", f"{fmt(subs['client_cpu_seconds'], 2)} s ("
         + ", ".join(f"{u:.2f}" for u in subs["event_loop_utilization"]) + ")"),
    ]
    print(f"### agent-state serve under load ({a.label})\n")
    print("| figure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    failed = [k for k, ok in checks.items() if not ok]
    if subs["reconnects"] or subs["errors"] or subs["extra_snapshots"] or subs["close_codes"]:
        print(f"\nnote: {subs['reconnects']} reconnects, {subs['errors']} client errors, "
              f"{subs['extra_snapshots']} snapshots after the first, closes "
              f"{subs['close_codes']}: not a healthy run"
              + (f" ({'; '.join(subs['error_samples'])})" if subs["error_samples"] else ""))
    if max(subs["event_loop_utilization"], default=0) > 0.9:
        print(f"\nnote: the subscribers' {'threads' if client == 'rust' else 'event loops'} were "
              "busy over 90% of the time: the client process, not the server, bounds these "
              "figures")
    return finish(a, failed, subs.get("bad", []), "subscriber")


def finish(a, failed, bad, what):
    """The report's last lines (the load average, where the figures are, the failed checks and
    a few of the `what`s that failed them); the exit status."""
    print(f"\nload average (1, 5, 15 min) at start: {a.load_start}; at end: {a.load_end}")
    print(f"figures: {a.out}")
    if failed:
        print("\nFAILED: " + "; ".join(failed), file=sys.stderr)
        for one in bad:
            print(f"  {what} {json.dumps(one)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
