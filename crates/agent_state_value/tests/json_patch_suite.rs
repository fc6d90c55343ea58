//! The public RFC 6902 test suite (json-patch/json-patch-tests, in `../shared/corpora`): every
//! record that is not disabled, `tests.json` and `spec_tests.json` (the RFC's own examples).
//! A record with `expected` must apply and give a JSON-equal result; one with `error` must be
//! refused, leaving the document as it was. Without the corpus the test says so and passes,
//! except under CI (`CI=true`), where the corpus is always beside the checkout.

use std::path::Path;

use agent_state_value::json_patch::{json_equal, JsonPatch};
use serde_json::Value;

fn corpus() -> Option<std::path::PathBuf> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/json-patch-tests");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "no RFC 6902 corpus at {} (CI has ../shared beside the checkout)",
        dir.display()
    );
    eprintln!("no RFC 6902 corpus at {}: skipped", dir.display());
    None
}

fn run_file(dir: &Path, name: &str) -> (usize, usize) {
    // serde_json, not the strict parser: two disabled records repeat a member name (on
    // purpose, to test parsers that see duplicates), which the strict parser refuses.
    let records: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
    let (mut ran, mut disabled) = (0, 0);
    let mut failures = Vec::new();
    for (i, record) in records.iter().enumerate() {
        if record.get("disabled").is_some_and(|d| d == true) {
            disabled += 1;
            continue;
        }
        ran += 1;
        let comment = record.get("comment").and_then(Value::as_str).unwrap_or("");
        let doc = &record["doc"];
        let result = JsonPatch::from_value(&record["patch"]).and_then(|p| p.apply(doc));
        match (record.get("expected"), record.get("error"), result) {
            (Some(want), _, Ok(got)) if json_equal(&got, want) => {}
            (Some(want), _, Ok(got)) => {
                failures.push(format!("{name}[{i}] {comment}: got {got}, expected {want}"))
            }
            (Some(want), _, Err(e)) => failures.push(format!(
                "{name}[{i}] {comment}: refused ({e}), expected {want}"
            )),
            (None, Some(_), Err(_)) => {}
            (None, Some(why), Ok(got)) => failures.push(format!(
                "{name}[{i}] {comment}: applied as {got}, expected an error ({why})"
            )),
            // A record with neither only says the patch applies.
            (None, None, Ok(_)) => {}
            (None, None, Err(e)) => failures.push(format!(
                "{name}[{i}] {comment}: refused ({e}), expected to apply"
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} records failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    (ran, disabled)
}

#[test]
fn the_public_rfc_6902_suite_passes() {
    let Some(dir) = corpus() else { return };
    let (ran, disabled) = run_file(&dir, "tests.json");
    assert_eq!((ran, disabled), (92, 3), "tests.json's records");
    let (ran, disabled) = run_file(&dir, "spec_tests.json");
    assert_eq!((ran, disabled), (16, 1), "spec_tests.json's records");
}
