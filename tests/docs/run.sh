#!/usr/bin/env bash
# The built book (target/book, from `make docs`) in a real headless Chromium.
#
#   bash tests/docs/run.sh [BOOK_DIR]     (default: target/book)
#
# Serves target/book over HTTP on 127.0.0.1 at a free port (python3 -m http.server, a child of
# this script, stopped by its pid on exit), then runs test_book.py against it: the front page
# loads with its title and sidebar, every image of the front page and of a guide page
# (guides/serve.html, which shows the inspector's picture) is decoded, the search box finds a
# page, and the browser's console shows no error. Prints a line per test and ends with
# "N passed, M failed"; the exit status is non-zero when a test failed. The screenshots go to
# target/docs-screenshots/.
#
# Installs what it needs when missing, as tests/inspector/run.sh does and into the same places:
# Debian's chromium and chromium-driver (apt-get, as root) and selenium in target/inspector-venv.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
VENV=target/inspector-venv
BOOK=${1:-target/book}

if [ ! -f "$BOOK/index.html" ]; then
  echo "tests/docs: $BOOK/index.html is missing: build the book first (make docs)" >&2
  exit 1
fi

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "tests/docs: installing chromium and chromium-driver (Debian packages)"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "tests/docs: creating $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check selenium
fi

# The server: port 0 lets the kernel pick a free port, which http.server prints on its first line.
log=$(mktemp)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$BOOK" >"$log" 2>&1 &
server=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^Serving HTTP on [0-9.]* port \([0-9]*\).*/\1/p' "$log")
  [ -n "$port" ] && break
  if ! kill -0 "$server" 2>/dev/null; then cat "$log" >&2; echo "tests/docs: the server exited" >&2; exit 1; fi
  sleep 0.1
done
if [ -z "$port" ]; then cat "$log" >&2; echo "tests/docs: the server did not start" >&2; exit 1; fi
echo "tests/docs: serving $BOOK at http://127.0.0.1:$port/"

"$VENV/bin/python" tests/docs/test_book.py "http://127.0.0.1:$port"
