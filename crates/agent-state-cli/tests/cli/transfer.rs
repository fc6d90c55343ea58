//! export and import: agents move between stores byte-exactly, through the library.

use agent_state::Agent;
use serde_json::{json, Value};

use crate::{arg, opts, run, run_with_stdin, store_with, stored, TempDir};

/// A state that a lossy copy would change: exact numbers, member order, escapes, non-ASCII
/// text, tagged values.
const STATE: &str = r#"{"z":1,"a":0.1000000000000000055511151231257827,"big":-12345678901234567890123,"e":1E-7,"text":"tab\t \"quote\" \u00e9 \ud83d\ude00 </script>","when":{"$date":"2026-11-30T03:06:44.123Z"},"m":{"$map":[[1,"one"],[{"k":1},[true,null]]]},"s":{"$set":[1,"1"]},"n":{"$bigint":"-9"},"r":{"$regexp":{"source":"a+b","flags":"gi"}},"bytes":{"$arraybuffer":"AAEC"},"nested":{"deep":[[[{}]]]}}"#;

#[test]
fn export_then_import_moves_the_state_byte_exactly() {
    let dir = TempDir::new("cli_roundtrip");
    let source = dir.file("source.db");
    let agent = store_with(&source, STATE, None);
    agent.set_state(br#"{"z":2}"#).unwrap();
    let (source_state, source_version) = stored(&source);
    assert_eq!(source_version, 2);

    let exported = run(["export", arg(&source)]);
    let line = format!("{{\"agent\":null,\"version\":2,\"state\":{source_state}}}\n");
    assert_eq!(exported.ok(), line, "one line, the stored bytes inside");

    let target = dir.file("target.db");
    let imported = run_with_stdin(["import", arg(&target)], Some(&exported.stdout));
    let report: Value = serde_json::from_str(imported.ok()).unwrap();
    assert_eq!(
        report,
        json!({"imported": 1, "agents": [{"agent": null, "source_version": 2, "version": 1}]})
    );
    assert_eq!(stored(&target), (source_state.clone(), 1));
    // And back again, from a file this time: still the same bytes.
    let file = dir.file("agents.jsonl");
    std::fs::write(&file, run(["export", arg(&target)]).ok()).unwrap();
    let back = dir.file("back.db");
    run(["import", arg(&back), arg(&file)]).ok();
    assert_eq!(stored(&back), (source_state, 1));
}

#[test]
fn import_refuses_to_overwrite_a_state_unless_forced() {
    let dir = TempDir::new("cli_import_force");
    let source = dir.file("source.db");
    store_with(&source, r#"{"from":"source"}"#, None);
    let line = run(["export", arg(&source)]).stdout;
    let target = dir.file("target.db");
    let target_agent = store_with(&target, r#"{"from":"target"}"#, Some(10));
    target_agent.set_state(br#"{"again":1}"#).unwrap();

    run_with_stdin(["import", arg(&target)], Some(&line))
        .failed("AGENT_ERR_CONFLICT")
        .says("already holds a state")
        .says("--force");
    assert_eq!(
        stored(&target),
        (r#"{"from":"target","again":1}"#.to_string(), 2)
    );

    let forced = run_with_stdin(["import", arg(&target), "--force"], Some(&line));
    let report: Value = serde_json::from_str(forced.ok()).unwrap();
    assert_eq!(report["agents"][0]["source_version"], 1);
    assert_eq!(report["agents"][0]["version"], 3);
    assert_eq!(stored(&target), (r#"{"from":"source"}"#.to_string(), 3));
    // Written through the library: the target's change log has it, as a replacement.
    let changes: Value = serde_json::from_slice(&target_agent.changes_since(2).unwrap()).unwrap();
    assert_eq!(
        changes,
        json!([{"version": 3, "at": changes[0]["at"], "schema": 0, "migrated_from": null,
                "patch": null, "next": {"from": "source"}}])
    );
}

#[test]
fn import_checks_every_line_before_touching_the_store() {
    let dir = TempDir::new("cli_import_bad");
    let target = dir.file("target.db");
    let t = arg(&target);
    let good = r#"{"agent":null,"version":3,"state":{"a":1}}"#;
    let cases: [(String, &str, &str); 9] = [
        (
            format!("{good}\n{good}\n"),
            "AGENT_ERR_INVALID_ARGUMENT",
            "line 2 is a second agent",
        ),
        (
            r#"{"agent":7,"version":1,"state":{}}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "agent must be null or a string",
        ),
        (
            r#"{"agent":null,"version":1,"state":[1]}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "state must be a JSON object",
        ),
        (
            r#"{"agent":null,"version":0,"state":{}}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "version",
        ),
        (
            r#"{"agent":null,"state":{}}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "no \"version\"",
        ),
        (
            r#"{"agent":null,"version":1,"state":{},"x":1}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "unknown member",
        ),
        (
            r#"{"agent":null,"version":1,"state":{"a":1,"a":2}}"#.into(),
            "AGENT_ERR_CODEC",
            "line 1",
        ),
        (
            r#"{"agent":null,"version":1,"state":{"a":"#.into(),
            "AGENT_ERR_JSON",
            "line 1",
        ),
        (
            r#"[1]"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "not an agent",
        ),
    ];
    for (input, status, message) in cases {
        run_with_stdin(["import", t], Some(input.as_bytes()))
            .failed(status)
            .says(message);
        assert!(!target.exists(), "refused input created the store: {input}");
    }
    // A codec error inside a well-formed line is the library's, at write time.
    run_with_stdin(
        ["import", t],
        Some(br#"{"agent":null,"version":1,"state":{"d":{"$date":"nope"}}}"#),
    )
    .failed("AGENT_ERR_CODEC");
    run(["import", t, arg(&dir.file("missing.jsonl"))]).failed("AGENT_ERR_STORAGE");
    let long = format!(
        "{{\"agent\":null,\"version\":1,\"state\":{{\"a\":\"{}\"}}}}",
        "x".repeat(70_000)
    );
    run_with_stdin(
        ["--max-value-bytes", "16", "import", t],
        Some(long.as_bytes()),
    )
    .failed("AGENT_ERR_TOO_LARGE");
    let fresh = dir.file("fresh.db");
    run_with_stdin(
        ["import", arg(&fresh), "--agent", ""],
        Some(good.as_bytes()),
    )
    .failed("AGENT_ERR_INVALID_ARGUMENT")
    .says("agent_id");
    assert!(!fresh.exists(), "a refused agent id created the store");
}

/// An agent's line carries its id; import writes it into the agent `--agent` selects. Needs the
/// SQLite backend's many agents per file.
#[test]
fn export_and_import_between_agent_ids() {
    let dir = TempDir::new("cli_transfer_ids");
    let source = dir.file("source.db");
    let s = arg(&source);
    run(["--agent", "alice", "set", s, r#"{"from":"alice"}"#]).ok();
    let exported = run(["--agent", "alice", "export", s]);
    assert_eq!(
        exported.ok(),
        "{\"agent\":\"alice\",\"version\":1,\"state\":{\"from\":\"alice\"}}\n"
    );
    let target = dir.file("target.db");
    let t = arg(&target);
    let imported = run_with_stdin(["--agent", "bob", "import", t], Some(&exported.stdout));
    let report: Value = serde_json::from_str(imported.ok()).unwrap();
    assert_eq!(
        report,
        json!({"imported": 1, "agents": [{"agent": "bob", "source_version": 1, "version": 1}]})
    );
    assert_eq!(
        run(["--agent", "bob", "get", t, "--compact"]).ok(),
        "{\"from\":\"alice\"}\n"
    );
    assert_eq!(
        run(["--agent", "alice", "get", t, "--compact"]).ok(),
        "{}\n"
    );
    // The same file's other agent is still free for an import.
    run_with_stdin(["--agent", "carol", "import", s], Some(&exported.stdout)).ok();
    assert_eq!(
        run(["--agent", "alice", "version", s]).ok().trim(),
        "1",
        "importing into carol left alice alone"
    );
}

#[test]
fn an_empty_store_exports_nothing_and_importing_nothing_changes_nothing() {
    let dir = TempDir::new("cli_export_empty");
    let empty = dir.file("empty.db");
    Agent::open(&empty, &opts(json!({}))).unwrap();
    assert_eq!(run(["export", arg(&empty)]).ok(), "");
    let target = dir.file("target.db");
    store_with(&target, r#"{"kept":1}"#, None);
    let report: Value =
        serde_json::from_str(run_with_stdin(["import", arg(&target)], Some(b"\n")).ok()).unwrap();
    assert_eq!(report, json!({"imported": 0, "agents": []}));
    assert_eq!(stored(&target), (r#"{"kept":1}"#.to_string(), 1));
    let missing = dir.file("missing.db");
    run(["export", arg(&missing)]).failed("AGENT_ERR_STORAGE");
    assert!(!missing.exists());
}
