"""Which storage backend the tests run against, and where their stores live on it
(tests/conformance/README.md, "Where the stores live").

``AGENT_STATE_TEST_BACKEND`` unset or ``sqlite``: stores are SQLite files in the test's
temporary directory. ``postgres``: stores are agents on the server ``AGENT_STATE_TEST_PG_URI``,
each with a fresh ``agent_id`` (``py_<pid>_<start time>_<n>``, unique among the runners and
processes sharing one database), passed as the ``agent_id`` open option.
``bindings/python/run-tests.sh`` runs the suite once per backend."""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, Dict, Optional, Tuple


def _backend() -> Tuple[str, Optional[str]]:
    name = os.environ.get("AGENT_STATE_TEST_BACKEND") or "sqlite"
    if name == "sqlite":
        return name, None
    if name != "postgres":
        raise RuntimeError(f"AGENT_STATE_TEST_BACKEND={name}: want sqlite or postgres")
    uri = os.environ.get("AGENT_STATE_TEST_PG_URI")
    if not uri:
        raise RuntimeError("AGENT_STATE_TEST_BACKEND=postgres needs AGENT_STATE_TEST_PG_URI")
    if not uri.startswith(("postgres://", "postgresql://")):
        raise RuntimeError(f"AGENT_STATE_TEST_PG_URI={uri} is not a postgres:// or postgresql:// URI")
    return name, uri


BACKEND, PG_URI = _backend()
POSTGRES = BACKEND == "postgres"

_prefix = f"py_{os.getpid()}_{int(time.time()):x}_"
_ids = itertools.count(1)


def new_agent_id() -> str:
    """A fresh agent_id: no other test, runner or process uses it."""
    return f"{_prefix}{next(_ids)}"


def server_store() -> Tuple[str, Dict[str, Any]]:
    """A fresh store on the server: its path (the URI) and the options that name it."""
    assert PG_URI is not None
    return PG_URI, {"agent_id": new_agent_id()}


def runs_on_backend(vector: Dict[str, Any]) -> bool:
    """A vector's ``backends`` list names this run's backend (no list: every backend)."""
    return BACKEND in vector.get("backends", [BACKEND])
