# shellcheck shell=bash
# Sourced (not run) by run-tests.sh and bench.sh: makes sure the Python binding's virtual
# environment exists, with the package installed from this checkout, and sets
#
#   VENV  the environment's directory (target/pyvenv)
#   PY    its interpreter ("$VENV/bin/python")
#
# The package bundles target/release's library (its setup.py runs cargo, a no-op once built);
# `make build` must have run first.
# It is (re)installed when it is missing, or when the installed copy differs from this
# checkout (a source file of src/agent_state, or the bundled library); AGENT_STATE_REINSTALL=1
# reinstalls it anyway. A venv made by another interpreter (or a broken one) is rebuilt.
# Works on a fresh Debian machine with Python 3.9+ (PYTHON=python3.x picks another
# interpreter); as root, it installs python3-venv when the interpreter lacks the venv module.
# Installs nothing else: test tools are run-tests.sh's business.

_agent_state_venv() {
  local root python lib want have py
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)" || return 1
  python="${PYTHON:-python3}"
  lib="$root/target/release/libagent_state.so"
  VENV="$root/target/pyvenv"
  PY="$VENV/bin/python"

  if [[ ! -f "$lib" ]]; then
    echo "venv.sh: $lib is missing; run 'make build' first" >&2
    return 1
  fi

  want="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" || {
    echo "venv.sh: cannot run '$python'" >&2
    return 1
  }
  if [[ -x "$PY" ]]; then
    have="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
    if [[ "$have" != "$want" ]] || ! "$PY" -m pip --version >/dev/null 2>&1; then
      rm -rf "$VENV"
    fi
  fi

  if [[ ! -x "$PY" ]]; then
    mkdir -p "$root/target"
    if ! "$python" -m venv "$VENV" 2>/dev/null; then
      rm -rf "$VENV"
      # Debian splits venv/ensurepip out of the interpreter package.
      if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
        echo "venv.sh: installing python3-venv (Debian) to create the virtual environment" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python${want}-venv" >/dev/null \
          || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null \
          || return 1
        "$python" -m venv "$VENV" || return 1
      else
        echo "venv.sh: '$python -m venv' failed; install the venv module (Debian: python3-venv)" >&2
        return 1
      fi
    fi
  fi

  # Is the installed package this checkout's? Run outside the source tree, without
  # AGENT_STATE_LIBRARY: importing does not load the library, and what is compared is the
  # installed package's own files.
  if [[ "${AGENT_STATE_REINSTALL:-0}" != 1 ]] && (
    cd / && env -u AGENT_STATE_LIBRARY "$PY" - "$root/bindings/python/src/agent_state" "$lib" <<'EOF'
import filecmp, os, sys
src, lib = sys.argv[1], sys.argv[2]
try:
    import agent_state
except Exception:
    sys.exit(1)
pkg = os.path.dirname(os.path.abspath(agent_state.__file__))
if os.path.realpath(pkg) == os.path.realpath(src):
    sys.exit(1)  # the source tree itself (an editable install): reinstall a real copy
names = [n for n in os.listdir(src) if n.endswith((".py", ".typed"))]
same = all(filecmp.cmp(os.path.join(src, n), os.path.join(pkg, n), shallow=False)
           if os.path.isfile(os.path.join(pkg, n)) else False for n in names)
bundled = os.path.join(pkg, ".libs", os.path.basename(lib))
same = same and os.path.isfile(bundled) and filecmp.cmp(lib, bundled, shallow=False)
sys.exit(0 if same else 1)
EOF
  ); then
    return 0
  fi
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install --quiet --force-reinstall --no-deps \
    "$root/bindings/python" || {
    echo "venv.sh: installing the package into $VENV failed" >&2
    return 1
  }
}

_agent_state_venv || return 1 2>/dev/null || exit 1
unset -f _agent_state_venv
