#!/usr/bin/env python3
"""The documentation's tables of open options and statuses, checked against the surface
description (include/agent_state_surface.json, generated from the core's own definitions).

A table whose header starts `| key | default |` is an options table: its keys must be exactly the
surface's options, in the same order, and each default cell must hold the option's fixed default
(or say where the value comes from, for options without one). A table whose header starts
`| code | name |` is a status table: its rows must be exactly the surface's statuses, number and
name. Other columns (examples, explanations) are prose and not checked.

Usage: check_tables.py FILE...   (exits 1 and says what differs; prints "N passed, N failed").
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SURFACE = json.loads((ROOT / "include" / "agent_state_surface.json").read_text())


def tables(text):
    """Yields (line number, header cells, rows of cells) of each Markdown table in text."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*-", lines[i + 1]):
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append([c.strip() for c in lines[j].strip().strip("|").split("|")])
                j += 1
            yield i + 1, header, rows
            i = j
        else:
            i += 1


def unquote(cell):
    return cell.strip().strip("`")


def check_options(where, rows, problems):
    want = [o["name"] for o in SURFACE["options"]]
    got = [unquote(r[0]) for r in rows]
    if got != want:
        problems.append(f"{where}: options {got}, the surface has {want}")
        return
    for row, option in zip(rows, SURFACE["options"]):
        cell = row[1]
        default = option["default"]
        if default is not None:
            text = json.dumps(default, separators=(",", ":"))
            if text not in cell.replace(" ", "") and not (isinstance(default, bool) and str(default).lower() in cell):
                problems.append(f"{where}: {option['name']}'s default cell {cell!r} does not hold {text}")
        elif not cell or cell == "-":
            problems.append(f"{where}: {option['name']} has no fixed default; say where it comes from")


def check_statuses(where, rows, problems):
    want = [(s["code"], s["name"]) for s in SURFACE["statuses"]]
    got = []
    for r in rows:
        try:
            got.append((int(unquote(r[0])), unquote(r[1])))
        except ValueError:
            problems.append(f"{where}: row {r[:2]} is not a status")
    if got != want:
        problems.append(f"{where}: statuses {got}, the surface has {want}")


def main(paths):
    problems, checked = [], 0
    for path in paths:
        text = pathlib.Path(path).read_text()
        for line, header, rows in tables(text):
            where = f"{path}:{line}"
            key = [h.lower() for h in header[:2]]
            if key == ["key", "default"]:
                check_options(where, rows, problems)
                checked += 1
            elif key == ["code", "name"]:
                check_statuses(where, rows, problems)
                checked += 1
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{checked - len(problems)} passed, {len(problems)} failed")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
