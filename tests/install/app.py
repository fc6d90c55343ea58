"""A user's Python program: tests/install/run.sh runs it in a fresh virtual environment where
only the sdist was pip-installed, from a directory outside the repository.

Usage: python app.py STORE_PATH [EXPECTED_LIBRARY]. Prints "agent_state VERSION: STATE" after
merging {"from": "python"}; checks that the library comes from the installed package (or is
EXPECTED_LIBRARY) and that Python sees no extension module in the package."""

import importlib
import os
import pkgutil
import sys

import agent_state

store = sys.argv[1]
expected = sys.argv[2] if len(sys.argv) > 2 else None
package_dir = os.path.dirname(os.path.realpath(agent_state.__file__))
library = os.path.realpath(agent_state.library_path())

if expected is None:
    # The copy bundled in the installed package, not one found elsewhere.
    assert library == os.path.join(package_dir, ".libs", "libagent_state.so"), library
    assert package_dir.startswith(os.path.realpath(sys.prefix) + os.sep), (package_dir, sys.prefix)
else:
    assert library == os.path.realpath(expected), (library, expected)

# The bundled library is not mistaken for a module.
modules = sorted(m.name for m in pkgutil.iter_modules(agent_state.__path__))
sources = sorted(f[:-3] for f in os.listdir(package_dir) if f.endswith(".py") and f != "__init__.py")
assert modules == sources, (modules, sources)
walked = [m.name for m in pkgutil.walk_packages(agent_state.__path__, "agent_state.")]
assert not [name for name in walked if "lib" in name], walked
try:
    importlib.import_module("agent_state.libagent_state")
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("agent_state.libagent_state imports")

with agent_state.Agent(store, initial_state={"runs": 0}) as agent:
    state = agent.set_state({"from": "python"})
assert agent_state.library_version() == agent_state.__version__
print("agent_state %s: %s" % (agent_state.library_version(), state))
