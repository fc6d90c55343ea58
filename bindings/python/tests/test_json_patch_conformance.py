"""The public RFC 6902 suite through the Python binding: the cases of
tests/conformance/json_patch/cases.py (generated from ../shared/corpora/json-patch-tests beside
the checkout), each applied to a fresh agent with ``patch_state_json``, as the Rust runner
(crates/agent_state/tests/behaviour/json_patch.rs) applies them. Writes one ``ID STATUS`` line
per case to target/conformance/json-patch/python-BACKEND.txt, which
tests/conformance/json_patch/compare.py holds against the other languages' runs.

Without the corpus the test is skipped (it fails under ``CI=true``, where the corpus is always
there); outside a checkout (no cases.py) it is skipped too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from agent_state import Agent, AgentError

import backends

ROOT = Path(__file__).resolve().parents[3]
CASES_SCRIPT = ROOT / "tests" / "conformance" / "json_patch" / "cases.py"
CORPUS = ROOT.parent / "shared" / "corpora" / "json-patch-tests"
RESULTS = ROOT / "target" / "conformance" / "json-patch"

#: The statuses a case with ``error`` may fail with (a malformed patch, a path that names
#: nothing, a test that does not hold, a duplicate member).
REFUSALS = {"AGENT_ERR_INVALID_ARGUMENT", "AGENT_ERR_PATH", "AGENT_ERR_TEST_FAILED", "AGENT_ERR_CODEC"}


def _cases(tmp_path: Path) -> List[Dict[str, Any]]:
    """The cases, generated into ``tmp_path`` (not the shared target/conformance file, which
    another language's runner may be writing at the same time)."""
    if not CASES_SCRIPT.is_file():
        pytest.skip(f"no {CASES_SCRIPT}: not a checkout of the repository")
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"no RFC 6902 corpus at {CORPUS} (CI has ../shared beside the checkout)")
        pytest.skip(f"no RFC 6902 corpus at {CORPUS}: skipped")
    out = tmp_path / "json-patch-cases.json"
    subprocess.run([sys.executable, str(CASES_SCRIPT), str(out)], check=True, stdout=subprocess.DEVNULL)
    cases: List[Dict[str, Any]] = json.loads(out.read_text("utf-8"))["cases"]
    assert cases, "cases.py wrote no case"
    return cases


def _store(tmp_path: Path, n: int) -> Tuple[Any, Dict[str, Any]]:
    """A fresh agent for case ``n``: its own agent_id in one SQLite file, or on the server."""
    if backends.POSTGRES:
        return backends.server_store()
    return tmp_path / "suite.db", {"agent_id": f"case{n}"}


@pytest.mark.any_backend
def test_the_public_rfc_6902_suite_passes_through_an_agent(tmp_path: Path) -> None:
    cases = _cases(tmp_path)
    lines: List[str] = []
    failures: List[str] = []
    for n, case in enumerate(cases):
        ident = case["id"]
        path, options = _store(tmp_path, n)
        with Agent(path, synchronous="normal", **options) as agent:
            agent.replace_state_json(case["state"])
            before = (agent.get_state_json(), agent.get_state_versioned().version)
            try:
                got = agent.patch_state_json(case["patch"])
            except AgentError as e:
                status, error = e.status_name, e
            else:
                status, error = "AGENT_OK", None
            lines.append(f"{ident} {status}")
            if "expect" in case:
                if error is not None:
                    failures.append(f"{ident}: refused ({error})")
                    continue
                # The library's own equality (numbers by value, members in any order): the
                # one-operation test commits nothing when it holds...
                try:
                    agent.patch_state_json(case["verify"])
                except AgentError as e:
                    failures.append(f"{ident}: got {got}, expected {case['expect']} ({e})")
                # ...and Python's, where numbers compare by value too.
                if json.loads(got) != json.loads(case["expect"]):
                    failures.append(f"{ident}: got {got}, expected {case['expect']}")
                # What was stored is what was returned.
                assert agent.get_state_json() == got, ident
            elif "error" in case:
                if error is None:
                    failures.append(f"{ident}: applied as {got}")
                    continue
                assert status in REFUSALS, f"{ident}: {error}"
                after = (agent.get_state_json(), agent.get_state_versioned().version)
                assert after == before, f"{ident}: a refused patch wrote something"
            elif error is not None:
                failures.append(f"{ident}: refused ({error}), expected to apply")
    assert failures == [], "\n".join(failures)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"python-{backends.BACKEND}.txt").write_text("\n".join(lines) + "\n", "utf-8")
