//! The checked-in C header must be exactly what cbindgen generates from the sources.
//! Regenerate with `make header` (or `AGENT_STATE_BLESS=1 cargo test --test header`).

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(root)
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
