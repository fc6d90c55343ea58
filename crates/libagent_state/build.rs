//! Build script: gives the shared library an ELF SONAME.
//!
//! `libagent_state.so` is linked with the SONAME `libagent_state.so.MAJOR` (from the crate's
//! version: `libagent_state.so.0` for 0.x). The number changes only when the C ABI breaks;
//! within a major version, 0.x included, releases only add to it (see the book's page "Upgrades of the store's format").
//! A program linked against the library records that name, so the build directory also gets
//! the `libagent_state.so.MAJOR -> libagent_state.so` symlink that such programs load when they
//! run from the checkout (with an rpath to `target/release`). `make install` installs the file
//! as `libagent_state.so.MAJOR.MINOR.PATCH` with both usual symlinks.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    let soname = format!("libagent_state.so.{major}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");

    // OUT_DIR is <target>[/<triple>]/<profile>/build/libagent_state-<hash>/out: the library lands
    // in <profile>.
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Some(profile_dir) = profile_dir(&out) {
        link_soname(&profile_dir, &soname);
    }
}

fn profile_dir(out: &Path) -> Option<PathBuf> {
    let build = out.ancestors().nth(2)?;
    if build.file_name()? != "build" {
        return None;
    }
    Some(build.parent()?.to_path_buf())
}

#[cfg(unix)]
fn link_soname(dir: &Path, soname: &str) {
    let link = dir.join(soname);
    if std::fs::symlink_metadata(&link).is_ok() {
        return;
    }
    if let Err(e) = std::os::unix::fs::symlink("libagent_state.so", &link) {
        println!("cargo:warning=cannot create {}: {e}", link.display());
    }
}

#[cfg(not(unix))]
fn link_soname(_dir: &Path, _soname: &str) {}
