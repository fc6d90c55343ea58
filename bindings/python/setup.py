"""Build hook: bundle the C library built by `make build` into the package.

`pip install ./bindings/python` copies `target/release/libagent_state.so` (of the checkout this
directory lives in) into the wheel as `agent_state/libagent_state.so`, and tags the wheel for
this platform (`py3-none-<platform>`: ctypes needs no particular Python ABI).

Environment:
  AGENT_STATE_LIBRARY=/path/to/libagent_state.so   bundle that file instead
  AGENT_STATE_BUNDLE=0                             bundle nothing (a pure-Python wheel that
                                                   needs AGENT_STATE_LIBRARY at run time)
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent

if sys.platform == "darwin":
    LIB_NAME = "libagent_state.dylib"
elif sys.platform == "win32":
    LIB_NAME = "agent_state.dll"
else:
    LIB_NAME = "libagent_state.so"


def bundling() -> bool:
    return os.environ.get("AGENT_STATE_BUNDLE", "1") not in ("0", "false", "no")


def built_library() -> Path:
    env = os.environ.get("AGENT_STATE_LIBRARY")
    if env:
        path = Path(env)
        if not path.is_file():
            sys.exit(f"agent_state: AGENT_STATE_LIBRARY={env} is not a file")
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent.parent / "target"))
    if not target.is_absolute():
        target = HERE.parent.parent / target
    for profile in ("release", "debug"):
        path = target / profile / LIB_NAME
        if path.is_file():
            return path
    sys.exit(
        f"agent_state: {LIB_NAME} not found under {target}/release. Build the C library first "
        "(`make build` at the repository root), set AGENT_STATE_LIBRARY to a built copy, or set "
        "AGENT_STATE_BUNDLE=0 to install without it (AGENT_STATE_LIBRARY is then needed at run time)."
    )


class build_py_with_library(build_py):
    def run(self) -> None:
        super().run()
        if bundling():
            source = built_library()
            dest = Path(self.build_lib) / "agent_state" / LIB_NAME
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
            os.chmod(dest, 0o755)


class BinaryDistribution(Distribution):
    """A distribution with a native library: installed to platlib, in a platform wheel."""

    def has_ext_modules(self) -> bool:
        return bundling()


class platform_wheel(bdist_wheel):
    def get_tag(self):  # type: ignore[no-untyped-def]
        python, abi, plat = super().get_tag()
        if bundling():
            return "py3", "none", plat
        return python, abi, plat


setup(
    distclass=BinaryDistribution,
    cmdclass={"build_py": build_py_with_library, "bdist_wheel": platform_wheel},
)
