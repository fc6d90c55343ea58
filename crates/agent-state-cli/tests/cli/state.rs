//! get, set, replace, version: the state itself, its exact bytes and its versions.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use agent_state::Agent;
use serde_json::json;

use crate::{arg, opts, run, run_with_stdin, store_with, stored, TempDir};

#[test]
fn get_on_a_missing_file_fails_without_creating_it() {
    let dir = TempDir::new("cli_get_missing");
    let path = dir.file("missing.db");
    run(["get", arg(&path)])
        .failed("AGENT_ERR_STORAGE")
        .says("missing.db");
    assert!(!path.exists(), "reading created the store");
}

#[test]
fn get_on_a_new_store_prints_the_initial_state_at_version_0() {
    let dir = TempDir::new("cli_get_new");
    let path = dir.file("s.db");
    Agent::open_with(&path, &opts(json!({}))).unwrap();
    assert_eq!(run(["get", arg(&path)]).ok(), "{}\n");
    assert_eq!(
        run(["get", arg(&path), "--versioned"]).ok(),
        "{\"version\":0,\"state\":{}}\n"
    );
    assert_eq!(run(["version", arg(&path)]).ok(), "0\n");
    assert_eq!(
        stored(&path),
        ("{}".to_string(), 0),
        "reading stored nothing"
    );
}

#[test]
fn set_merges_from_the_argument_and_from_stdin() {
    let dir = TempDir::new("cli_set");
    let path = dir.file("s.db");
    // A fresh file is created by a write.
    let first = run(["set", arg(&path), r#"{"a":1,"b":{"c":[1,2],"d":"x"}}"#]);
    assert_eq!(first.ok(), "{\"a\":1,\"b\":{\"c\":[1,2],\"d\":\"x\"}}\n");
    let second = run_with_stdin(
        ["set", arg(&path), "-", "--versioned"],
        Some(b"{\"b\":{\"c\":null},\"e\":true}\n"),
    );
    assert_eq!(
        second.ok(),
        "{\"version\":2,\"state\":{\"a\":1,\"b\":{\"d\":\"x\"},\"e\":true}}\n"
    );
    assert_eq!(
        stored(&path),
        ("{\"a\":1,\"b\":{\"d\":\"x\"},\"e\":true}".to_string(), 2)
    );
    assert_eq!(run(["version", arg(&path)]).ok(), "2\n");
}

#[test]
fn replace_stores_the_whole_document_from_the_argument_and_from_stdin() {
    let dir = TempDir::new("cli_replace");
    let path = dir.file("s.db");
    store_with(&path, r#"{"old":1}"#, None);
    assert_eq!(
        run(["replace", arg(&path), r#"{"new":[1,{"x":null}]}"#]).ok(),
        "{\"new\":[1,{\"x\":null}]}\n"
    );
    let from_stdin = run_with_stdin(
        ["replace", arg(&path), "-", "--versioned"],
        Some(br#"{"z":"\u00e9\n"}"#),
    );
    assert_eq!(
        from_stdin.ok(),
        "{\"version\":3,\"state\":{\"z\":\"\u{e9}\\n\"}}\n"
    );
    assert_eq!(stored(&path), ("{\"z\":\"\u{e9}\\n\"}".to_string(), 3));
}

/// The library's encoding is printed as is (compact) or only re-indented (pretty): numbers
/// keep their digits, members their order.
#[test]
fn output_is_compact_on_a_pipe_and_pretty_when_asked() {
    let dir = TempDir::new("cli_pretty");
    let path = dir.file("s.db");
    let state = r#"{"z":0.1000000000000000055511151231257827,"big":12345678901234567890123,"e":1E2,"s":"a,b:{c}","o":{},"l":[],"d":{"$date":"2026-11-30T03:06:44.123Z"}}"#;
    let compact = r#"{"z":0.1000000000000000055511151231257827,"big":12345678901234567890123,"e":1e+2,"s":"a,b:{c}","o":{},"l":[],"d":{"$date":"2026-11-30T03:06:44.123Z"}}"#;
    assert_eq!(
        run(["replace", arg(&path), state]).ok(),
        format!("{compact}\n")
    );
    assert_eq!(
        stored(&path).0,
        compact,
        "what was printed is what is stored"
    );
    assert_eq!(run(["get", arg(&path)]).ok(), format!("{compact}\n"));
    assert_eq!(
        run(["get", arg(&path), "--compact"]).ok(),
        format!("{compact}\n")
    );
    let pretty = "{\n  \"z\": 0.1000000000000000055511151231257827,\n  \"big\": \
                  12345678901234567890123,\n  \"e\": 1e+2,\n  \"s\": \"a,b:{c}\",\n  \"o\": {},\n  \
                  \"l\": [],\n  \"d\": {\n    \"$date\": \"2026-11-30T03:06:44.123Z\"\n  }\n}\n";
    assert_eq!(run(["get", arg(&path), "--pretty"]).ok(), pretty);
    let other = dir.file("t.db");
    store_with(&other, r#"{"a":[1,{"b":null}]}"#, None);
    assert_eq!(
        run(["--pretty", "get", arg(&other), "--versioned"]).ok(),
        "{\n  \"version\": 1,\n  \"state\": {\n    \"a\": [\n      1,\n      {\n        \
         \"b\": null\n      }\n    ]\n  }\n}\n"
    );
}

#[test]
fn compare_and_set_refuses_a_stale_version() {
    let dir = TempDir::new("cli_cas");
    let path = dir.file("s.db");
    store_with(&path, r#"{"n":1}"#, None);
    run(["set", arg(&path), r#"{"n":2}"#, "--if-version", "0"])
        .failed("AGENT_ERR_CONFLICT")
        .says("expected version 0, but the state is at version 1");
    run(["replace", arg(&path), r#"{"m":1}"#, "--if-version", "7"]).failed("AGENT_ERR_CONFLICT");
    assert_eq!(
        stored(&path),
        ("{\"n\":1}".to_string(), 1),
        "nothing written"
    );
    assert_eq!(
        run([
            "set",
            arg(&path),
            r#"{"n":2}"#,
            "--if-version",
            "1",
            "--versioned"
        ])
        .ok(),
        "{\"version\":2,\"state\":{\"n\":2}}\n"
    );
    assert_eq!(
        run(["replace", arg(&path), r#"{"m":1}"#, "--if-version", "2"]).ok(),
        "{\"m\":1}\n"
    );
    assert_eq!(stored(&path), ("{\"m\":1}".to_string(), 3));
}

#[test]
fn bad_documents_get_the_library_status_and_change_nothing() {
    let dir = TempDir::new("cli_bad_input");
    let path = dir.file("s.db");
    store_with(&path, r#"{"keep":true}"#, None);
    let p = arg(&path);
    run(["set", p, r#"{"a":"#]).failed("AGENT_ERR_JSON");
    run(["set", p, r#"{"a":1,"a":2}"#]).failed("AGENT_ERR_CODEC");
    run(["replace", p, r#"{"d":{"$date":"yesterday"}}"#]).failed("AGENT_ERR_CODEC");
    run(["set", p, "[1]"])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("object");
    run(["replace", p, "1e400"]).failed("AGENT_ERR_INVALID_ARGUMENT");
    // Invalid UTF-8 reaches the library as bytes.
    let invalid = OsStr::from_bytes(b"{\"a\":\"\xff\"}");
    run([OsStr::new("set"), path.as_os_str(), invalid]).failed("AGENT_ERR_JSON");
    // Over the cap, on the command line and on standard input.
    let big = format!("{{\"a\":\"{}\"}}", "x".repeat(64));
    run(["--max-value-bytes", "32", "set", p, &big]).failed("AGENT_ERR_TOO_LARGE");
    run_with_stdin(
        ["replace", p, "-", "--max-value-bytes", "32"],
        Some(big.as_bytes()),
    )
    .failed("AGENT_ERR_TOO_LARGE")
    .says("standard input");
    // An option the library refuses, in its words.
    run(["--max-value-bytes", "1", "get", p])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("max_value_bytes");
    assert_eq!(stored(&path), ("{\"keep\":true}".to_string(), 1));
}

#[test]
fn the_store_remembers_the_cap_a_write_recorded() {
    let dir = TempDir::new("cli_store_cap");
    let path = dir.file("s.db");
    let p = arg(&path);
    run(["--store-max-value-bytes", "48", "set", p, r#"{"a":1}"#]).ok();
    // Later commands without a cap of their own use the store's.
    let big = format!("{{\"a\":\"{}\"}}", "x".repeat(64));
    run(["set", p, &big])
        .failed("AGENT_ERR_TOO_LARGE")
        .says("store_max_value_bytes (48)");
    run(["--max-value-bytes", "1000", "set", p, &big]).ok();
    // Only commands that write record it.
    run(["--store-max-value-bytes", "100", "get", p])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("--store-max-value-bytes");
}

#[test]
fn read_only_refuses_writes_and_leaves_the_file_as_it_was() {
    let dir = TempDir::new("cli_read_only");
    let path = dir.file("s.db");
    store_with(&path, r#"{"a":1}"#, None);
    run(["--read-only", "set", arg(&path), r#"{"a":2}"#]).failed("AGENT_ERR_STORAGE");
    assert_eq!(stored(&path), ("{\"a\":1}".to_string(), 1));
    let missing = dir.file("missing.db");
    run(["set", arg(&missing), "{}", "--read-only"]).failed("AGENT_ERR_STORAGE");
    assert!(!missing.exists());
}

#[test]
fn version_without_a_store_is_the_program_version() {
    let expected = format!("{{\"agent_state\":\"{}\"}}\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(run(["version"]).ok(), expected);
    assert!(run(["--version"]).ok().contains(env!("CARGO_PKG_VERSION")));
}
