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
    let generated = by_topic(&String::from_utf8(generated).expect("cbindgen writes UTF-8"));
    let path = root.join("include/agent_state.h");
    if std::env::var_os("AGENT_STATE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/agent_state.h is stale: run `make header` and commit the result"
    );
}

/// The functions in the order of the header's table of contents (cbindgen.toml's preamble): by
/// topic, as SQLite's header groups its API, where cbindgen would write them in the order of
/// the source files' names.
const TOPICS: &[&str] = &[
    // 1. Version and errors.
    "agent_status_name",
    "agent_last_error",
    "agent_version",
    // 2. Buffers.
    "agent_buffer_copy",
    "agent_buffer_free",
    // 3. Opening and closing.
    "agent_open",
    "agent_close",
    // 4. Reading and writing the state.
    "agent_get_state",
    "agent_get_state_versioned",
    "agent_set_state",
    "agent_replace_state",
    "agent_set_state_if",
    "agent_replace_state_if",
    // 5. Hooks.
    "agent_on_state_changed",
    "agent_remove_hook",
    "agent_set_initial_state_hook",
    "agent_set_validator",
    // 6. The change log.
    "agent_poll",
    "agent_changes_since",
    "agent_get_state_at",
    "agent_restore_state",
    // 7. Cancelling a call.
    "agent_cancel_new",
    "agent_cancel_bind",
    "agent_cancel_fire",
    "agent_cancel_free",
    // 8. A store's agents.
    "agent_store_list",
    "agent_store_delete",
    "agent_store_expire",
    // 9. Schema evolution.
    "agent_set_schema_step",
    "agent_schema_version",
    "agent_get_state_at_stored",
    "agent_upgrade_state",
    // 10. JSON Patch and reads of one place.
    "agent_patch_state",
    "agent_patch_state_if",
    "agent_get_path",
    "agent_get_tail",
    // 11. Awaited calls.
    "agent_submit",
    "agent_queue_new",
    "agent_queue_submit",
    "agent_queue_take",
    "agent_queue_free",
    // 12. Watching a store's agents.
    "agent_watch_open",
    "agent_watch_next",
    "agent_watch_event_free",
    "agent_watch_add",
    "agent_watch_remove",
    "agent_watch_close",
];

/// `header` with its function declarations (each with its doc comment: blocks separated by a
/// blank line, between `extern "C" {` and its end) in the order of [`TOPICS`]. A function
/// missing from the list fails the test: a new export needs its place in the contents.
fn by_topic(header: &str) -> String {
    const OPEN: &str = "extern \"C\" {\n#endif // __cplusplus\n\n";
    const CLOSE: &str = "\n#ifdef __cplusplus\n}  // extern \"C\"";
    let start = header.find(OPEN).expect("the header opens extern \"C\"") + OPEN.len();
    let end = header.rfind(CLOSE).expect("the header closes extern \"C\"");
    let mut blocks: Vec<(usize, &str)> = header[start..end]
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let rank = TOPICS
                .iter()
                .position(|f| {
                    block.contains(&format!(" {f}(")) || block.contains(&format!("*{f}("))
                })
                .unwrap_or_else(|| {
                    panic!("a function missing from TOPICS in tests/header.rs:\n{block}")
                });
            (rank, block.trim_end_matches('\n'))
        })
        .collect();
    blocks.sort_by_key(|(rank, _)| *rank);
    assert_eq!(
        blocks.len(),
        TOPICS.len(),
        "TOPICS names a function the header lacks"
    );
    let body: Vec<&str> = blocks.into_iter().map(|(_, b)| b).collect();
    format!(
        "{}{}\n{}",
        &header[..start],
        body.join("\n\n"),
        &header[end..]
    )
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
