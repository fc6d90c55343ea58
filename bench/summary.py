"""Prints every figure of the issue "Writes at the floor" from the JSON that bench/run.sh's
runs wrote (abi.json, python.json, go.json in the directory given), in the issue's order, each
with its contender, target and PASS/MISS; stretch goals are marked "stretch" and not counted.
Then the figures of issue 22, "Never block an event loop" (python.json's rows with "issue":
"22"): the asyncio wrapper's cost per call against the sync call, and 100 coroutines against
100 threads on PostgreSQL.

    python3 bench/summary.py target/bench full|smoke
"""

import json
import os
import sys

FIGURES = [
    ("1", "set_state vs the raw write floor (normal: ≥ 0.7 / 0.6 / 0.6, stretch 0.85; full: ≥ 0.95)"),
    ("2", "set_state vs UPDATE json_patch (≥ 1.5 / 3 / 10 at normal)"),
    ("3", "replace_state vs UPDATE v = json(?) (≥ 1, stretch 2, at normal)"),
    ("4", "the change log's cost: log on vs off (≥ 1/1.3)"),
    ("5", "a patch as large as the state vs replace_state of the result (≥ 1 at normal)"),
    ("6a", "durable writes: set_state at full vs the raw full write (≥ 0.95)"),
    ("6b", "group commit, stretch: 8 threads x own handle vs 1 thread at full (≥ 4x commits/s)"),
    ("7", "open + get_state + close vs rusqlite open + pragmas + SELECT (≥ 0.8)"),
    ("8", "reads scale: 2 threads on one handle vs 1 thread (≥ 1.6x reads/s)"),
    ("9", "resident memory flat over 1,000,000 get+set pairs"),
    ("10", "Python set_state vs sqlite3 + json + merge (≥ 1.5 / 3 at 1 / 16 KiB)"),
    ("11", "Go SetState(map) vs encoding/json + database/sql (≥ 1)"),
    ("12", "Cloudflare Agents' batched setState"),
]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def human(size):
    return "%d KiB" % (size // 1024) if size >= 1024 else "%d B" % size


def main():
    out, mode = sys.argv[1], sys.argv[2]
    abi = load(os.path.join(out, "abi.json")) or {}
    py = load(os.path.join(out, "python.json")) or []
    go = load(os.path.join(out, "go.json")) or {}
    lines = []  # (fig, what, state, where, ours_us, contender, alt_us, ratio, target, verdict, note)
    for r in abi.get("rows", []):
        for fig in [f.strip() for f in r.get("fig", "").split(",") if f.strip()]:
            lines.append(
                (fig, r["op"], human(r["size"]), "%s, %s" % (r["dir"], r["sync"]),
                 r["ours_ns"] / 1e3, r["alternative"], r["alt_ns"] / 1e3, r["ratio"],
                 r["target"], r["verdict"], r.get("note", ""))
            )
    if "rss_verdict" in abi:
        lines.append(
            ("9", "get+set pairs, 16 KiB state", "", "tmpfs, normal", None,
             "RSS after the first %d" % abi["rss_first_ops"], None, None, None,
             abi["rss_verdict"],
             "%d KiB after %d, %d KiB after %d; limit %d KiB (+10%% + 1 MiB)"
             % (abi["rss_kib_after_first"], abi["rss_first_ops"], abi["rss_kib_after_total"],
                abi["rss_total_ops"], abi["rss_kib_limit"]))
        )
    for r in py:
        if r.get("fig"):
            lines.append(
                (r["fig"], "Python " + r["op"], human(r["size"]), "disk, normal",
                 r["ours_s"] * 1e6, "sqlite3 + json + merge", r["hand_rolled_s"] * 1e6,
                 r["ratio"], r["target"], r["verdict"], "")
            )
    for r in go.get("versus", []) if isinstance(go, dict) else []:
        lines.append(
            (r["fig"], "Go " + r["op"], human(r["size"]), "disk, normal", r["ours_ns"] / 1e3,
             r["alternative"], r["alt_ns"] / 1e3, r["ratio"], r["target"], r["verdict"],
             "database/sql over a minimal cgo driver on the system's libsqlite3")
        )
    order = {f: i for i, (f, _) in enumerate(FIGURES)}
    lines.sort(key=lambda l: order.get(l[0], 99))
    print("| fig. | ours | state | where | ours (µs) | contender | contender (µs) | ratio | target | | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    seen = set()
    misses = 0
    for l in lines:
        fig, op, state, where, ours, alt, alt_us, ratio, target, verdict, note = l
        seen.add(fig)
        if verdict == "MISS":
            misses += 1
        print(
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
            % (fig, op, state, where, "" if ours is None else "%.3f" % ours, alt,
               "" if alt_us is None else "%.3f" % alt_us,
               "" if ratio is None else "%.2f×" % ratio,
               "" if target is None else "≥ %s×" % ("%.3f" % target).rstrip("0").rstrip("."),
               verdict, note)
        )
    for fig, what in FIGURES:
        if fig not in seen and fig != "12":
            print("| %s | %s | | | | not run | | | | | |" % (fig, what))
    print()
    print(
        "Cloudflare Agents contender (fig. 12): not run (needs wrangler + the agents package; "
        "see README)"
    )
    print(
        "%d target(s) missed; stretch goals (\"stretch PASS/MISS\") not counted%s"
        % (misses, "; smoke mode: figures mean nothing" if mode == "smoke" else "")
    )
    print()
    never_block(py, mode)


def never_block(py, mode):
    """Issue 22's figures, from python.json."""
    rows = [r for r in py if isinstance(r, dict) and r.get("issue") == "22"]
    print('The issue "Never block an event loop" (22): the Python binding\'s AsyncAgent')
    print()
    print("| ours | state | where | ours | contender | contender's | ratio | target | | note |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    misses = 0
    per_call = [r for r in rows if r.get("kind") == "async_per_call"]
    for r in per_call:
        if r["verdict"] == "MISS":
            misses += 1
        print(
            "| await AsyncAgent.%s | %s | %s | %.1f µs | Agent.%s | %.1f µs | %.2f× | ≤ %g× | %s "
            "| the thread handoff alone (`run_in_executor` of a no-op): %.1f µs; the sync call "
            "offloaded by hand: %.1f µs |"
            % (r["op"], human(r["size"]), r["where"], r["async_s"] * 1e6, r["op"],
               r["sync_s"] * 1e6, r["ratio"], r["target_max"], r["verdict"], r["floor_s"] * 1e6,
               r["offload_s"] * 1e6)
        )
    if not per_call:
        print("| await AsyncAgent.set_state / get_state vs the sync call | 1 KiB | SQLite | "
              "| not run | | | ≤ 1.5× | | |")
    for r in [r for r in rows if r.get("kind") == "pg_throughput"]:
        if "skipped" in r:
            print("| %d coroutines vs %d threads | 1 KiB | PostgreSQL | | skipped: %s | | | | | |"
                  % (r.get("workers", 100), r.get("workers", 100), r["skipped"]))
            continue
        print(
            "| %d coroutines, AsyncAgent.%s | %s | %s | %.0f calls/s | %d threads, Agent.%s "
            "| %.0f calls/s | %.2f× | | | throughput, coroutines / threads; information |"
            % (r["workers"], r["op"], human(r["size"]), r["where"], r["async_ops_s"],
               r["workers"], r["op"], r["threads_ops_s"], r["ratio"])
        )
    if not any(r.get("kind") == "pg_throughput" for r in rows):
        print("| 100 coroutines vs 100 threads | 1 KiB | PostgreSQL | | not run | | | | | |")
    print()
    print(
        "%d target(s) of issue 22 missed%s"
        % (misses, "; smoke mode: figures mean nothing" if mode == "smoke" else "")
    )


if __name__ == "__main__":
    main()
