"""The `agent-state` command of a wheel: pip's `agent-state` script runs `main`, which replaces
the Python process with the executable bundled beside the library (agent_state/.libs), so the
command's exit status, signals and standard streams are its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The bundled executable (setup.py puts it there; absent when the package was built without it).
EXECUTABLE = Path(__file__).resolve().parent / ".libs" / ("agent-state.exe" if sys.platform == "win32" else "agent-state")


def main() -> None:
    if not EXECUTABLE.is_file():
        sys.exit(
            "agent-state: this installation of the agent_state package carries no agent-state "
            f"executable ({EXECUTABLE} is missing: it was built with AGENT_STATE_CLI=0 or from "
            "a library alone); install a wheel, or the C tarball's bin/agent-state"
        )
    os.execv(str(EXECUTABLE), [str(EXECUTABLE), *sys.argv[1:]])


if __name__ == "__main__":
    main()
