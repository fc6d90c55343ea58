//! check: a sound store passes; a corrupt, foreign or tampered one fails with STORAGE.

use std::path::Path;

use serde_json::Value;

use crate::{arg, run, store_with, TempDir};

fn report(stdout: &str) -> Value {
    serde_json::from_str(stdout).expect("check prints a JSON report")
}

/// Changes the file behind the library's back, as a user in the sqlite3 shell would.
fn tamper(path: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(sql).unwrap();
}

#[test]
fn a_sound_store_passes() {
    let dir = TempDir::new("cli_check_ok");
    let path = dir.file("s.db");
    let agent = store_with(&path, r#"{"a":1}"#, Some(10));
    agent.set_state(br#"{"b":2}"#).unwrap();
    let r = report(run(["check", arg(&path)]).ok());
    assert_eq!(r["ok"], true);
    assert_eq!(r["integrity"]["ok"], true);
    assert_eq!(r["schema"]["ok"], true);
    assert_eq!(r["state"]["version"], 2);
    assert_eq!(r["change_log"]["enabled"], true);
    assert_eq!(r["change_log"]["checked"], 2);
    assert_eq!(r["change_log"]["oldest_retained"], 1);

    let plain = dir.file("plain.db");
    store_with(&plain, r#"{"a":1}"#, None);
    let r = report(run(["check", arg(&plain)]).ok());
    assert_eq!(r["ok"], true);
    assert_eq!(r["change_log"]["enabled"], false);
}

#[test]
fn a_file_that_is_not_a_database_fails() {
    let dir = TempDir::new("cli_check_garbage");
    let path = dir.file("s.db");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let before = std::fs::read(&path).unwrap();
    let run = run(["check", arg(&path)]);
    run.failed_with_output("AGENT_ERR_STORAGE")
        .says("integrity");
    let r = report(run.stdout());
    assert_eq!(r["ok"], false);
    assert_eq!(r["integrity"]["ok"], false);
    assert_eq!(r["schema"]["ok"], false);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "check wrote to the file"
    );
}

#[test]
fn a_truncated_store_fails_the_integrity_check() {
    let dir = TempDir::new("cli_check_truncated");
    let path = dir.file("s.db");
    // A state spread over many pages, checkpointed into the main file, then cut in half.
    let big = format!("{{\"blob\":\"{}\"}}", "y".repeat(200_000));
    drop(store_with(&path, &big, None));
    tamper(&path, "PRAGMA wal_checkpoint(TRUNCATE);");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let run = run(["check", arg(&path)]);
    run.failed_with_output("AGENT_ERR_STORAGE");
    let r = report(run.stdout());
    assert_eq!(r["ok"], false);
    assert_eq!(r["integrity"]["ok"], false, "{r}");
}

#[test]
fn a_foreign_sqlite_file_fails_the_schema_check() {
    let dir = TempDir::new("cli_check_foreign");
    let path = dir.file("other.db");
    tamper(&path, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    let run = run(["check", arg(&path)]);
    run.failed_with_output("AGENT_ERR_STORAGE").says("schema");
    let r = report(run.stdout());
    assert_eq!(r["integrity"]["ok"], true);
    assert_eq!(r["schema"]["ok"], false);
}

#[test]
fn a_state_or_logged_state_that_no_longer_decodes_fails() {
    let dir = TempDir::new("cli_check_tampered");
    let path = dir.file("s.db");
    let agent = store_with(&path, r#"{"a":1}"#, Some(10));
    agent.set_state(br#"{"b":2}"#).unwrap();
    agent.set_state(br#"{"c":3}"#).unwrap();
    drop(agent);
    tamper(
        &path,
        "UPDATE agent_changes SET next = CAST('{\"a\":1,\"a\":2}' AS BLOB) WHERE version = 2;",
    );
    let run1 = run(["check", arg(&path)]);
    run1.failed_with_output("AGENT_ERR_STORAGE")
        .says("change_log version 2");
    let r = report(run1.stdout());
    assert_eq!(r["state"]["ok"], true);
    assert_eq!(r["change_log"]["ok"], false);
    assert_eq!(r["change_log"]["errors"][0]["version"], 2);

    tamper(
        &path,
        "UPDATE agent_state SET value = CAST('{\"a\":' AS BLOB) WHERE agent = '';",
    );
    let run2 = run(["check", arg(&path)]);
    run2.failed_with_output("AGENT_ERR_STORAGE").says("state");
    let r = report(run2.stdout());
    assert_eq!(r["integrity"]["ok"], true);
    assert_eq!(r["state"]["ok"], false);
    // And the other commands refuse to show it, with the same status.
    run(["get", arg(&path)])
        .failed("AGENT_ERR_STORAGE")
        .says("corrupt");
}

#[test]
fn check_never_creates_a_store() {
    let dir = TempDir::new("cli_check_missing");
    let path = dir.file("missing.db");
    run(["check", arg(&path)]).failed_with_output("AGENT_ERR_STORAGE");
    assert!(!path.exists());
}
