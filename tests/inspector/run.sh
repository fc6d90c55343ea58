#!/usr/bin/env bash
# The inspector page (crates/agent-state-serve/page/) in a real headless Chromium, against a real
# `agent-state serve` on stores written by the CLI.
#
#   bash tests/inspector/run.sh [--update-screenshot]
#
# Installs what it needs when missing: Debian's chromium and chromium-driver (apt-get, as root),
# and selenium into its own venv, target/inspector-venv. Builds the CLI (cargo build --release
# -p agent-state-cli), then runs test_inspector.py, which prints one line per test and ends with
# "N passed, M failed"; the exit status is non-zero when a test failed.
#
# The screenshot of the page goes to target/inspector/inspector.png; with --update-screenshot
# (or INSPECTOR_UPDATE_SCREENSHOT=1) also to docs/src/images/inspector.png, the book's picture.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
VENV=target/inspector-venv

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "inspector: installing chromium and chromium-driver (Debian packages)"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "inspector: creating $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check selenium
fi

cargo build --release -p agent-state-cli

exec "$VENV/bin/python" tests/inspector/test_inspector.py "$@"
