#!/usr/bin/env python3
"""Checks that every language's run of the RFC 6902 cases (cases.py) gave the same statuses.

Each runner writes target/conformance/json-patch/LANG-BACKEND.txt, one `ID STATUS` line per
case. This compares them all, line by line, and lists any case on which two runs disagree. With
`--require LANG,...` (as `make test` calls it) a language whose file is missing is a failure:
every binding must have run the cases on this checkout.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RESULTS = os.path.join(ROOT, "target", "conformance", "json-patch")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--require", default="", help="languages whose runs must be there")
    args = parser.parse_args()
    runs = {}
    if os.path.isdir(RESULTS):
        for name in sorted(os.listdir(RESULTS)):
            if name.endswith(".txt"):
                with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
                    runs[name[:-4]] = [line.split() for line in f if line.strip()]
    problems = []
    languages = {run.split("-")[0] for run in runs}
    for lang in filter(None, args.require.split(",")):
        if lang not in languages:
            problems.append(f"no run of the cases in {lang} (target/conformance/json-patch/{lang}-*.txt)")
    if runs:
        first, reference = next(iter(runs.items()))
        ids = [line[0] for line in reference]
        for run, lines in runs.items():
            if [line[0] for line in lines] != ids:
                problems.append(f"{run}: not the same cases as {first} ({len(lines)} against {len(ids)})")
                continue
            for (ident, want), (_, got) in zip(reference, lines):
                if want != got:
                    problems.append(f"{ident}: {first} says {want}, {run} says {got}")
    for problem in problems:
        print("compare.py:", problem, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"compare.py: {len(runs)} runs of the RFC 6902 cases agree: {', '.join(runs)}")


if __name__ == "__main__":
    main()
