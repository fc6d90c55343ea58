"""Prints, first, every row of the write-cost targets' table ("Write what changed") from the
JSON that bench/run.sh's runs wrote (abi.json, postgres.json, python.json in the directory
given), each with its target and PASS/MISS. Then every figure of the issue "Writes at the floor"
(abi.json, python.json, go.json), in the issue's order, each with its contender, target and
PASS/MISS (where the write-cost targets raised a target, theirs); stretch goals are marked
"stretch" and not counted. Then the async binding's figures, "Never block an event loop"
(python.json's rows with "target_group": "async"): the asyncio wrapper's cost per call against
the sync call, 100 coroutines against 100 threads on PostgreSQL, and the event loop's largest
stall while awaited calls run (a 1 ms ticker's largest gap). Then the fleet's costs, and last the
changes pushed to a fleet (live-fleet-sqlite.json, live-fleet-postgres.json): agent-state serve's
CPU while every agent is watched and nothing is written (target under 2% of one core) and the
delivery latency under load (target p99 under 100 ms).

    python3 bench/summary.py target/bench full|smoke
"""

import json
import os
import sys

FIGURES = [
    ("1", "set_state vs the raw write floor (normal: ≥ 0.9 / 1.5 / 3, write-cost targets; full: ≥ 0.95)"),
    ("2", "set_state vs UPDATE json_patch (≥ 1.5 / 3 / 20 at normal, write-cost targets)"),
    ("3", "replace_state vs UPDATE v = json(?) (≥ 1, stretch 2, at normal)"),
    ("4", "the change log's cost: log on vs off (cost ≤ 1.1×, a write-cost target)"),
    ("5", "a patch as large as the state vs replace_state of the result (≥ 1 at normal)"),
    ("6a", "durable writes: set_state at full vs the raw full write (≥ 0.95)"),
    ("6b", "group commit: 8 threads x own handle vs 1 thread at full (≥ 4x commits/s, a write-cost target)"),
    ("7", "open + get_state + close vs rusqlite open + pragmas + SELECT (≥ 0.8)"),
    ("8", "reads scale: 2 threads on one handle vs 1 thread (≥ 1.8x reads/s, a write-cost target)"),
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


def target_text(target, goal):
    """A row's target as abi.json states it (benches/support/table.rs's Goal)."""
    if target is None:
        return ""
    t = ("%.3f" % target).rstrip("0").rstrip(".")
    return {"cost_at_most": "cost ≤ %s×", "ns_at_most": "≤ %s ns"}.get(goal, "≥ %s×") % t


KIB = 1024

#: The write-cost targets' table ("Write what changed"), in its order: (key, state size, the
#: targets' words). The key is the "write_cost_target" label of an abi.json row (which carries the
#: target), or "python" (python.json's figure-10 row), "pg_bytes" (postgres.json's
#: bytes_per_write) or "pg_append_bytes" (postgres.json's bytes_per_append).
WRITE_COST_TARGETS = [
    ("growing_factor", 256 * KIB,
     "growing state, one ~200 B member added per write: cost at ~300 KiB / cost at ~1 KiB"),
    ("growing_floor", 256 * KIB, "the same, against the whole-value floor at 256 KiB"),
    ("nested_1", 1 * KIB, "one ~200 B member added 1 level down / at the top level, from 1 KiB"),
    ("nested_2", 1 * KIB, "the same, 2 levels down, from 1 KiB"),
    ("nested_4", 1 * KIB, "the same, 4 levels down, from 1 KiB"),
    ("nested_1", 256 * KIB, "the same, 1 level down, from 256 KiB"),
    ("nested_2", 256 * KIB, "the same, 2 levels down, from 256 KiB"),
    ("nested_4", 256 * KIB, "the same, 4 levels down, from 256 KiB"),
    ("append_factor", 256 * KIB,
     "a list's append by JSON Patch, one ~200 B message per write: cost at ~300 KiB / cost at ~1 KiB"),
    ("append_merge", 256 * KIB, "the same, against RFC 7396 (the whole list sent again) at 256 KiB"),
    ("pg_append_bytes", 256 * KIB,
     "PostgreSQL: bytes sent per append from 256 KiB: the operation + a constant"),
    ("floor", 1 * KIB, "two members changed, vs the floor, 1 KiB"),
    ("floor", 16 * KIB, "two members changed, vs the floor, 16 KiB"),
    ("floor", 256 * KIB, "two members changed, vs the floor, 256 KiB"),
    ("json_patch", 1 * KIB, "vs `json_patch`, 1 KiB"),
    ("json_patch", 16 * KIB, "vs `json_patch`, 16 KiB"),
    ("json_patch", 256 * KIB, "vs `json_patch`, 256 KiB"),
    ("log", 1 * KIB, "change log cost factor, 1 KiB"),
    ("log", 16 * KIB, "change log cost factor, 16 KiB"),
    ("log", 256 * KIB, "change log cost factor, 256 KiB"),
    ("cloudflare", 1 * KIB, "durable write (`full`) vs Cloudflare Agents durable `setState`, 1 KiB"),
    ("writers", 1 * KIB, "8 writers, one store, `full`: commits/s vs one writer"),
    ("get_hot", 1 * KIB, "`get_state` on a hot handle"),
    ("threads", 1 * KIB, "two threads reading one handle vs one thread"),
    ("python", 1 * KIB, "Python `set_state` vs sqlite3 + json + merge, 1 KiB"),
    ("pg_bytes", 256 * KIB, "PostgreSQL: bytes sent per write, 2-member patch on a 256 KiB state"),
]

#: The write-cost target for the Python row (python.json's own target may differ).
PYTHON_TARGET = 1.5


def write_cost(abi, pg, py, mode):
    """The write-cost targets' table: a line per target, with the measured figure, the target
    and PASS/MISS ("not run" where the run has no such row)."""
    print('The write-cost targets ("Write what changed")')
    print()
    print("| figure | where | ours | contender | contender's | measured | target | | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for r in abi.get("rows", []):
        if r.get("write_cost_target"):
            rows.setdefault((r["write_cost_target"], r["size"]), r)
    misses = 0
    for key, size, what in WRITE_COST_TARGETS:
        cells = None
        if key == "python":
            r = next((r for r in py if isinstance(r, dict) and r.get("fig") == "10"
                      and r.get("op") == "set_state" and r.get("size") == size), None)
            if r:
                verdict = "PASS" if r["ratio"] >= PYTHON_TARGET else "MISS"
                cells = ("disk, normal", "%.1f µs" % (r["ours_s"] * 1e6), "sqlite3 + json + merge",
                         "%.1f µs" % (r["hand_rolled_s"] * 1e6), "%.2f×" % r["ratio"],
                         "≥ %g×" % PYTHON_TARGET, verdict, "python.json's figure-10 row")
        elif key == "pg_bytes":
            b = pg.get("bytes_per_write")
            if b:
                cells = ("PostgreSQL, normal", "%.0f B per set_state" % b["bytes_per_write"],
                         "the patch", "%.0f B" % b["patch_bytes"],
                         "%.0f B per write" % b["bytes_per_write"],
                         "< patch + %d B" % b["allowance"], b["verdict"],
                         "counted by a proxy between client and server, mean of %d writes; "
                         "the whole state is %d B" % (b["writes"], b["state_bytes"]))
        elif key == "pg_append_bytes":
            a = pg.get("bytes_per_append")
            if a and a.get("runs"):
                small, big = a["runs"][0], a["runs"][-1]
                cells = ("PostgreSQL, normal", "%.0f B per append" % big["mean"],
                         "the same from 1 KiB", "%.0f B" % small["mean"],
                         "%.0f B per append" % big["mean"],
                         "≤ %.0f B" % a["limit"], a["verdict"],
                         "operation %.0f B; limit: the operation + %g × what an append from 1 KiB "
                         "sends beyond it; mean of %d appends" % (
                             a["operation_bytes"], a["slack"], a["appends"]))
        else:
            r = rows.get((key, size))
            if r:
                goal = r.get("goal", "at_least")
                ns = goal == "ns_at_most"
                measured = "%.1f ns" % r["measured"] if ns else "%.2f×" % r["measured"]
                ours = "%.1f ns" % r["ours_ns"] if ns else "%.3f µs" % (r["ours_ns"] / 1e3)
                alt = "%.1f ns" % r["alt_ns"] if ns else "%.3f µs" % (r["alt_ns"] / 1e3)
                cells = ("%s, %s" % (r["dir"], r["sync"]), ours, r["alternative"], alt, measured,
                         target_text(r["target"], goal), r["verdict"], r.get("note", ""))
        if cells is None:
            print("| %s | | | not run | | | | | |" % what)
            continue
        if cells[6] == "MISS":
            misses += 1
        print("| %s | %s |" % (what, " | ".join(cells)))
    print()
    print("%d of the %d write-cost targets missed%s" % (
        misses, len(WRITE_COST_TARGETS), "; smoke mode: figures mean nothing" if mode == "smoke" else ""))
    print()


def main():
    out, mode = sys.argv[1], sys.argv[2]
    abi = load(os.path.join(out, "abi.json")) or {}
    py = load(os.path.join(out, "python.json")) or []
    go = load(os.path.join(out, "go.json")) or {}
    pg = load(os.path.join(out, "postgres.json")) or {}
    write_cost(abi, pg, py, mode)
    print('The issue "Writes at the floor": every figure')
    print()
    lines = []  # (fig, what, state, where, ours_us, contender, alt_us, ratio, target, verdict, note)
    for r in abi.get("rows", []):
        for fig in [f.strip() for f in r.get("fig", "").split(",") if f.strip()]:
            lines.append(
                (fig, r["op"], human(r["size"]), "%s, %s" % (r["dir"], r["sync"]),
                 r["ours_ns"] / 1e3, r["alternative"], r["alt_ns"] / 1e3, r["ratio"],
                 target_text(r["target"], r.get("goal")), r["verdict"], r.get("note", ""))
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
                 r["ratio"], target_text(r["target"], None), r["verdict"], "")
            )
    for r in go.get("versus", []) if isinstance(go, dict) else []:
        lines.append(
            (r["fig"], "Go " + r["op"], human(r["size"]), "disk, normal", r["ours_ns"] / 1e3,
             r["alternative"], r["alt_ns"] / 1e3, r["ratio"], target_text(r["target"], None),
             r["verdict"],
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
               "" if ratio is None else "%.2f×" % ratio, target or "", verdict, note)
        )
    for fig, what in FIGURES:
        if fig not in seen and fig != "12":
            print("| %s | %s | | | | not run | | | | | |" % (fig, what))
    print()
    print(
        "Cloudflare Agents contender (fig. 12): not run (needs wrangler + the agents package; "
        "see the book's Performance page, docs/src/performance.md)"
    )
    print(
        "%d target(s) missed; stretch goals (\"stretch PASS/MISS\") not counted%s"
        % (misses, "; smoke mode: figures mean nothing" if mode == "smoke" else "")
    )
    print()
    never_block(py, mode)
    print()
    fleet_costs(abi, pg, py, load(os.path.join(out, "node.json")) or {},
                load(os.path.join(out, "submit.json")) or {}, mode)
    print()
    fleet_watch(out, mode)


def never_block(py, mode):
    """The async binding's figures ("Never block an event loop"), from python.json."""
    rows = [r for r in py if isinstance(r, dict) and r.get("target_group") == "async"]
    print('The async binding ("Never block an event loop"): the Python binding\'s AsyncAgent')
    print()
    print("| ours | state | where | ours | contender | contender's | ratio | target | | note |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    misses = sum(1 for r in rows if r.get("verdict") == "MISS")
    per_call = [r for r in rows if r.get("kind") == "async_per_call"]
    for r in per_call:
        print(
            "| await AsyncAgent.%s | %s | %s | %.1f µs | Agent.%s | %.1f µs | %.2f× | ≤ %g× | %s "
            "| the thread handoff alone (`run_in_executor` of a no-op): %.1f µs; the sync call "
            "offloaded by hand: %.1f µs%s |"
            % (r["op"], human(r["size"]), r["where"], r["async_s"] * 1e6, r["op"],
               r["sync_s"] * 1e6, r["ratio"], r["target_max"], r["verdict"], r["floor_s"] * 1e6,
               r["offload_s"] * 1e6,
               "; after one sync read on the loop's thread (its validated copy answers, no "
               "hand-off): %.1f µs, %.2f×" % (r["hot_s"] * 1e6, r["hot_s"] / r["sync_s"])
               if r.get("hot_s") else "")
        )
    if not per_call:
        print("| await AsyncAgent.set_state / get_state vs the sync call | 1 KiB | SQLite | "
              "| not run | | | ≤ 1.3× | | |")
    for r in [r for r in rows if r.get("kind") == "pg_throughput"]:
        if "skipped" in r:
            print("| %d coroutines vs %d threads | 1 KiB | PostgreSQL | | skipped: %s | | | | | |"
                  % (r.get("workers", 100), r.get("workers", 100), r["skipped"]))
            continue
        print(
            "| %d coroutines, AsyncAgent.%s | %s | %s | %.0f calls/s | %d threads, Agent.%s "
            "| %.0f calls/s | %.2f× | %s | %s | throughput, coroutines / threads |"
            % (r["workers"], r["op"], human(r["size"]), r["where"], r["async_ops_s"],
               r["workers"], r["op"], r["threads_ops_s"], r["ratio"],
               "≥ %g×" % r["target_min"] if "target_min" in r else "", r.get("verdict", ""))
        )
    if not any(r.get("kind") == "pg_throughput" for r in rows):
        print("| 100 coroutines vs 100 threads | 1 KiB | PostgreSQL | | not run | | | ≥ 1.5× | | |")
    lags = [r for r in rows if r.get("kind") == "loop_lag"]
    for r in lags:
        print(
            "| the loop's largest stall: %s | %s | %s | %.1f ms | a 1 ms ticker | | | %s | %s "
            "| median of %d rounds, worst %.1f ms; all calls done in %.1f ms |"
            % (r["what"], human(r["size"]), r["where"], r["gap_s"] * 1e3,
               "≤ %g ms" % (r["target_max_s"] * 1e3) if r.get("target_max_s") else "",
               r["verdict"], r["rounds"], r["worst_gap_s"] * 1e3, r["elapsed_s"] * 1e3)
        )
    if not lags:
        print("| the loop's largest stall, asyncio.gather of 1,000 set_state | 1 KiB | SQLite | "
              "| not run | | | ≤ 10 ms | | |")
    print()
    print(
        "%d target(s) of the async binding missed%s"
        % (misses, "; smoke mode: figures mean nothing" if mode == "smoke" else "")
    )


#: The fleet's costs, in the order of their table (PostgreSQL writes and awaited calls against
#: what a user would write by hand): for each row, what it measures, where its figures come
#: from, and the target. Where a row misses, the performance page says what bounds it.
def fleet_lines(abi, pg, py, node, submit):
    """The fleet's costs, one tuple per figure of their table: (figure, where, ours, the
    contender's, measured, target, PASS/MISS or "" or "information")."""
    lines = []

    def pg_rows(prefix, size=None):
        return [r for r in pg.get("rows", []) if r["op"].startswith(prefix)
                and (size is None or r["size"] == size)]

    def at_least(value, target):
        return "PASS" if value >= target else "MISS"

    def at_most(value, target):
        return "PASS" if value <= target else "MISS"

    def us(ns):
        return "%.1f µs" % (ns / 1e3)

    for r in pg_rows("set_state (default_query_exec_mode=", 1024):
        mode_name = r["op"].split("=", 1)[1].rstrip(")")
        lines.append(("PostgreSQL `set_state` 1 KiB vs a prepared conditional UPDATE (%s)"
                      % mode_name, r["sync"], us(r["ours_ns"]), us(r["alt_ns"]),
                      "%.2f×" % r["ratio"], "≥ 0.8×", at_least(r["ratio"], 0.8)))
    for r in pg_rows("set_state, 8 processes x 8 agents"):
        mode_name = r["op"].split("=", 1)[1].rstrip(")") if "=" in r["op"] else "exec"
        lines.append(("PostgreSQL throughput, 8 processes x 8 agents vs the floor's (%s)"
                      % mode_name, r["sync"], "%.0f commits/s" % (1e9 / r["ours_ns"]),
                      "%.0f commits/s" % (1e9 / r["alt_ns"]), "%.2f×" % r["ratio"], "≥ 0.8×",
                      at_least(r["ratio"], 0.8)))
    for r in pg_rows("set_state, through PgBouncer"):
        lines.append(("through PgBouncer (transaction mode) vs an unnamed UPDATE through it",
                      r["sync"], us(r["ours_ns"]), us(r["alt_ns"]), "%.2f×" % r["ratio"],
                      "≥ 0.9×", at_least(r["ratio"], 0.9)))
    if not pg.get("rows"):
        lines.append(("PostgreSQL rows", "", "", "", "not run", "", ""))
    asyncs = [r for r in py if isinstance(r, dict) and r.get("target_group") == "async"]
    for r in [r for r in asyncs if r.get("kind") == "async_per_call"]:
        lines.append(("Python `AsyncAgent` awaited `%s` vs the sync call, 1 KiB" % r["op"],
                      r["where"], "%.1f µs" % (r["async_s"] * 1e6),
                      "%.1f µs" % (r["sync_s"] * 1e6), "%.2f×" % r["ratio"], "≤ 1.3×",
                      at_most(r["ratio"], 1.3)))
    for r in [r for r in asyncs if r.get("kind") == "pg_throughput"]:
        if "skipped" in r:
            lines.append(("100 coroutines vs 100 threads on PostgreSQL", "", "", "",
                          "skipped: %s" % r["skipped"], "≥ 1.5×", ""))
            continue
        lines.append(("100 coroutines vs 100 threads on PostgreSQL, `%s` calls/s" % r["op"],
                      r["where"], "%.0f calls/s" % r["async_ops_s"],
                      "%.0f calls/s" % r["threads_ops_s"], "%.2f×" % r["ratio"], "≥ 1.5×",
                      at_least(r["ratio"], 1.5)))
    for r in [r for r in asyncs if r.get("kind") == "loop_lag" and r.get("target_max_s")]:
        lines.append(("Python: the loop's largest stall, %s" % r["what"], r["where"],
                      "%.1f ms" % (r["gap_s"] * 1e3), "a 1 ms ticker", "%.1f ms" % (r["gap_s"] * 1e3),
                      "≤ 10 ms", at_most(r["gap_s"], 0.010)))
    for r in [r for r in node.get("rows", []) if r.get("part") == "lag"]:
        lines.append(("Node: the loop's largest stall, %s" % r["what"], r["where"],
                      "%.1f ms" % r["gap_ms"], "a 1 ms ticker", "%.1f ms" % r["gap_ms"],
                      "≤ 10 ms", at_most(r["gap_ms"], 10)))
    for r in py:
        if isinstance(r, dict) and r.get("fig") == "10" and r.get("size") == 1024:
            lines.append(("Python `set_state` 1 KiB vs sqlite3 + json + merge", "disk, normal",
                          "%.1f µs" % (r["ours_s"] * 1e6), "%.1f µs" % (r["hand_rolled_s"] * 1e6),
                          "%.2f×" % r["ratio"], "≥ 1.5×", at_least(r["ratio"], 1.5)))
    for r in abi.get("rows", []):
        key = r.get("write_cost_target")
        if key == "floor" and r["size"] == 1024:
            lines.append(("C `set_state` 1 KiB `normal` vs the raw write floor",
                          "%s, %s" % (r["dir"], r["sync"]), us(r["ours_ns"]), us(r["alt_ns"]),
                          "%.2f×" % r["ratio"], "≥ 0.9×", at_least(r["ratio"], 0.9)))
        elif key == "log":
            lines.append(("change log cost factor, %s" % human(r["size"]),
                          "%s, %s" % (r["dir"], r["sync"]), us(r["ours_ns"]), us(r["alt_ns"]),
                          "%.2f×" % r["measured"], "≤ 1.1×", at_most(r["measured"], 1.1)))
        elif key == "get_hot":
            lines.append(("hot `get_state` through the C ABI", "%s, %s" % (r["dir"], r["sync"]),
                          "%.1f ns" % r["ours_ns"], "memcpy %.1f ns" % r["alt_ns"],
                          "%.1f ns" % r["measured"], "≤ 40 ns", at_most(r["measured"], 40)))
    for r in submit.get("rows", []):
        lines.append(("C: %s" % r["op"], "%s, %s" % (r.get("dir", ""), r.get("sync", "")),
                      us(r["ours_ns"]), "%s %s" % (r["alternative"], us(r["alt_ns"])),
                      "%.2f×" % r["ratio"], "", "information"))
    return lines


def fleet_costs(abi, pg, py, node, submit, mode):
    """The fleet's costs: one line per figure of their table, with today's figure, the target
    and PASS/MISS ("not run" where this run has no such row)."""
    print("The fleet's costs: PostgreSQL writes and awaited calls against the floor")
    print()
    print("| figure | where | ours | contender's | measured | target | |")
    print("|---|---|---|---|---|---|---|")
    lines = fleet_lines(abi, pg, py, node, submit)
    misses = 0
    for line in lines:
        if line[6] == "MISS":
            misses += 1
        print("| %s |" % " | ".join(line))
    print()
    print("%d of the fleet's cost targets missed (the performance page says what bounds each)%s"
          % (misses, "; smoke mode: figures mean nothing" if mode == "smoke" else ""))


#: The backends of the fleet's watch bench, as its JSON files name them.
FLEET_WATCH = (("sqlite", "SQLite"), ("postgres", "PostgreSQL"))


def fleet_watch_lines(out):
    """Changes pushed to a fleet (bench/live/fleet.sh's live-fleet-BACKEND.json): one tuple per
    figure, (figure, backend, measured, target, PASS/MISS or "information" or "")."""
    lines = []
    for key, name in FLEET_WATCH:
        r = load(os.path.join(out, "live-fleet-%s.json" % key))
        if not r:
            lines.append(("Changes pushed to a fleet", name, "not run", "", ""))
            continue
        if r.get("skipped"):
            lines.append(("Changes pushed to a fleet", name, "skipped: %s" % r["skipped"], "", ""))
            continue
        idle, load_, t = r["idle"], r["load"], r["targets"]
        n = "{:,}".format(r["agents"])
        if idle["server_cpu_pct"] is not None:
            lines.append(("server CPU idle, %s agents watched (%% of one core)" % n, name,
                          "%.2f%%" % idle["server_cpu_pct"], "< 2%",
                          t["idle_cpu_pct"]["verdict"] or ""))
        lines.append(("server threads idle, %s agents watched" % n, name,
                      str(idle["server_threads"]), "", "information"))
        lines.append(("%s streams opened, each to its snapshot (batches of 250)" % n, name,
                      "%.1f s" % r["subscribers"]["connect_seconds"], "", "information"))
        pg_idle = idle.get("postgres") or {}
        if pg_idle.get("transactions_per_s") is not None:
            lines.append(("PostgreSQL transactions while idle, %s agents watched" % n, name,
                          "%.1f/s" % pg_idle["transactions_per_s"], "", "information"))
        lat = load_["latency_ms"]
        if lat.get("p99") is not None:
            lines.append(("delivery latency p50 / p99, %.0f changes/s over %s agents"
                          % (load_["target_rate"], n), name,
                          "%.1f / %.1f ms" % (lat["p50"], lat["p99"]), "p99 < 100 ms",
                          t["p99_ms"]["verdict"] or ""))
        if load_["server_cpu_pct"] is not None:
            lines.append(("server CPU writing (% of one core)", name,
                          "%.1f%%" % load_["server_cpu_pct"], "", "information"))
        if not r.get("ok"):
            failed = [k for k, ok in r["checks"].items() if not ok]
            lines.append(("correctness checks", name, "FAILED: " + "; ".join(failed), "", ""))
    return lines


def fleet_watch(out, mode):
    """Changes pushed to a fleet: the server's idle CPU and the delivery latency against their
    targets, on both backends."""
    print("Changes pushed to a fleet: agent-state serve with every agent watched")
    print()
    print("| figure | backend | measured | target | |")
    print("|---|---|---|---|---|")
    lines = fleet_watch_lines(out)
    for line in lines:
        print("| %s |" % " | ".join(line))
    print()
    print("%d of the fleet watch's targets missed%s" % (
        sum(1 for line in lines if line[4] == "MISS"),
        "; smoke mode: figures mean nothing" if mode == "smoke" else ""))


if __name__ == "__main__":
    main()
