#!/usr/bin/env python3
"""The public RFC 6902 suite as cases every language's runner applies through its binding.

Reads ../shared/corpora/json-patch-tests (tests.json, spec_tests.json) and writes one JSON file
of cases (default target/conformance/json-patch-cases.json; the first argument overrides):

    {"cases": [{"id", "comment", "state", "patch", "expect"?, "verify"?, "error"?}],
     "skipped": [{"id", "reason"}]}

`state` and `patch` are JSON text to pass as they are (a runner never re-encodes them, so
numbers reach the library as the corpus wrote them). A case with `expect` must apply, and its
result must equal `expect` as JSON; `verify` is a one-operation patch (`test` of the whole
state against `expect`) that runners without a JSON equality of their own apply to check it
(it commits nothing when it holds). A case with `error` must fail with nothing written.

A state is a JSON object, so a record whose document (or expected result) is not an object is
run with the document nested under the member "doc": every `path` and `from` gains the prefix
`/doc`, and the expected result is nested the same way. What that changes is said per record in
`skipped`: a record whose meaning depends on the document being the root (removing the whole
document is an error at the root, and not under a member) is skipped, with why.

Every runner writes one line per case, `ID STATUS` (`AGENT_OK` or the `AGENT_ERR_*` name), to
target/conformance/json-patch/LANG-BACKEND.txt; compare.py checks that they all agree.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "corpora", "json-patch-tests")
FILES = ["tests.json", "spec_tests.json"]


def text(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def nest(pointer):
    return "/doc" + pointer


def touches_root(record):
    return any(isinstance(op, dict) and (op.get("path") == "" or op.get("from") == "")
               for op in record["patch"])


def case_of(name, index, record):
    """The case for one record, or (None, reason) when it cannot run as a state."""
    ident = f"{name}#{index}"
    doc = record["doc"]
    direct = isinstance(doc, dict) and (
        "expected" not in record or isinstance(record["expected"], dict))
    patch = record["patch"]
    expect = record.get("expected")
    if not direct:
        if "error" in record and touches_root(record):
            return ident, None, (
                "an error at the document's root (" + record["error"] + ") that the same "
                "operation under a member does not have; a state is always an object")
        if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
            return ident, None, "a malformed patch that nesting cannot rewrite"
        nested = []
        for op in patch:
            op = dict(op)
            for field in ("path", "from"):
                if isinstance(op.get(field), str):
                    op[field] = nest(op[field])
            nested.append(op)
        patch = nested
        doc = {"doc": doc}
        if expect is not None:
            expect = {"doc": expect}
    case = {
        "id": ident,
        "comment": record.get("comment", ""),
        "state": text(doc),
        "patch": text(patch),
    }
    if "error" in record:
        case["error"] = record["error"]
    else:
        # A record with neither `expected` nor `error` only says the patch applies.
        if expect is not None:
            case["expect"] = text(expect)
            case["verify"] = text([{"op": "test", "path": "", "value": expect}])
    return ident, case, None


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "target", "conformance", "json-patch-cases.json")
    if not os.path.isdir(CORPUS):
        sys.exit(f"cases.py: no RFC 6902 corpus at {CORPUS} (../shared beside the checkout)")
    cases, skipped = [], []
    for name in FILES:
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            records = json.load(f)
        for index, record in enumerate(records):
            if record.get("disabled"):
                continue
            ident, case, reason = case_of(name, index, record)
            if case is None:
                skipped.append({"id": ident, "reason": reason})
            else:
                cases.append(case)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"cases": cases, "skipped": skipped}, f, ensure_ascii=False, indent=0)
    print(f"cases.py: {len(cases)} cases, {len(skipped)} skipped -> {out}")


if __name__ == "__main__":
    main()
