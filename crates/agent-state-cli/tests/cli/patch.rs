//! patch (RFC 6902 JSON Patch) and get --path / --tail (one place of the state, by RFC 6901
//! JSON Pointer): what they print, their exit codes, and that a refused patch writes nothing.

use agent_state::Agent;
use serde_json::{json, Value};

use crate::{arg, opts, run, run_with_stdin, store_with, stored, TempDir};

const CONVERSATION: &str =
    r#"{"status":"idle","messages":[{"text":"a"},{"text":"b"},{"text":"c"}],"a/b":{"m~n":1}}"#;

#[test]
fn patch_applies_operations_from_the_argument_and_from_stdin() {
    let dir = TempDir::new("cli_patch");
    let path = dir.file("s.db");
    // A fresh file is created by a write, like `set`.
    assert_eq!(
        run([
            "patch",
            arg(&path),
            r#"[{"op":"add","path":"/messages","value":[]}]"#
        ])
        .ok(),
        "{\"messages\":[]}\n"
    );
    let ops = br#"[{"op":"add","path":"/messages/-","value":{"text":"hi"}},
                   {"op":"add","path":"/status","value":"busy"},
                   {"op":"copy","from":"/messages/0","path":"/last"},
                   {"op":"test","path":"/last/text","value":"hi"}]"#;
    assert_eq!(
        run_with_stdin(["patch", arg(&path), "-", "--versioned"], Some(ops)).ok(),
        "{\"version\":2,\"state\":{\"messages\":[{\"text\":\"hi\"}],\"status\":\"busy\",\
         \"last\":{\"text\":\"hi\"}}}\n"
    );
    assert_eq!(
        run([
            "patch",
            arg(&path),
            r#"[{"op":"move","from":"/last","path":"/first"},{"op":"remove","path":"/messages/0"},{"op":"replace","path":"/status","value":"idle"}]"#,
        ])
        .ok(),
        "{\"messages\":[],\"status\":\"idle\",\"first\":{\"text\":\"hi\"}}\n"
    );
    assert_eq!(
        stored(&path),
        (
            r#"{"messages":[],"status":"idle","first":{"text":"hi"}}"#.to_string(),
            3
        )
    );
}

#[test]
fn patch_compare_and_set_refuses_a_stale_version() {
    let dir = TempDir::new("cli_patch_cas");
    let path = dir.file("s.db");
    store_with(&path, r#"{"n":1}"#, None);
    let ops = r#"[{"op":"replace","path":"/n","value":2}]"#;
    run(["patch", arg(&path), ops, "--if-version", "0"])
        .failed("AGENT_ERR_CONFLICT")
        .says("expected version 0, but the state is at version 1");
    assert_eq!(stored(&path), ("{\"n\":1}".to_string(), 1));
    assert_eq!(
        run(["patch", arg(&path), ops, "--if-version", "1", "--versioned"]).ok(),
        "{\"version\":2,\"state\":{\"n\":2}}\n"
    );
}

/// Every way a patch can be refused: its status and exit code, and nothing written.
#[test]
fn refused_patches_get_their_status_and_change_nothing() {
    let dir = TempDir::new("cli_patch_refused");
    let path = dir.file("s.db");
    store_with(&path, CONVERSATION, Some(10));
    let p = arg(&path);
    let refused = |ops: &str, status: &str, says: &str| {
        run(["patch", p, ops]).failed(status).says(says);
    };
    // The state is not what the patch expects: AGENT_ERR_PATH (exit 81).
    refused(
        r#"[{"op":"remove","path":"/missing"}]"#,
        "AGENT_ERR_PATH",
        "operation 0 (remove \"/missing\")",
    );
    refused(
        r#"[{"op":"add","path":"/x","value":1},{"op":"add","path":"/messages/9","value":1}]"#,
        "AGENT_ERR_PATH",
        "operation 1",
    );
    refused(
        r#"[{"op":"replace","path":"/messages/01","value":1}]"#,
        "AGENT_ERR_PATH",
        "operation 0",
    );
    refused(
        r#"[{"op":"move","from":"/messages","path":"/messages/0"}]"#,
        "AGENT_ERR_PATH",
        "own child",
    );
    // A test that does not hold: AGENT_ERR_TEST_FAILED (exit 82), the earlier operations
    // undone with it.
    refused(
        r#"[{"op":"add","path":"/x","value":1},{"op":"test","path":"/status","value":"busy"}]"#,
        "AGENT_ERR_TEST_FAILED",
        "operation 1 (test \"/status\")",
    );
    // A malformed patch: AGENT_ERR_INVALID_ARGUMENT.
    refused(
        r#"{"status":"busy"}"#,
        "AGENT_ERR_INVALID_ARGUMENT",
        "array of operations",
    );
    refused(
        r#"[{"op":"append","path":"/x","value":1}]"#,
        "AGENT_ERR_INVALID_ARGUMENT",
        "unknown op",
    );
    refused(
        r#"[{"op":"add","path":"/x"}]"#,
        "AGENT_ERR_INVALID_ARGUMENT",
        "\"value\" is missing",
    );
    refused(
        r#"[{"op":"add","path":"/x~2","value":1}]"#,
        "AGENT_ERR_INVALID_ARGUMENT",
        "not a JSON Pointer",
    );
    // A result that is not an object.
    refused(
        r#"[{"op":"replace","path":"","value":[1]}]"#,
        "AGENT_ERR_INVALID_ARGUMENT",
        "not a JSON object",
    );
    // Not JSON, a duplicate member, over the cap.
    run(["patch", p, r#"[{"op":"#]).failed("AGENT_ERR_JSON");
    run([
        "patch",
        p,
        r#"[{"op":"add","path":"/x","value":{"a":1,"a":2}}]"#,
    ])
    .failed("AGENT_ERR_CODEC");
    let big = format!(
        r#"[{{"op":"add","path":"/x","value":"{}"}}]"#,
        "x".repeat(64)
    );
    run(["--max-value-bytes", "48", "patch", p, &big]).failed("AGENT_ERR_TOO_LARGE");
    run_with_stdin(
        ["patch", p, "-", "--max-value-bytes", "48"],
        Some(big.as_bytes()),
    )
    .failed("AGENT_ERR_TOO_LARGE")
    .says("standard input");
    // Read-only.
    run([
        "--read-only",
        "patch",
        p,
        r#"[{"op":"add","path":"/x","value":1}]"#,
    ])
    .failed("AGENT_ERR_STORAGE");
    assert_eq!(
        stored(&path),
        (CONVERSATION.to_string(), 1),
        "nothing written"
    );
    assert_eq!(run(["history", p, "--since", "1"]).ok(), "[]\n");
}

#[test]
fn history_shows_a_json_patch_with_its_kind_and_operations() {
    let dir = TempDir::new("cli_patch_history");
    let path = dir.file("s.db");
    store_with(&path, r#"{"messages":[]}"#, Some(10));
    let ops = r#"[{"op":"add","path":"/messages/-","value":"hi"}]"#;
    run(["patch", arg(&path), ops]).ok();
    run(["set", arg(&path), r#"{"status":"done"}"#]).ok();
    let history: Value = serde_json::from_str(run(["history", arg(&path)]).ok()).unwrap();
    let kinds: Vec<(u64, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["version"].as_u64().unwrap(), c["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [(1, "replace"), (2, "json_patch"), (3, "merge")]);
    assert_eq!(
        history[1]["patch"],
        json!([{"op": "add", "path": "/messages/-", "value": "hi"}])
    );
    assert_eq!(history[1]["next"], json!({"messages": ["hi"]}));
    // `at` rebuilds the state of a logged JSON Patch.
    assert_eq!(
        run(["at", arg(&path), "2"]).ok(),
        "{\"messages\":[\"hi\"]}\n"
    );
}

#[test]
fn get_path_and_tail_print_one_place() {
    let dir = TempDir::new("cli_get_path");
    let path = dir.file("s.db");
    store_with(&path, CONVERSATION, None);
    let p = arg(&path);
    let get = |args: &[&str]| {
        let mut all = vec!["get", p];
        all.extend_from_slice(args);
        run(all)
    };
    assert_eq!(get(&["--path", "/status"]).ok(), "\"idle\"\n");
    assert_eq!(get(&["--path", "/messages/1/text"]).ok(), "\"b\"\n");
    assert_eq!(get(&["--path", "/a~1b/m~0n"]).ok(), "1\n");
    assert_eq!(get(&["--path", ""]).ok(), format!("{CONVERSATION}\n"));
    assert_eq!(
        get(&["--path", "/messages", "--tail", "1"]).ok(),
        "[{\"text\":\"c\"}]\n"
    );
    assert_eq!(
        get(&["--path", "/messages", "--tail", "2"]).ok(),
        "[{\"text\":\"b\"},{\"text\":\"c\"}]\n"
    );
    assert_eq!(
        get(&["--path", "/messages", "--tail", "10"]).ok(),
        "[{\"text\":\"a\"},{\"text\":\"b\"},{\"text\":\"c\"}]\n"
    );
    assert_eq!(get(&["--path", "/messages", "--tail", "0"]).ok(), "[]\n");
    assert_eq!(
        get(&["--path", "/a~1b", "--pretty"]).ok(),
        "{\n  \"m~n\": 1\n}\n"
    );
    // Nothing there: AGENT_ERR_PATH (exit 81).
    get(&["--path", "/missing"])
        .failed("AGENT_ERR_PATH")
        .says("/missing");
    get(&["--path", "/messages/3"]).failed("AGENT_ERR_PATH");
    get(&["--path", "/messages/-"]).failed("AGENT_ERR_PATH");
    get(&["--path", "/missing", "--tail", "1"]).failed("AGENT_ERR_PATH");
    // Not a pointer, or a tail of something that is not an array.
    get(&["--path", "status"])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("JSON Pointer");
    get(&["--path", "/x~2"]).failed("AGENT_ERR_INVALID_ARGUMENT");
    get(&["--path", "/status", "--tail", "1"])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("not an array");
    // Usage errors (exit 2): --tail names no array without --path; --versioned prints a
    // whole state.
    assert_eq!(get(&["--tail", "1"]).code, 2);
    assert_eq!(get(&["--path", "/status", "--versioned"]).code, 2);
    assert_eq!(
        stored(&path),
        (CONVERSATION.to_string(), 1),
        "reads wrote nothing"
    );
}

#[test]
fn get_path_reads_the_initial_state_of_an_empty_store() {
    let dir = TempDir::new("cli_get_path_empty");
    let path = dir.file("s.db");
    Agent::open_with(&path, &opts(json!({}))).unwrap();
    assert_eq!(run(["get", arg(&path), "--path", ""]).ok(), "{}\n");
    run(["get", arg(&path), "--path", "/messages", "--tail", "1"]).failed("AGENT_ERR_PATH");
}

/// With --schema-version, the place is read in the state upgraded to that version, as `get`
/// shows it, and the stored state is left as it was.
#[test]
fn get_path_with_a_schema_version_reads_the_upgraded_state() {
    let dir = TempDir::new("cli_get_path_schema");
    let path = dir.file("s.db");
    store_with(&path, r#"{"user":{"nick":"ada"}}"#, None);
    let steps = dir.file("steps.json");
    std::fs::write(
        &steps,
        r#"[{"from": 0, "ops": [{"op": "default", "path": "/messages", "value": ["hello"]}]},
            {"from": 1, "ops": [{"op": "rename", "path": "/user/nick", "to": "name"}]}]"#,
    )
    .unwrap();
    let get = |args: &[&str]| {
        let mut all = vec!["get", arg(&path), "--schema-version", "2", "--steps"];
        all.push(steps.to_str().unwrap());
        all.extend_from_slice(args);
        run(all)
    };
    assert_eq!(get(&["--path", "/user/name"]).ok(), "\"ada\"\n");
    assert_eq!(
        get(&["--path", "/messages", "--tail", "1"]).ok(),
        "[\"hello\"]\n"
    );
    get(&["--path", "/user/nick"]).failed("AGENT_ERR_PATH");
    get(&["--path", "user"]).failed("AGENT_ERR_INVALID_ARGUMENT");
    // Without it, the state as stored.
    assert_eq!(
        run(["get", arg(&path), "--path", "/user/nick"]).ok(),
        "\"ada\"\n"
    );
    assert_eq!(
        stored(&path),
        (r#"{"user":{"nick":"ada"}}"#.to_string(), 1),
        "nothing written"
    );
}
