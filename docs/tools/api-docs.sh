#!/usr/bin/env bash
# The API documentation of each language, beside the book: docs/tools/api-docs.sh OUT_DIR
# (docs/build.sh runs it with target/book/api; the book's reference/api-docs.md links here).
#
#   OUT_DIR/rust/    cargo doc --no-deps of the published crates (agent_state, agent_state_value,
#                    agent_state_ffi: those without `publish = false`), warnings as errors, in a
#                    target directory of its own (target/api-docs) so no other crate's docs mix in
#   OUT_DIR/python/  pdoc of the package agent_state (pdoc is installed into target/pyvenv,
#                    bindings/python/venv.sh's environment, once); any warning but the known
#                    ones below fails the run
#   OUT_DIR/go/      `go doc -all` of the package, as one HTML page (no doc host is assumed)
#   OUT_DIR/cpp/     bindings/cpp/agent_state.hpp and the parts it includes, as one HTML page
#   OUT_DIR/node/    bindings/node/index.d.ts (the package's types and their comments), as one
#                    HTML page
#
# Every part is cached after the first run: cargo doc and pip have nothing to do when nothing
# changed, pdoc and go doc take a second or two.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: docs/tools/api-docs.sh OUT_DIR" >&2
    exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
cd "$root"
rm -rf "$out/rust" "$out/python" "$out/go" "$out/cpp" "$out/node"
PDOC_VERSION=16.0.0

# A plain text file as an HTML page: a title and the text, escaped, in a <pre>.
text_page() { # TITLE SOURCE-NOTE < TEXT > HTML
    python3 -c '
import html, sys
title, note = sys.argv[1], sys.argv[2]
text = sys.stdin.read()
print("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      f"<title>{html.escape(title)}</title>\n"
      "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
      "pre{font-size:0.9rem;line-height:1.35;white-space:pre-wrap}</style>\n</head>\n<body>\n"
      f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(note)}</p>\n"
      f"<pre>{html.escape(text)}</pre>\n</body>\n</html>")
' "$1" "$2"
}

# --- Rust -----------------------------------------------------------------------------------
echo "api-docs.sh: rust (cargo doc)"
RUSTDOCFLAGS="-D warnings -D rustdoc::broken_intra_doc_links" \
    cargo doc --quiet --no-deps --target-dir target/api-docs \
    -p agent_state -p agent_state_value -p agent_state_ffi
cp -r target/api-docs/doc "$out/rust"

# --- Python ---------------------------------------------------------------------------------
echo "api-docs.sh: python (pdoc)"
# shellcheck source=../../bindings/python/venv.sh
. bindings/python/venv.sh
if ! "$PY" -m pdoc --version 2>/dev/null | grep -qx "pdoc: $PDOC_VERSION"; then
    echo "api-docs.sh: installing pdoc $PDOC_VERSION into $VENV (once)"
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install --quiet "pdoc==$PDOC_VERSION"
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# Run outside the source tree, so the installed package (the one users get) is documented.
if ! (cd / && "$PY" -m pdoc --docformat restructuredtext --no-show-source \
    --footer-text "agent_state $(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)" \
    -o "$out/python" agent_state) >"$log" 2>&1; then
    cat "$log" >&2
    echo "api-docs.sh: pdoc failed (above)" >&2
    exit 1
fi
# What pdoc cannot do, not what the docstrings get wrong; anything else fails the run:
#  - a NamedTuple's generated __init__, whose string annotations (from __future__ import
#    annotations) it evaluates outside the record's module;
#  - array.array[Any], an annotation that Python < 3.12 cannot evaluate at run time;
#  - the keys a TypedDict (OpenOptions) inherits from another (ConnectionOptions).
known='^Warn: (Error parsing type annotation .* for agent_state\.(Change|Versioned|LoggedChange|AgentInfo)\.__init__\.'
known+='|Error parsing type annotation .array\.array\[Any\]. for agent_state\.TypedArray\.(from|to)_array:'
known+='|Cannot determine where agent_state\.OpenOptions\.\w+ is taken from)'
if grep -vE "$known" "$log" | grep -q .; then
    grep -vE "$known" "$log" >&2
    echo "api-docs.sh: pdoc printed warnings (above); the Python package's docs build without any" >&2
    exit 1
fi
if [[ ! -f "$out/python/agent_state.html" ]]; then
    echo "api-docs.sh: pdoc wrote no agent_state.html" >&2
    exit 1
fi

# --- Go -------------------------------------------------------------------------------------
echo "api-docs.sh: go (go doc -all)"
# shellcheck source=../../bindings/go/goenv.sh
. bindings/go/goenv.sh
mkdir -p "$out/go"
(cd bindings/go && go doc -all .) \
    | text_page "Go package agentstate" \
        "go doc -all of github.com/agent-state/agent-state/bindings/go (bindings/go in the repository). Its examples (example_test.go) run with go test, which checks their output." \
    >"$out/go/index.html"

# --- C++ ------------------------------------------------------------------------------------
echo "api-docs.sh: c++ (agent_state.hpp and its parts)"
mkdir -p "$out/cpp"
(
    cd bindings/cpp
    for f in agent_state.hpp $(sed -n 's/^#include "\(agent_state\/[a-z_]*\.hpp\)"$/\1/p' agent_state.hpp); do
        printf '//// %s\n\n' "bindings/cpp/$f"
        cat "$f"
        printf '\n'
    done
) | text_page "C++: agent_state.hpp" \
        "The header-only C++ wrapper (bindings/cpp): agent_state.hpp and the parts it includes, in that order, with their documentation comments." \
    >"$out/cpp/index.html"

# --- Node.js --------------------------------------------------------------------------------
echo "api-docs.sh: node (index.d.ts)"
mkdir -p "$out/node"
text_page "Node.js package agent-state: index.d.ts" \
    "The package's TypeScript declarations (bindings/node/index.d.ts), with their documentation comments." \
    <bindings/node/index.d.ts >"$out/node/index.html"

echo "api-docs.sh: $out/{rust,python,go,cpp,node}"
