//! Replays the stored corpus of the pure targets through their checks, without libFuzzer:
//! `cargo test --no-default-features` (stable) in the quick reliability suite. Extra
//! directories of inputs for the parser target can be given in AGENT_FUZZ_EXTRA_JSON
//! (colon-separated), e.g. the JSONTestSuite corpus.

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(dir: &Path, check: fn(&[u8])) -> usize {
    let files = inputs(dir);
    for f in &files {
        // A fuzzer working on the same directory may have removed it since the listing.
        let data = match std::fs::read(f) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            other => other.unwrap(),
        };
        let name = f.display().to_string();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!("corpus input {name} fails its check");
        }
    }
    files.len()
}

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target)
}

#[test]
fn json_codec_corpus() {
    let mut n = replay(&corpus("json_codec"), agent_state_fuzz::check_json_codec);
    if let Ok(extra) = std::env::var("AGENT_FUZZ_EXTRA_JSON") {
        for dir in extra.split(':').filter(|d| !d.is_empty()) {
            n += replay(Path::new(dir), agent_state_fuzz::check_json_codec);
        }
    }
    println!("json_codec: {n} inputs replayed");
    assert!(n > 0);
}

#[test]
fn merge_corpus() {
    let n = replay(&corpus("merge"), |data| {
        agent_state_fuzz::check_merge(data);
        agent_state_fuzz::check_merge_snapshot(data);
    });
    println!("merge: {n} inputs replayed");
    assert!(n > 0);
}

#[test]
fn scan_corpus() {
    let mut n = replay(&corpus("scan"), agent_state_fuzz::check_scan);
    n += replay(&corpus("json_codec"), agent_state_fuzz::check_scan);
    if let Ok(extra) = std::env::var("AGENT_FUZZ_EXTRA_JSON") {
        for dir in extra.split(':').filter(|d| !d.is_empty()) {
            n += replay(Path::new(dir), agent_state_fuzz::check_scan);
        }
    }
    println!("scan: {n} inputs replayed");
    assert!(n > 0);
}
