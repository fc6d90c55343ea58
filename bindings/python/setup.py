"""Build hook: builds the Rust library and the `agent-state` command with cargo and bundles
them into the package.

`pip install ./bindings/python`, `pip install agent_state-X.Y.Z.tar.gz` and `python -m build`
run `cargo build --release -p libagent_state -p agent-state-cli` on the workspace (the
repository root in a checkout, its copy under `rust/` in an sdist) and put the shared library in
the wheel as `agent_state/.libs/libagent_state.so` (in a directory whose name is not a Python
identifier, so neither the import system nor `pkgutil` takes the library for an extension
module) and the command as `agent_state/.libs/agent-state`, which the `agent-state` script that
pip puts on the environment's PATH runs (agent_state/_cli.py). The
package loads it with ctypes, so the wheel needs no particular Python ABI: it is tagged
`py3-none-manylinux_2_N_<arch>`, where 2.N is the newest glibc symbol version the library
references (the manylinux policy auditwheel checks; on a glibc 2.34+ build machine, 2.34,
since the pthread and dl functions moved into libc there).

The build is plain setuptools plus this file, not setuptools-rust or maturin: setuptools-rust
builds with `cargo rustc --crate-type cdylib` (a different build of the crate from `make
build`'s, so the two would rebuild each other in the shared target/ directory) and installs the
library as a CPython extension module (`*.cpython-3XX-<platform>.so`), which is what this
package must avoid; maturin has no mode for a library loaded with ctypes.

A Rust toolchain (cargo, rustc; Rust 1.88+) and a C compiler (for the bundled SQLite) are
needed unless AGENT_STATE_LIBRARY is set. cargo fetches the crate's dependencies from crates.io
unless they are in its cache.

Environment:
  CARGO=/path/to/cargo             the cargo to run (default: `cargo` on PATH, then ~/.cargo/bin)
  CARGO_TARGET_DIR=DIR             cargo's build directory (default: the crate's target/; in a
                                   checkout, the repository's, which `make build` also uses, so a
                                   library already built is not rebuilt)
  AGENT_STATE_LIBRARY=/path/to/libagent_state.so
                                   bundle that file instead of building one
  AGENT_STATE_CLI=/path/to/agent-state
                                   bundle that command instead of building one (with
                                   AGENT_STATE_LIBRARY, nothing is built); 0: no command
  AGENT_STATE_BUNDLE=0             bundle nothing (a pure-Python wheel that needs
                                   AGENT_STATE_LIBRARY, or an installed library, at run time)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional, Tuple

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

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

#: Where the library and the command go inside the package (see agent_state/_native.py and
#: agent_state/_cli.py).
LIB_DIR = ".libs"
CLI_NAME = "agent-state.exe" if sys.platform == "win32" else "agent-state"

#: The workspace's files an sdist carries (under rust/): what `cargo build -p libagent_state`
#: reads. Every member crate comes along (its sources only), so that Cargo.lock still matches
#: the workspace exactly and the build can be --locked; .cargo/config.toml sets the bundled
#: SQLite's compile flags (LIBSQLITE3_FLAGS), which cargo finds from the directory it runs in.
CRATE_FILES = ("Cargo.toml", "Cargo.lock", "LICENSE", ".cargo/config.toml")
CRATE_DIRS = ("crates",)


def bundling() -> bool:
    return os.environ.get("AGENT_STATE_BUNDLE", "1") not in ("0", "false", "no")


def crate_dir() -> Path:
    """The Rust workspace: rust/ in an unpacked sdist, else the checkout's root."""
    for candidate in (HERE / "rust", HERE.parent.parent):
        if (candidate / "Cargo.toml").is_file() and (candidate / "crates" / "libagent_state" / "Cargo.toml").is_file():
            return candidate
    sys.exit(
        "agent_state: the Rust crate is missing (neither rust/ of an sdist nor the repository "
        "around bindings/python). Set AGENT_STATE_LIBRARY to a built libagent_state.so."
    )


def workspace_version() -> str:
    """The version of everything: `[workspace.package] version` in the workspace's Cargo.toml
    (the package's version, which `agent_version()` of the library built from it returns too)."""
    manifest = crate_dir() / "Cargo.toml"
    section = None
    for line in manifest.read_text("utf-8").splitlines():
        header = re.fullmatch(r"\s*\[([^\]]+)\]\s*(#.*)?", line)
        if header:
            section = header.group(1).strip()
            continue
        match = re.fullmatch(r'\s*version\s*=\s*"([^"]+)"\s*(#.*)?', line)
        if section == "workspace.package" and match:
            return match.group(1)
    sys.exit(f"agent_state: no [workspace.package] version in {manifest}")


def find_cargo() -> str:
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if not cargo:
        home = Path.home() / ".cargo" / "bin" / "cargo"
        if home.is_file():
            cargo = str(home)
    if not cargo:
        sys.exit(
            "agent_state: building the native library needs a Rust toolchain (cargo, Rust 1.88+) "
            "and a C compiler; install them (rustup, or your distribution's cargo package), or "
            "set AGENT_STATE_LIBRARY to a built libagent_state.so."
        )
    return cargo


def cargo_build(library: bool, cli: bool) -> Tuple[Optional[Path], Optional[Path]]:
    """Runs `cargo build --release` on the workspace for the shared library and/or the command
    and returns the files it made."""
    crate = crate_dir()
    packages = (["-p", "libagent_state"] if library else []) + (["-p", "agent-state-cli"] if cli else [])
    command = [find_cargo(), "build", "--release", *packages, "--message-format=json-render-diagnostics",
               "--manifest-path", str(crate / "Cargo.toml")]
    if crate != HERE.parent.parent:
        command.append("--locked")  # an sdist builds exactly the dependencies it was made with
    print("agent_state: " + " ".join(command), file=sys.stderr, flush=True)
    # In the workspace's directory: cargo reads .cargo/config.toml from where it runs, not
    # from --manifest-path's.
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, cwd=crate)
    if proc.returncode != 0:
        sys.exit(f"agent_state: cargo build failed (exit status {proc.returncode}); see the messages above")
    built_lib: Optional[Path] = None
    built_cli: Optional[Path] = None
    for line in proc.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        target = message.get("target") or {}
        if message.get("reason") != "compiler-artifact":
            continue
        if "cdylib" in target.get("kind", ()):
            for filename in message.get("filenames", ()):
                if Path(filename).name == LIB_NAME:
                    built_lib = Path(filename)
        if "bin" in target.get("kind", ()) and message.get("executable"):
            if Path(message["executable"]).name == CLI_NAME:
                built_cli = Path(message["executable"])
    if library and (built_lib is None or not built_lib.is_file()):
        sys.exit(f"agent_state: cargo reported no {LIB_NAME}")
    if cli and (built_cli is None or not built_cli.is_file()):
        sys.exit(f"agent_state: cargo reported no {CLI_NAME}")
    return built_lib, built_cli


def given_file(variable: str) -> Optional[Path]:
    value = os.environ.get(variable)
    if not value or value == "0":
        return None
    path = Path(value)
    if not path.is_file():
        sys.exit(f"agent_state: {variable}={value} is not a file")
    return path


def files_to_bundle() -> Tuple[Path, Optional[Path]]:
    """The shared library and the command (None: none) to put in the package."""
    library = given_file("AGENT_STATE_LIBRARY")
    cli = given_file("AGENT_STATE_CLI")
    # With a given library and no command named, nothing is built (the command stays out).
    want_cli = cli is None and os.environ.get("AGENT_STATE_CLI") != "0" and library is None
    if library is None or want_cli:
        built_lib, built_cli = cargo_build(library is None, want_cli)
        library = library or built_lib
        cli = cli or built_cli
    assert library is not None
    return library, cli


def glibc_versions(path: Path) -> Iterator[Tuple[int, int]]:
    """The GLIBC_X.Y symbol versions an ELF file needs (its SHT_GNU_verneed entries)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        return
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        shoff, shentsize, shnum = struct.unpack_from(order + "Q10xHH", data, 0x28)
        section = order + "4xI16xQQI4x16x"
    else:
        shoff, shentsize, shnum = struct.unpack_from(order + "I10xHH", data, 0x20)
        section = order + "4xI8xIII12x"
    sections = [struct.unpack_from(section, data, shoff + i * shentsize) for i in range(shnum)]
    for sh_type, offset, size, link in sections:
        if sh_type != 0x6FFFFFFE:  # SHT_GNU_verneed
            continue
        strtab = sections[link][1]
        need, end = offset, offset + size
        while need < end:
            _, count, _, aux, next_need = struct.unpack_from(order + "HHIII", data, need)
            entry = need + aux
            for _ in range(count):
                _, _, _, name, next_aux = struct.unpack_from(order + "IHHII", data, entry)
                raw = data[strtab + name: data.index(b"\0", strtab + name)]
                match = re.fullmatch(rb"GLIBC_(\d+)\.(\d+)", raw)
                if match:
                    yield int(match.group(1)), int(match.group(2))
                entry += next_aux
            if not next_need:
                break
            need += next_need


def platform_tag(library: Path, plat: str) -> str:
    """`manylinux_2_N_<arch>` for a glibc Linux library, else the platform tag unchanged."""
    if not plat.startswith("linux_"):
        return plat
    needed = max(glibc_versions(library), default=None)
    if needed is None:
        return plat
    return "manylinux_{}_{}_{}".format(needed[0], needed[1], plat[len("linux_"):])


class build_py_with_library(build_py):
    def run(self) -> None:
        super().run()
        # A build directory left by an older release bundled the library next to the modules,
        # where pkgutil lists it as a module; never carry it into this build.
        stale = Path(self.build_lib) / "agent_state" / LIB_NAME
        if stale.exists():
            stale.unlink()
        libs = Path(self.build_lib) / "agent_state" / LIB_DIR
        stale_cli = libs / CLI_NAME
        if stale_cli.exists():
            stale_cli.unlink()
        if bundling():
            library, cli = files_to_bundle()
            libs.mkdir(parents=True, exist_ok=True)
            for source, name in ((library, LIB_NAME), (cli, CLI_NAME)):
                if source is not None:
                    shutil.copyfile(source, libs / name)
                    os.chmod(libs / name, 0o755)


class sdist_with_crate(sdist):
    """Adds the Rust crate under rust/, so the sdist builds with no checkout around it."""

    def make_release_tree(self, base_dir: str, files: list) -> None:  # type: ignore[override]
        super().make_release_tree(base_dir, files)
        crate, dest = crate_dir(), Path(base_dir) / "rust"
        for name in CRATE_FILES:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(crate / name, dest / name)
        for name in CRATE_DIRS:
            shutil.copytree(crate / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "target"))


class BinaryDistribution(Distribution):
    """A distribution with a native library: installed to platlib, in a platform wheel."""

    def has_ext_modules(self) -> bool:
        return bundling()


class platform_wheel(bdist_wheel):
    def get_tag(self):  # type: ignore[no-untyped-def]
        python, abi, plat = super().get_tag()
        if not bundling():
            return python, abi, plat
        build_lib = Path(self.get_finalized_command("build").build_lib)
        library = build_lib / "agent_state" / LIB_DIR / LIB_NAME
        if library.is_file():
            plat = platform_tag(library, plat)
        return "py3", "none", plat


setup(
    version=workspace_version(),
    distclass=BinaryDistribution,
    cmdclass={"build_py": build_py_with_library, "sdist": sdist_with_crate, "bdist_wheel": platform_wheel},
)
