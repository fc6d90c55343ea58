#!/usr/bin/env python3
"""Runs the code examples of the repository's READMEs (`make test-readme`; tests/readme/run.sh
prepares the environment and calls this).

Every fenced code block (``` or ~~~) of the tracked Markdown READMEs (`git ls-files
'*README.md'`) and of crates/agent-state-serve/PROTOCOL.md is read. The first word of a
block's info string is its language, the other words (separated by spaces or commas) its
markers. By language:

  c             compiled with `cc -std=c99 -Wall -Wextra -Werror -Iinclude ... -lagent_state`
                (target/release's library, through an rpath) and run;
  cpp, c++      compiled with `c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -Ibindings/cpp`,
                linked likewise, and run;
  python        run with the interpreter in $README_PYTHON (run.sh: target/pyvenv's, where the
                binding is installed as a package);
  go            written as main.go of a directory of one temporary module, whose go.mod
                replaces the binding's module path with bindings/go (`package main` is added
                when the block has no package clause), built with the GOFLAGS of
                bindings/go/goenv.sh (tag agentstate_inrepo: the checkout's library), and run;
  ts, typescript
                written as example.mts in a directory beside a node_modules/agent-state symlink
                to bindings/node (the package as a user installs it), type-checked and compiled
                with the TypeScript compiler of bindings/node/node_modules (run.sh runs
                `npm ci` there when it is missing) under --strict, as an ES
                module (module NodeNext: top-level await works, `import { Agent } from
                "agent-state"` resolves to index.d.ts and index.js), then run with node;
  rust          not run here: crates/agent_state/README.md's rust blocks are the crate's doc
                tests (lib.rs includes the README under #[cfg(doctest)]; `cargo test` runs
                them), which this script only checks are wired; a rust block in another README
                is listed as not run, unless it is a copy of one of those (rustdoc's hidden
                "# " lines aside) or marked fragment;
  sh, bash, shell
                in the book's pages only: run with `bash -euo pipefail`, target/release (the
                agent-state command) and the Python environment's bin first on PATH (install
                commands and other set-up lines are marked fragment); in a README not run;
  anything else (console, text, js, json, toml, no language): not run.

Each run of a block happens in a fresh temporary directory of its own (removed afterwards;
--keep keeps them), so an example that creates conv.db finds none, and the whole run can be
repeated.

Markers, after the language (```python fragment):

  fragment   the block is not a whole program (a signature list, an excerpt that uses names it
             does not define, a shell session): not run, counted as a fragment;
  postgres   the block needs a PostgreSQL server and reads its URI from the environment
             variable DATABASE_URL: run only when AGENT_STATE_TEST_PG_URI is set (then
             DATABASE_URL is that URI), otherwise counted as skipped;
  twice      the block shows what persists: run twice, in the same directory; both must pass.

An unknown marker on a block of a language that runs is an error (a typo would otherwise
silently skip a block). rustdoc's own (rust,ignore / rust,no_run) are rust's business.

The run fails when any block fails, and when a file of REQUIRED below has no runnable block
(every block of a runnable language marked fragment). Per file it prints how many blocks ran
(passed, failed), how many are fragments, how many were skipped and how many are of a language
that is not run; it ends with the line "N passed, N failed, N skipped".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

# Files that must keep at least one runnable example (a block in c, cpp, python, go or ts that
# is not a fragment): if all of them were marked fragment the check would test nothing.
REQUIRED = (
    "README.md",
    "bindings/cpp/README.md",
    "bindings/python/README.md",
    "bindings/go/README.md",
    "bindings/node/README.md",
)
# The book's getting-started pages, one a language: each keeps a runnable example too (the Rust
# page's run as doc tests, which check_doctests requires).
REQUIRED += tuple(f"docs/src/getting-started/{lang}.md" for lang in ("c", "cpp", "python", "go", "node"))
# Besides the READMEs: Markdown files whose code blocks are read too (and the book's pages,
# docs/src/**/*.md, every one: tracked_files).
EXTRA_FILES = ("crates/agent-state-serve/PROTOCOL.md",)
BOOK = "docs/src/"
# The README whose rust blocks are the core crate's doc tests, and the file that includes it. A
# page of the book with rust blocks runs them the same way: lib.rs includes it under
# #[cfg(doctest)] by its path relative to lib.rs (check_doctests).
CRATE_README = "crates/agent_state/README.md"
CRATE_LIB = "crates/agent_state/src/lib.rs"

LANGUAGES = {"c": "c", "cpp": "cpp", "c++": "cpp", "python": "python", "go": "go", "ts": "ts", "typescript": "ts"}
# Shell blocks run in the book only (a README's shell lines are set-up commands: make, pip,
# npm): with bash -euo pipefail, the checkout's `agent-state` command and the Python binding's
# interpreter first on PATH.
SHELLS = {"sh": "sh", "bash": "sh", "shell": "sh"}
MARKERS = {"fragment", "postgres", "twice"}
GO_MODULE = "github.com/agent-state/agent-state/bindings/go"
NODE_PACKAGE = os.path.join("bindings", "node")  # the npm package agent-state
# The compiler options of a ts block: the package's own checks (bindings/node/tsconfig.json), as
# an ES module of Node's (NodeNext), so that an example may await at its top level.
TS_OPTIONS = {
    "strict": True,
    "noImplicitOverride": True,
    "noUnusedLocals": True,
    "noUnusedParameters": True,
    "noFallthroughCasesInSwitch": True,
    "forceConsistentCasingInFileNames": True,
    "target": "ES2022",
    "lib": ["ES2022", "ESNext.Disposable"],
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "types": ["node"],
    "skipLibCheck": False,
}
TIMEOUT = 120  # seconds, per compilation and per run


@dataclasses.dataclass
class Block:
    path: str  # relative to the repository's root
    line: int  # the opening fence's line, from 1
    info: str  # the info string as written
    lang: str  # the first word, lower case
    markers: List[str]
    code: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclasses.dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    fragments: int = 0
    skipped: int = 0
    checks_failed: int = 0  # a file's checks: a README of REQUIRED without a runnable block, ...
    not_run: Dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def runnable(self) -> int:
        return self.passed + self.failed + self.skipped


FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def read_blocks(root: str, path: str) -> List[Block]:
    """The fenced code blocks of one Markdown file, CommonMark's way: a closing fence is the
    same character, at least as long, with nothing after it; a fence may be indented (inside a
    list item), and that indentation is taken off the block's lines."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        start = i
        body = []
        i += 1
        while i < len(lines):
            c = FENCE.match(lines[i])
            if c and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) and not c.group(3).strip():
                break
            line = lines[i]
            strip = len(line) - len(line.lstrip(" "))
            body.append(line[min(indent, strip):])
            i += 1
        i += 1  # past the closing fence (or the end of the file, which closes the block)
        words = [w for w in re.split(r"[\s,]+", info) if w]
        lang = words[0].lower() if words else ""
        blocks.append(Block(path, start + 1, info, lang, [w.lower() for w in words[1:]], "\n".join(body) + "\n"))
    return blocks


def tracked_files(root: str) -> List[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", "*README.md"], cwd=root, check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    files = sorted(p for p in out.split("\0") if p)
    files += [p for p in EXTRA_FILES if os.path.isfile(os.path.join(root, p))]
    book = subprocess.run(["git", "ls-files", "-z", "--", BOOK + "*.md"], cwd=root, check=True,
                          stdout=subprocess.PIPE).stdout.decode()
    files += sorted(p for p in book.split("\0") if p and p != BOOK + "SUMMARY.md")
    return files


def tail(text: str, n: int = 60) -> str:
    lines = text.rstrip("\n").split("\n")
    if len(lines) > n:
        lines = [f"... ({len(lines) - n} lines above)"] + lines[-n:]
    return "\n".join("    | " + line for line in lines)


def numbered(code: str) -> str:
    return "\n".join(f"    {k:3} {line}" for k, line in enumerate(code.rstrip("\n").split("\n"), 1))


class Runner:
    def __init__(self, root: str, args: argparse.Namespace):
        self.root = root
        self.args = args
        self.lib_dir = os.path.join(root, "target", "release")
        self.pg_uri = os.environ.get("AGENT_STATE_TEST_PG_URI") or None
        self.python = args.python or os.environ.get("README_PYTHON") or sys.executable
        self.go_module_dir: Optional[str] = None
        self.go_count = 0
        self.ts_dir: Optional[str] = None
        self.ts_count = 0
        self.temp_root = tempfile.mkdtemp(prefix="agent-state-readme.")

    def close(self) -> None:
        if self.args.keep:
            print(f"kept: {self.temp_root}")
        else:
            shutil.rmtree(self.temp_root, ignore_errors=True)

    def new_dir(self, block: Block, what: str) -> str:
        name = re.sub(r"[^A-Za-z0-9]+", "_", f"{block.path}_{block.line}_{what}")
        return tempfile.mkdtemp(prefix=name + ".", dir=self.temp_root)

    def env(self, block: Block) -> Dict[str, str]:
        env = dict(os.environ)
        env.pop("DATABASE_URL", None)
        if block.lang == "sh":
            env["PATH"] = os.pathsep.join([self.lib_dir, os.path.dirname(self.python), env.get("PATH", "")])
        if "postgres" in block.markers and self.pg_uri:
            env["DATABASE_URL"] = self.pg_uri
        return env

    def command(self, argv: List[str], cwd: str, env: Dict[str, str]) -> Tuple[bool, str]:
        try:
            p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            return False, f"{out}\n(timed out after {TIMEOUT} s: {' '.join(argv)})"
        except OSError as e:
            return False, f"cannot run {argv[0]}: {e}"
        out = p.stdout.decode(errors="replace")
        if p.returncode != 0:
            return False, f"{out}\n(exit status {p.returncode}: {' '.join(argv)})"
        return True, out

    # Each build returns (argv to run, or None and the failure's output).
    def build_c(self, block: Block, work: str, env: Dict[str, str]) -> Tuple[Optional[List[str]], str]:
        if block.lang == "c":
            src, compiler = "example.c", [os.environ.get("CC", "cc"), "-std=c99"]
        else:
            src, compiler = "example.cpp", [os.environ.get("CXX", "c++"), "-std=c++17",
                                             "-I" + os.path.join(self.root, "bindings", "cpp")]
        with open(os.path.join(work, src), "w", encoding="utf-8") as f:
            f.write(block.code)
        argv = compiler + ["-Wall", "-Wextra", "-Werror", "-I" + os.path.join(self.root, "include"), src,
                           "-o", "example", "-L" + self.lib_dir, "-Wl,-rpath," + self.lib_dir, "-lagent_state"]
        ok, out = self.command(argv, work, env)
        return ([os.path.join(work, "example")], out) if ok else (None, out)

    def build_python(self, block: Block, work: str, env: Dict[str, str]) -> Tuple[Optional[List[str]], str]:
        with open(os.path.join(work, "example.py"), "w", encoding="utf-8") as f:
            f.write(block.code)
        return [self.python, os.path.join(work, "example.py")], ""

    def build_go(self, block: Block, work: str, env: Dict[str, str]) -> Tuple[Optional[List[str]], str]:
        # One module for every Go block of the run, a directory (package main) per block: the
        # binding's cgo package is compiled once and each block costs a link.
        if self.go_module_dir is None:
            self.go_module_dir = os.path.join(self.temp_root, "gomodule")
            os.makedirs(self.go_module_dir)
            with open(os.path.join(self.go_module_dir, "go.mod"), "w", encoding="utf-8") as f:
                f.write(f"module readme.example/blocks\n\ngo 1.19\n\nrequire {GO_MODULE} v0.0.0\n\n"
                        f"replace {GO_MODULE} => {os.path.join(self.root, 'bindings', 'go')}\n")
        self.go_count += 1
        pkg = f"block{self.go_count:03d}"
        os.makedirs(os.path.join(self.go_module_dir, pkg))
        code = block.code
        if not re.search(r"^\s*package\s+\w+", code, re.M):
            code = "package main\n\n" + code
        with open(os.path.join(self.go_module_dir, pkg, "main.go"), "w", encoding="utf-8") as f:
            f.write(f"// {block.where}\n" + code)
        binary = os.path.join(self.go_module_dir, "bin", pkg)
        ok, out = self.command(["go", "build", "-o", binary, "./" + pkg], self.go_module_dir, env)
        return ([binary], out) if ok else (None, out)

    def build_ts(self, block: Block, work: str, env: Dict[str, str]) -> Tuple[Optional[List[str]], str]:
        # One directory for every ts block of the run, holding node_modules/agent-state (a
        # symlink to the package in the checkout), a directory per block: the compiler and Node
        # both find the package by its name, as in a project that installed it.
        package = os.path.join(self.root, NODE_PACKAGE)
        tsc = os.path.join(package, "node_modules", "typescript", "bin", "tsc")
        if not os.path.isfile(tsc):
            return None, (f"{tsc} is missing: tests/readme/run.sh installs the package's devDependencies "
                          f"(npm ci in {NODE_PACKAGE})")
        if self.ts_dir is None:
            self.ts_dir = os.path.join(self.temp_root, "ts")
            os.makedirs(os.path.join(self.ts_dir, "node_modules"))
            os.symlink(package, os.path.join(self.ts_dir, "node_modules", "agent-state"))
        self.ts_count += 1
        block_dir = os.path.join(self.ts_dir, f"block{self.ts_count:03d}")
        os.makedirs(block_dir)
        with open(os.path.join(block_dir, "example.mts"), "w", encoding="utf-8") as f:
            f.write(block.code)  # as is: the compiler's line numbers are the block's
        options = dict(TS_OPTIONS, typeRoots=[os.path.join(package, "node_modules", "@types")], outDir="out",
                       rootDir=".")
        with open(os.path.join(block_dir, "tsconfig.json"), "w", encoding="utf-8") as f:
            json.dump({"compilerOptions": options, "files": ["example.mts"]}, f, indent=2)
        ok, out = self.command(["node", tsc, "-p", "tsconfig.json", "--pretty", "false"], block_dir, env)
        return (["node", os.path.join(block_dir, "out", "example.mjs")], out) if ok else (None, out)

    def build_sh(self, block: Block, work: str, env: Dict[str, str]) -> Tuple[Optional[List[str]], str]:
        with open(os.path.join(work, "example.sh"), "w", encoding="utf-8") as f:
            f.write(block.code)
        return ["bash", "-euo", "pipefail", os.path.join(work, "example.sh")], ""

    def run_block(self, block: Block) -> Tuple[bool, str]:
        env = self.env(block)
        build_dir = self.new_dir(block, "build")
        builder = {"c": self.build_c, "cpp": self.build_c, "python": self.build_python, "go": self.build_go,
                   "ts": self.build_ts, "sh": self.build_sh}
        argv, out = builder[LANGUAGES.get(block.lang, block.lang)](block, build_dir, env)
        if argv is None:
            return False, "build failed:\n" + tail(out)
        run_dir = self.new_dir(block, "run")
        outputs = []
        for k in range(2 if "twice" in block.markers else 1):
            ok, out = self.command(argv, run_dir, env)
            outputs.append(out)
            if not ok:
                return False, (f"run {k + 1} failed:\n" if k else "run failed:\n") + tail(out)
        return True, "\n".join(outputs)


def rust_visible(code: str) -> str:
    """A rust block as rustdoc shows it: without its hidden lines ("# ..." and "#")."""
    return "\n".join(line for line in code.split("\n") if not re.match(r"^\s*#(\s|$)", line))


def doctest_include(path: str) -> str:
    """How lib.rs includes the Markdown file at path (relative to the root) as doc tests."""
    return f'include_str!("{os.path.relpath(path, os.path.dirname(CRATE_LIB))}")'


def check_doctests(root: str, path: str, blocks: List[Block]) -> Optional[str]:
    """The rust blocks of crates/agent_state/README.md and of the book's pages run as the core
    crate's doc tests only if lib.rs includes the file under #[cfg(doctest)]: a failure message
    when the file has rust blocks (not fragments) and lib.rs does not include it."""
    if not any(b.lang == "rust" and "fragment" not in b.markers for b in blocks):
        return None
    try:
        with open(os.path.join(root, CRATE_LIB), encoding="utf-8") as f:
            lib = f.read()
    except OSError as e:
        return f"{CRATE_LIB}: {e}"
    include = doctest_include(path)
    if include not in lib or "cfg(doctest)" not in lib:
        return (f"{path} has rust blocks, but {CRATE_LIB} does not include it under "
                f"#[cfg(doctest)] (#[doc = {include}]): they would run nowhere")
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    parser.add_argument("--python", help="the interpreter for python blocks (default: $README_PYTHON)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="print what passing blocks print")
    parser.add_argument("--list", action="store_true", help="list the blocks and what would be done, run none")
    parser.add_argument("files", nargs="*", help="only these files (relative to the root)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)

    files = args.files or tracked_files(root)
    runner = Runner(root, args)
    totals = Counts()
    problems: List[str] = []
    # A rust block elsewhere that is a copy of one of the crate README's runs as its doc test.
    crate_rust = {rust_visible(b.code) for b in read_blocks(root, CRATE_README) if b.lang == "rust"} \
        if os.path.isfile(os.path.join(root, CRATE_README)) else set()
    try:
        for path in files:
            blocks = read_blocks(root, path)
            counts = Counts()
            for block in blocks:
                lang = LANGUAGES.get(block.lang)
                if lang is None and path.startswith(BOOK) and block.lang in SHELLS:
                    lang = block.lang = "sh"
                if not block.lang and path.startswith(BOOK):
                    # rustdoc, which runs the book's rust blocks, takes a fence without a
                    # language for Rust: each says what it holds (text, sh, json, ...).
                    counts.failed += 1
                    problems.append(f"{block.where}: a block of the book without a language")
                    print(f"FAIL {block.where}: a block of the book without a language (text, sh, json, ...)")
                    continue
                if lang is None:
                    key = block.lang or "no language"
                    if block.lang == "rust" and "fragment" not in block.markers and \
                            (path == CRATE_README or path.startswith(BOOK)):
                        key = "rust (doc tests)"
                    elif block.lang == "rust" and rust_visible(block.code) in crate_rust:
                        key = "rust (a copy of a doc test)"
                    elif block.lang == "rust" and "fragment" in block.markers:
                        counts.fragments += 1
                        continue
                    elif block.lang == "rust":
                        print(f"not run: {block.where}: a rust block outside {CRATE_README}")
                    counts.not_run[key] = counts.not_run.get(key, 0) + 1
                    continue
                unknown = [m for m in block.markers if m not in MARKERS]
                if unknown:
                    counts.failed += 1
                    problems.append(f"{block.where}: unknown marker(s) {' '.join(unknown)} in ```{block.info}")
                    print(f"FAIL {block.where} ```{block.info}: unknown marker(s) {' '.join(unknown)}"
                          f" (known: {', '.join(sorted(MARKERS))})")
                    continue
                if "fragment" in block.markers:
                    counts.fragments += 1
                    continue
                if "postgres" in block.markers and not runner.pg_uri:
                    counts.skipped += 1
                    print(f"skip {block.where} ```{block.info}: needs a PostgreSQL server (AGENT_STATE_TEST_PG_URI unset)")
                    continue
                if args.list:
                    counts.passed += 1
                    print(f"run  {block.where} ```{block.info}")
                    continue
                ok, out = runner.run_block(block)
                if ok:
                    counts.passed += 1
                    print(f"ok   {block.where} ```{block.info}")
                    if args.verbose and out.strip():
                        print(tail(out))
                else:
                    counts.failed += 1
                    problems.append(f"{block.where} ```{block.info}")
                    print(f"FAIL {block.where} ```{block.info}: {out}")
                    print("  the block:")
                    print(numbered(block.code))
            if path == CRATE_README or path.startswith(BOOK):
                msg = check_doctests(root, path, blocks)
                if msg:
                    counts.checks_failed += 1
                    problems.append(msg)
                    print("FAIL " + msg)
            if path in REQUIRED and counts.runnable == 0:
                counts.checks_failed += 1
                problems.append(f"{path}: no runnable example (every c, cpp, python, go and ts block is a fragment)")
                print(f"FAIL {path}: no runnable example left (it is in REQUIRED of tests/readme/run.py)")
            not_run = ", ".join(f"{k} {v}" for k, v in sorted(counts.not_run.items()))
            print(f"{path}: {counts.passed + counts.failed} ran ({counts.passed} passed, {counts.failed} failed), "
                  f"{counts.fragments} fragments, {counts.skipped} skipped"
                  + (f"; not run: {not_run}" if not_run else "")
                  + (f"; {counts.checks_failed} check(s) failed" if counts.checks_failed else ""))
            totals.passed += counts.passed
            totals.failed += counts.failed + counts.checks_failed
            totals.fragments += counts.fragments
            totals.skipped += counts.skipped
    finally:
        runner.close()
    if problems:
        print("\nfailed:")
        for p in problems:
            print("  " + p)
    print(f"{totals.fragments} fragments not run")
    print(f"{totals.passed} passed, {totals.failed} failed, {totals.skipped} skipped")
    return 1 if totals.failed else 0


if __name__ == "__main__":
    sys.exit(main())
