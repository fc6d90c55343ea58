//! The checked-in C header must be exactly what cbindgen generates from the sources, with the
//! version macros of the crate's version (the workspace's Cargo.toml), so that `AGENT_STATE_VERSION` is what
//! `agent_version()` returns. Regenerate with `make header` (or
//! `AGENT_STATE_BLESS=1 cargo test --test header`).

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = krate.join("../..");
    let mut config =
        cbindgen::Config::from_file(krate.join("cbindgen.toml")).expect("cbindgen.toml");
    assert!(
        config.after_includes.is_none(),
        "cbindgen.toml: after_includes is generated here (the version macros)"
    );
    config.after_includes = Some(version_macros());
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(krate)
        .with_config(config)
        .generate()
        .expect("cbindgen failed")
        .write(&mut generated);
    let path = root.join("include/agent_state.h");
    if std::env::var_os("AGENT_STATE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/agent_state.h is stale: run `make header` and commit the result"
    );
}

/// `AGENT_STATE_VERSION_MAJOR/MINOR/PATCH` and `AGENT_STATE_VERSION`, from the crate's version
/// (the same `CARGO_PKG_VERSION` that `agent_version()` returns).
fn version_macros() -> String {
    let (major, minor, patch) = (
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
    );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        version,
        format!("{major}.{minor}.{patch}"),
        "a pre-release or build suffix would need its own macro"
    );
    format!(
        "\n\
/**\n \
* The version of the library this header belongs to: AGENT_STATE_VERSION is the string that\n \
* agent_version() returns. Compare them at run time to detect a header/library mismatch; within\n \
* one major version the C ABI only grows (the shared library's SONAME is\n \
* libagent_state.so.AGENT_STATE_VERSION_MAJOR).\n \
*/\n\
#define AGENT_STATE_VERSION_MAJOR {major}\n\
#define AGENT_STATE_VERSION_MINOR {minor}\n\
#define AGENT_STATE_VERSION_PATCH {patch}\n\
#define AGENT_STATE_VERSION \"{version}\""
    )
}
