#!/usr/bin/env bash
# `make docs`: the book, built into target/book with zero warnings and zero broken links.
#  1. mdBook (the version below, search only: no server, no watcher) is installed once with
#     `cargo install --locked` into target/tools, where later runs find it;
#  2. the reference pages' generated parts are checked against the code they come from
#     (docs/tools/reference.py --check; AGENT_STATE_BLESS=1 rewrites them instead);
#  3. `mdbook build`: any warning or error it prints fails the build;
#  4. the API documentation of each language goes beside the book, in target/book/api
#     (docs/tools/api-docs.sh), so the book's links to it are checked too;
#  5. every internal link and anchor of the built pages is checked (docs/tools/check_links.py).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
MDBOOK_VERSION=0.5.4
tools="$root/target/tools"
mdbook="$tools/bin/mdbook"

if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
    echo "docs/build.sh: installing mdbook $MDBOOK_VERSION into target/tools (once)"
    cargo install --quiet --locked mdbook --version "$MDBOOK_VERSION" \
        --no-default-features --features search --root "$tools"
fi

if [[ -f docs/tools/reference.py ]]; then
    if [[ "${AGENT_STATE_BLESS:-}" == 1 ]]; then
        python3 docs/tools/reference.py --write
    else
        python3 docs/tools/reference.py --check
    fi
fi

rm -rf target/book
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$mdbook" build docs >"$log" 2>&1; then
    cat "$log"
    echo "docs/build.sh: mdbook build failed" >&2
    exit 1
fi
if grep -E '\b(WARN|ERROR)\b' "$log"; then
    echo "docs/build.sh: mdbook printed warnings (above); the book builds without any" >&2
    exit 1
fi

if [[ -f docs/tools/api-docs.sh ]]; then
    bash docs/tools/api-docs.sh target/book/api
fi

python3 docs/tools/check_links.py target/book
echo "make docs: target/book/index.html"
