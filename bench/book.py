#!/usr/bin/env python3
"""Writes the latest `make bench` figures into the book: the part of docs/src/performance.md
between the lines `<!-- bench:begin -->` and `<!-- bench:end -->`, from the raw JSON the run left
in the directory given (abi.json, postgres.json, python.json, go.json, node.json, live.md, the
table bench/live/report.py printed, and the fleet watch's live-fleet-sqlite.json and
live-fleet-postgres.json). The rest of the page (the method, in words) is kept.

    python3 bench/book.py target/bench                      # rewrites docs/src/performance.md
    python3 bench/book.py target/bench --write-to FILE      # the page, rewritten, to FILE instead

bench/run.sh calls it at the end of a full run only. The tables give times and ratios (the
contender's time over ours: above 1, agent_state is the faster), and the target ratio where the
project has one; never a verdict. They are stamped with the date, the machine (CPU model and
count from /proc/cpuinfo, the OS from /etc/os-release and uname) and the commit, which
--date, --machine and --commit replace (and --remark adds to) (for figures from an earlier run). A smoke run's figures
(abi.json's "mode": "smoke") mean nothing: they are refused unless --write-to names a scratch file.
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "src", "performance.md")
BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"

#: Notes of the raw rows that speak of the bench's own bookkeeping, left out of the book.
DROPPED_NOTES = ("not in the issue", "information, no target")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


#: Between a number and its unit, so that a narrow table column never breaks them apart.
NBSP = "\u00a0"


def size_text(size):
    return ("%d KiB" % (size // 1024) if size >= 1024 else "%d B" % size).replace(" ", NBSP)


def ns_text(ns):
    """A time in nanoseconds, in the unit that reads best."""
    if ns is None:
        return ""
    if ns < 1000:
        text = "%.1f ns" % ns
    elif ns < 10_000_000:
        text = "{:,.1f} µs".format(ns / 1e3)
    else:
        text = "{:,.1f} ms".format(ns / 1e6)
    return text.replace(" ", NBSP)


def ratio_text(ratio):
    return "" if ratio is None else "%.2f×" % ratio


def number(x):
    return ("%.3f" % x).rstrip("0").rstrip(".")


def target_text(target, goal=None):
    """A row's target ratio as the raw row states it (benches/support/table.rs's Goal)."""
    if target is None:
        return ""
    text = {"cost_at_most": "cost ≤ %s×", "ns_at_most": "≤ %s ns"}.get(goal, "≥ %s×") % number(target)
    return text.replace("≤ ", "≤" + NBSP).replace("≥ ", "≥" + NBSP).replace(" ns", NBSP + "ns")


def note_text(note):
    """A raw row's note, as a reader needs it: the bench's bookkeeping left out, and the notes
    of rows measured where their target does not apply said in a few words."""
    note = (note or "").strip()
    if note in DROPPED_NOTES or note.startswith("stretch"):
        return ""
    if re.fullmatch(r"target .* at normal; here fsync-bound", note):
        return "bound by the disk's sync"
    if re.fullmatch(r"(target .* at normal; )?full on tmpfs.*", note):
        return "no sync cost on tmpfs"
    for said in ("; information", ": information"):
        if note.endswith(said):
            note = note[: -len(said)]
    if note.startswith("information: "):
        note = note[len("information: "):]
    return note


def table(header, rows, hoist=("operation", "contender")):
    """A Markdown table. A column empty in every row is left out; a column of `hoist` with the
    same value in every row (of several) is said once, in a line above the table, instead."""
    keep = [i for i in range(len(header)) if any(str(r[i]).strip() for r in rows)]
    said = []
    if len(rows) > 1:
        for i in list(keep):
            if header[i] in hoist and len({str(r[i]) for r in rows}) == 1:
                keep.remove(i)
                value = str(rows[0][i])
                code = header[i] == "operation" and re.fullmatch(r"\w+(\(\w*\))?", value)
                said.append("%s: %s" % (header[i], "`%s`" % value if code else value))
    out = [("; ".join(said) + ".")[0].upper() + ("; ".join(said) + ".")[1:], ""] if said else []
    out += ["| " + " | ".join(header[i] for i in keep) + " |",
            "|" + "|".join("---" for _ in keep) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(r[i]) for i in keep) + " |")
    return out


# --- SQLite through the C ABI (abi.json) -------------------------------------------------------

def figs(r):
    return {f.strip() for f in r.get("fig", "").split(",") if f.strip()}


#: The C ABI's rows, a table each: (title, what it races, which rows). A row goes to the first
#: group that takes it; "Other measurements" takes the rest.
ABI_GROUPS = [
    ("A merge write against the raw write floor",
     "`set_state` with a patch that changes two members (a scalar and a nested field), against "
     "`BEGIN IMMEDIATE; UPDATE kv SET v = ?; COMMIT` of the very bytes our merge produced: the "
     "least any write of the merged state can cost.",
     lambda r: "1" in figs(r)),
    ("A merge write against SQLite's `json_patch`",
     "The same patch, merged by SQLite itself: `UPDATE kv SET v = json_patch(v, ?)`.",
     lambda r: "2" in figs(r)),
    ("A merge write against a read-merge-write in Rust",
     "The same patch, merged by hand: read the row, parse it with serde_json, merge, write it back.",
     lambda r: r["alternative"].startswith("serde_json")),
    ("Replacing the whole state",
     "`replace_state` against `UPDATE kv SET v = json(?)` (SQLite parses, validates and minifies "
     "the text too), and against the raw write of the same bytes.",
     lambda r: r["op"] == "replace_state"),
    ("The change log's cost",
     "`set_state` with the change log on (keeping the last 1,000 changes) against the same writes "
     "with it off.",
     lambda r: "4" in figs(r)),
    ("A patch as large as the state",
     "A patch that repeats the whole state with two members changed, against `replace_state` of "
     "the result.",
     lambda r: "5" in figs(r)),
    ("A member added deeper in the state",
     "Each write adds one ~200-byte member 1, 2 or 4 levels down in a state kept nested "
     "(`{\"status\":..,\"msgs\":{..}}` and deeper), 300 writes from the size given: what a write "
     "costs there, against the same member added at the top level of a state of the same size.",
     lambda r: r["op"].startswith("set_state, +1 member") and r["op"].endswith(" down")),
    ("Appending to a list",
     "A conversation (`{\"status\":..,\"messages\":[...]}`, each message an object of ~200 bytes) "
     "grows by one message per write from the size given: `patch_state` with one JSON Patch "
     "operation (`add` at `/messages/-`) against the same from 1 KiB, and against what a user "
     "must do without JSON Patch, `set_state` of the whole list with the new message at its end "
     "(RFC 7396).",
     lambda r: r["op"].startswith("patch_state, append")),
    ("A growing state",
     "Each write adds one ~200-byte member, so the state grows from the size given: what a write "
     "costs at that size, against the same from 1 KiB and against the raw write of the merged "
     "state.",
     lambda r: r["op"].startswith("set_state, +1 member")),
    ("Reads",
     "`get_state` against a prepared `SELECT` and against copying the bytes (`memcpy`), on a hot "
     "handle, and from two threads at once.",
     lambda r: r["op"].startswith("get_state") and "agents in a file" not in r["op"]),
]


def abi_section(abi, lines):
    rows = list(abi.get("rows", []))
    if not rows:
        return
    groups = [(t, d, []) for t, d, _ in ABI_GROUPS] + [("Other measurements", "", [])]
    for r in rows:
        for (title, desc, take), group in zip(ABI_GROUPS + [(None, None, lambda r: True)], groups):
            if take(r):
                group[2].append(r)
                break
    order_dir = {"disk": 0, "tmpfs": 1}
    order_sync = {"normal": 0, "full": 1}
    lines += ["### SQLite, through the C ABI", ""]
    for title, desc, grp in groups:
        if not grp:
            continue
        grp.sort(key=lambda r: (r["op"], order_dir.get(r["dir"], 2), order_sync.get(r["sync"], 2),
                                r["size"]))
        lines += ["#### " + title, ""]
        if desc:
            lines += [desc, ""]
        body = []
        for r in grp:
            goal = r.get("goal")
            body.append((r["op"], size_text(r["size"]) if r["size"] > 2 else "",
                         "%s,%s%s" % (r["dir"], NBSP, r["sync"]), ns_text(r["ours_ns"]), r["alternative"],
                         ns_text(r["alt_ns"]), ratio_text(r["ratio"]),
                         target_text(r.get("target"), goal), note_text(r.get("note"))))
        lines += table(["operation", "state", "where", "agent_state", "contender", "contender's",
                        "ratio", "target", "note"], body)
        lines.append("")
    if "rss_kib_after_first" in abi:
        lines += ["#### Memory", "",
                  "Resident memory over %s `get_state` + `set_state` pairs on a 16 KiB state: "
                  "%s KiB after the first %s pairs, %s KiB at the end." % (
                      "{:,}".format(abi["rss_total_ops"]), "{:,}".format(abi["rss_kib_after_first"]),
                      "{:,}".format(abi["rss_first_ops"]), "{:,}".format(abi["rss_kib_after_total"])),
                  ""]


# --- PostgreSQL through the C ABI (postgres.json) ----------------------------------------------

def postgres_section(pg, lines):
    rows = pg.get("rows", [])
    if not rows:
        return
    lines += ["### PostgreSQL, through the C ABI", "",
              "A throwaway server on a Unix socket; the floor is a prepared "
              "`UPDATE .. SET state = $2, version = version + 1 WHERE agent_id = $1 AND version = $3` "
              "of the same bytes through the same client crate.", ""]
    body = [(r["op"], size_text(r["size"]) if r["size"] else "", r.get("sync", ""),
             ns_text(r["ours_ns"]), r["alternative"], ns_text(r["alt_ns"]), ratio_text(r["ratio"]),
             target_text(r.get("target"), r.get("goal")), note_text(r.get("note"))) for r in rows]
    lines += table(["operation", "state", "synchronous", "agent_state", "contender", "contender's",
                    "ratio", "target", "note"], body)
    lines.append("")
    tp = pg.get("throughput", [])
    if tp:
        lines += ["Throughput of %d processes writing %d agents each (commits per second):" % (
            tp[0]["processes"], tp[0]["agents_per_process"]), ""]
        lines += table(["synchronous", "agent_state", "floor", "agent_state / floor"],
                       [(t["sync"], "{:,.0f}".format(t["ours_commits_per_s"]),
                         "{:,.0f}".format(t["floor_commits_per_s"]),
                         ratio_text(t["ours_commits_per_s"] / t["floor_commits_per_s"]))
                        for t in tp])
        lines.append("")
    b = pg.get("bytes_per_write")
    if b:
        lines += ["Bytes sent to the server per `set_state` of a two-member patch (%d B) on a "
                  "%s state, counted by a proxy between client and server: %s B (mean of %d "
                  "writes; the target is under the patch + %s B)." % (
                      b["patch_bytes"], size_text(b["state_bytes"]),
                      "{:,.0f}".format(b["bytes_per_write"]), b["writes"],
                      "{:,}".format(b["allowance"])), ""]
    a = pg.get("bytes_per_append")
    if a and a.get("runs"):
        lines += ["Bytes sent to the server per append of one ~200-byte message to a conversation's "
                  "list (the JSON Patch operation: %.0f B), counted by the same proxy over %d appends "
                  "from each size (the full states sent as new bases included); the target is that "
                  "from 256 KiB an append sends beyond its operation at most %s× what one from 1 KiB "
                  "sends beyond it (here at most %s B):" % (
                      a["operation_bytes"], a["appends"], number(a["slack"]),
                      "{:,.0f}".format(a["limit"])), ""]
        lines += table(["state", "JSON Patch, mean", "median", "largest", "RFC 7396, mean"],
                       [("%s to %s" % (size_text(r["state_bytes"]), size_text(r["end_bytes"])),
                         "{:,.0f} B".format(r["mean"]), "{:,.0f} B".format(r["median"]),
                         "{:,} B".format(r["max"]), "{:,.0f} B".format(r["merge_mean"]))
                        for r in a["runs"]])
        lines.append("")


# --- Python (python.json) ----------------------------------------------------------------------

def python_section(py, lines):
    if not py:
        return
    lines += ["### Python", ""]
    versus = [r for r in py if "hand_rolled_s" in r]
    if versus:
        lines += ["The binding (`Agent`) against the same work with `sqlite3`, `json` and a merge "
                  "function, `synchronous = NORMAL`, on disk.", ""]
        lines += table(["operation", "state", "agent_state", "sqlite3 + json + merge", "ratio", "target"],
                       [(r["op"], size_text(r["size"]), ns_text(r["ours_s"] * 1e9),
                         ns_text(r["hand_rolled_s"] * 1e9), ratio_text(r["ratio"]),
                         target_text(r.get("target"))) for r in versus])
        lines.append("")
    over = [r for r in py if r.get("kind") == "binding_overhead"]
    if over:
        lines += ["The binding's own cost per call: the `Agent` call minus the bare C call it makes "
                  "(same bytes, same agent; SQLite on disk, `synchronous = NORMAL`).", ""]
        lines += table(["operation", "state", "Agent", "bare C call", "the binding's cost", "target"],
                       [(r["op"], size_text(r["size"]), ns_text(r["python_s"] * 1e9),
                         ns_text(r["bare_s"] * 1e9), ns_text(r["overhead_s"] * 1e9),
                         "≤" + NBSP + ns_text(r["target_max_s"] * 1e9) if r.get("target_max_s") else "")
                        for r in over])
        lines.append("")
    per_call = [r for r in py if r.get("kind") == "async_per_call"]
    if per_call:
        lines += ["`AsyncAgent`: an awaited call against the sync call, one coroutine awaiting one "
                  "call after another (1 KiB state, SQLite on disk). For scale: the same sync call "
                  "offloaded by hand with `run_in_executor`, and the thread handoff alone (a no-op "
                  "offloaded).", ""]
        lines += table(["operation", "Agent", "AsyncAgent", "ratio", "target", "run_in_executor by hand",
                        "handoff alone"],
                       [(r["op"], ns_text(r["sync_s"] * 1e9), ns_text(r["async_s"] * 1e9),
                         ratio_text(r["ratio"]), "≤" + NBSP + "%s×" % number(r["target_max"]) if r.get("target_max") else "",
                         ns_text(r["offload_s"] * 1e9), ns_text(r["floor_s"] * 1e9)) for r in per_call])
        lines.append("")
    tp = [r for r in py if r.get("kind") == "pg_throughput" and "skipped" not in r]
    if tp:
        n = tp[0]["workers"]
        lines += ["`AsyncAgent` on PostgreSQL: %d coroutines (an `AsyncAgent` each) against %d "
                  "threads (an `Agent` each), each on its own agent of one store, 1 KiB state, "
                  "calls per second." % (n, n), ""]
        lines += table(["operation", "%d coroutines" % n, "%d threads" % n, "coroutines / threads"],
                       [(r["op"], "{:,.0f}".format(r["async_ops_s"]), "{:,.0f}".format(r["threads_ops_s"]),
                         ratio_text(r["ratio"])) for r in tp])
        lines.append("")


# --- Go (go.json) ------------------------------------------------------------------------------

def go_section(go, lines):
    if not isinstance(go, dict) or not (go.get("versus") or go.get("rows")):
        return
    lines += ["### Go", ""]
    if go.get("versus"):
        lines += ["`SetState` with a map, against the read-merge-write a Go user writes with "
                  "`encoding/json` and `database/sql` (over a minimal cgo driver on the system's "
                  "SQLite), `synchronous = NORMAL`, on disk.", ""]
        lines += table(["operation", "state", "agent_state", "contender", "contender's", "ratio", "target"],
                       [(r["op"], size_text(r["size"]), ns_text(r["ours_ns"]), r["alternative"],
                         ns_text(r["alt_ns"]), ratio_text(r["ratio"]), target_text(r.get("target")))
                        for r in go["versus"]])
        lines.append("")
    if go.get("rows"):
        lines += ["The binding's calls on their own:", ""]
        lines += table(["call", "state", "time per call", "note"],
                       [(r["op"], size_text(r["size"]), ns_text(r["ns_per_op"]), r.get("notes", ""))
                        for r in go["rows"]])
        lines.append("")


# --- Node.js (node.json) -----------------------------------------------------------------------

def node_section(node, lines):
    rows = node.get("rows", []) if isinstance(node, dict) else []
    if not rows:
        return
    lines += ["### Node.js", ""]
    versus = [r for r in rows if r.get("part") == "versus"]
    if versus:
        lines += ["`await agent.setState(patch)` and `getState()` against the read-merge-write a "
                  "Node user writes on better-sqlite3 (`BEGIN IMMEDIATE`, `SELECT`, `JSON.parse`, "
                  "an RFC 7396 merge in JavaScript, `JSON.stringify`, `UPDATE`, `COMMIT`), WAL, "
                  "on disk.", ""]
        lines += table(["operation", "state", "synchronous", "agent_state", "better-sqlite3 by hand",
                        "ratio", "target", "note"],
                       [(r["op"], size_text(r["size"]), r.get("synchronous", ""), ns_text(r["ours_s"] * 1e9),
                         ns_text(r["contender_s"] * 1e9), ratio_text(r["ratio"]),
                         target_text(r.get("target")), note_text(r.get("note"))) for r in versus])
        lines.append("")
    promise = [r for r in rows if r.get("part") == "promise"]
    if promise:
        lines += ["What the Promise costs: the awaited call against the addon's blocking call on "
                  "the same agent (cost: awaited / blocking).", ""]
        lines += table(["operation", "state", "awaited", "blocking", "cost", "note"],
                       [(r["op"], size_text(r["size"]), ns_text(r["awaited_s"] * 1e9),
                         ns_text(r["blocking_s"] * 1e9), ratio_text(r["ratio"]),
                         note_text(r.get("note"))) for r in promise])
        lines.append("")
    hot = [r for r in rows if r.get("part") == "hot"]
    if hot:
        lines += ["A hot `getState` (nothing committed since the handle's last read), per call:", ""]
        lines += table(["state", "per call", "target"],
                       [(size_text(r["size"]), ns_text(r["ours_s"] * 1e9),
                         ("≤ %s µs" % number(r["target_us"])).replace(" ", NBSP) if r.get("target_us") else "") for r in hot])
        lines.append("")


# --- agent-state serve under load (live.md) ----------------------------------------------------

def live_section(path, lines):
    try:
        with open(path) as f:
            text = f.read().splitlines()
    except OSError:
        return
    rows = [l for l in text if l.startswith("|")]
    if not rows:
        return
    title = next((l for l in text if l.startswith("### ")), "")
    label = title[title.find("(") + 1:title.rfind(")")] if "(" in title else ""
    lines += ["### `agent-state serve` under load", ""]
    if label:
        lines += ["Live delivery, %s." % label, ""]
    lines += rows + [""]


# --- the stamp and the page ---------------------------------------------------------------------

def fleet_section(out, lines):
    """The fleet's costs in one table, the figures of the sections above and the awaited calls'
    (submit.json, node.json's loop-lag rows) beside their targets (bench/summary.py picks them)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import summary  # noqa: E402 (beside this script)

    rows = summary.fleet_lines(
        load(os.path.join(out, "abi.json")) or {}, load(os.path.join(out, "postgres.json")) or {},
        load(os.path.join(out, "python.json")) or [], load(os.path.join(out, "node.json")) or {},
        load(os.path.join(out, "submit.json")) or {})
    if not rows:
        return
    lines += ["### The fleet's costs", "",
              "PostgreSQL writes against what a user would send by hand, and awaited calls against "
              "the sync ones, with the targets; the sections above hold the same figures in their "
              "context, and the text above the tables says what bounds the rows below their "
              "targets.", ""]
    lines.append("| figure | where | ours | contender's | measured | target |")
    lines.append("|---|---|---|---|---|---|")
    for r in rows:
        lines.append("| %s |" % " | ".join(c.replace(" ", NBSP) if i in (2, 3, 4) else c
                                           for i, c in enumerate(r[:6])))
    lines.append("")


def fleet_watch_section(out, lines):
    """Changes pushed to a fleet (bench/live/fleet.sh's JSON, through bench/summary.py's lines),
    with the targets and without verdicts, as the other tables."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import summary  # noqa: E402 (beside this script)

    rows = summary.fleet_watch_lines(out)
    if all(r[2] == "not run" for r in rows):
        return
    lines += ["### Changes pushed to a fleet", "",
              "`agent-state serve` with one WebSocket watch stream on each agent of the store (one "
              "client process): its CPU time while nothing is written, its threads, on PostgreSQL "
              "the database's transactions meanwhile; then the delivery latency of nested merge "
              "patches written by another process (from the writer's stamp in the patch just "
              "before its commit, to the client's receipt). `bench/live/run.sh --fleet`.", ""]
    lines.append("| figure | backend | measured | target |")
    lines.append("|---|---|---|---|")
    for r in rows:
        lines.append("| %s |" % " | ".join(c.replace(" ", NBSP) if i == 2 else c
                                           for i, c in enumerate(r[:4])))
    lines.append("")


def machine():
    model, cpus = "", 0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                if line.startswith("processor"):
                    cpus += 1
    except OSError:
        pass
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    u = platform.uname()
    cpus = cpus or os.cpu_count() or 0
    return "%s, %d CPU%s, %s%s %s %s" % (model or "an unknown CPU", cpus, "" if cpus == 1 else "s",
                                        os_name + ", " if os_name else "", u.system, u.release,
                                        u.machine)


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def generate(out, date, mach, rev, remark=None):
    lines = [BEGIN, "",
             "<!-- Written by bench/book.py at the end of `make bench`: edit the script, not these lines. -->",
             "",
             "The figures of the last full `make bench` run: %s, on %s, commit `%s`.%s" % (
                 date, mach, rev, " " + remark if remark else ""),
             ""]
    abi_section(load(os.path.join(out, "abi.json")) or {}, lines)
    postgres_section(load(os.path.join(out, "postgres.json")) or {}, lines)
    python_section(load(os.path.join(out, "python.json")) or [], lines)
    go_section(load(os.path.join(out, "go.json")) or {}, lines)
    node_section(load(os.path.join(out, "node.json")) or {}, lines)
    live_section(os.path.join(out, "live.md"), lines)
    fleet_section(out, lines)
    fleet_watch_section(out, lines)
    lines.append(END)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the directory of the run's raw figures (target/bench)")
    ap.add_argument("--page", default=PAGE, help="the page to read (default: docs/src/performance.md)")
    ap.add_argument("--write-to", help="write the rewritten page here instead of over --page")
    ap.add_argument("--date", help="the run's date (default: now, UTC)")
    ap.add_argument("--machine", help="the machine (default: this one's CPU, count and OS)")
    ap.add_argument("--commit", help="the commit measured (default: HEAD)")
    ap.add_argument("--remark", help="a sentence to add after the stamp")
    a = ap.parse_args()
    dest = a.write_to or a.page
    abi = load(os.path.join(a.dir, "abi.json")) or {}
    if abi.get("mode") == "smoke" and os.path.abspath(dest) == os.path.abspath(PAGE):
        print("bench/book.py: %s holds a smoke run's figures, which mean nothing: not written "
              "into the book (--write-to FILE writes them elsewhere)" % a.dir, file=sys.stderr)
        return 1
    with open(a.page) as f:
        page = f.read()
    if BEGIN not in page or END not in page or page.index(BEGIN) > page.index(END):
        print("bench/book.py: %s has no %s ... %s part" % (a.page, BEGIN, END), file=sys.stderr)
        return 1
    date = a.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    part = generate(a.dir, date, a.machine or machine(), a.commit or commit(), a.remark)
    head, rest = page.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = head + part.rstrip("\n") + tail
    tmp = dest + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, dest)
    print("bench/book.py: the figures written into %s" % dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
