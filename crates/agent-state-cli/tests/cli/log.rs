//! history, at, restore and --change-log: the change log through the command.

use serde_json::{json, Value};

use crate::{arg, run, store_with, stored, TempDir};

/// The versions and `next` states of a `history` output.
fn versions_and_states(history: &str) -> Vec<(u64, String)> {
    let changes: Value = serde_json::from_str(history).unwrap();
    changes
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["version"].as_u64().unwrap(), c["next"].to_string()))
        .collect()
}

#[test]
fn history_prints_the_library_change_feed() {
    let dir = TempDir::new("cli_history");
    let path = dir.file("s.db");
    let agent = store_with(&path, r#"{"n":1}"#, Some(100));
    agent.set_state(br#"{"n":2}"#).unwrap();
    agent.set_state(br#"{"m":"x"}"#).unwrap();
    let all = run(["history", arg(&path)]);
    // Byte for byte what the library's changes_since gives.
    let expected = String::from_utf8(agent.changes_since(0).unwrap()).unwrap();
    assert_eq!(all.ok(), format!("{expected}\n"));
    assert_eq!(
        versions_and_states(all.stdout()),
        vec![
            (1, r#"{"n":1}"#.to_string()),
            (2, r#"{"n":2}"#.to_string()),
            (3, r#"{"n":2,"m":"x"}"#.to_string()),
        ]
    );
    let since = run(["history", arg(&path), "--since", "2"]);
    let changes: Value = serde_json::from_str(since.ok()).unwrap();
    assert_eq!(
        changes,
        json!([{"version": 3, "at": changes[0]["at"], "kind": "merge", "schema": 0,
                "migrated_from": null, "patch": {"m": "x"}, "next": {"n": 2, "m": "x"}}])
    );
    assert_eq!(run(["history", arg(&path), "--since", "3"]).ok(), "[]\n");
    run(["history", arg(&path), "--since", "4"])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("future");
}

#[test]
fn history_lists_what_the_retention_kept_and_gap_for_older() {
    let dir = TempDir::new("cli_history_pruned");
    let path = dir.file("s.db");
    let agent = store_with(&path, r#"{"n":1}"#, Some(2));
    for n in 2..=5 {
        agent
            .set_state(format!("{{\"n\":{n}}}").as_bytes())
            .unwrap();
    }
    let kept = run(["history", arg(&path)]);
    let versions: Vec<u64> = versions_and_states(kept.ok())
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(versions, vec![4, 5]);
    run(["history", arg(&path), "--since", "1"])
        .failed("AGENT_ERR_GAP")
        .says("oldest retained: 4");
    run(["at", arg(&path), "2"]).failed("AGENT_ERR_GAP");
    assert_eq!(run(["at", arg(&path), "4"]).ok(), "{\"n\":4}\n");
}

#[test]
fn history_without_the_change_log_says_how_to_switch_it_on() {
    let dir = TempDir::new("cli_history_off");
    let path = dir.file("s.db");
    store_with(&path, r#"{"n":1}"#, None);
    for args in [vec!["history"], vec!["history", "--since", "0"]] {
        let mut args = args.clone();
        args.insert(1, arg(&path));
        run(&args)
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("the change log is off")
            .says("--change-log");
    }
}

#[test]
fn at_and_restore_go_back_to_a_logged_version() {
    let dir = TempDir::new("cli_restore");
    let path = dir.file("s.db");
    let agent = store_with(&path, r#"{"step":"one"}"#, Some(10));
    agent.set_state(br#"{"step":"two","extra":[1]}"#).unwrap();
    agent.replace_state(br#"{"other":true}"#).unwrap();
    assert_eq!(run(["at", arg(&path), "1"]).ok(), "{\"step\":\"one\"}\n");
    assert_eq!(
        run(["at", arg(&path), "2"]).ok(),
        "{\"step\":\"two\",\"extra\":[1]}\n"
    );
    assert_eq!(run(["at", arg(&path), "3"]).ok(), "{\"other\":true}\n");
    assert_eq!(run(["at", arg(&path), "0"]).ok(), "{}\n");
    run(["at", arg(&path), "4"]).failed("AGENT_ERR_INVALID_ARGUMENT");
    assert_eq!(
        run(["restore", arg(&path), "1", "--versioned"]).ok(),
        "{\"version\":4,\"state\":{\"step\":\"one\"}}\n"
    );
    assert_eq!(stored(&path), ("{\"step\":\"one\"}".to_string(), 4));
    // The restore is a logged change like any other (a replacement: patch null), and the
    // handle that wrote the earlier versions reads it.
    let last = run(["history", arg(&path), "--since", "3"]);
    let changes: Value = serde_json::from_str(last.ok()).unwrap();
    assert_eq!(changes[0]["version"], 4);
    assert_eq!(changes[0]["patch"], Value::Null);
    assert_eq!(agent.get_state().unwrap().json(), br#"{"step":"one"}"#);
    run(["restore", arg(&path), "9"]).failed("AGENT_ERR_INVALID_ARGUMENT");
}

#[test]
fn change_log_is_switched_only_when_told_and_only_by_a_write() {
    let dir = TempDir::new("cli_change_log");
    let path = dir.file("s.db");
    run(["set", arg(&path), r#"{"a":1}"#]).ok();
    run(["history", arg(&path)]).failed("AGENT_ERR_INVALID_ARGUMENT");
    // A reading command refuses the option rather than failing on its read-only open.
    run(["--change-log", r#"{"keep_last":5}"#, "get", arg(&path)])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("only commands that write");
    run(["--change-log", r#"{"keep":5}"#, "set", arg(&path), "{}"])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("change_log");
    run(["--change-log", "{", "set", arg(&path), "{}"]).failed("AGENT_ERR_JSON");
    run([
        "--change-log",
        r#"{"keep_last":5}"#,
        "set",
        arg(&path),
        r#"{"b":2}"#,
    ])
    .ok();
    let versions: Vec<u64> = versions_and_states(run(["history", arg(&path)]).ok())
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(
        versions,
        vec![2],
        "logged from the write that switched it on"
    );
    run(["--change-log", "false", "set", arg(&path), r#"{"c":3}"#]).ok();
    run(["history", arg(&path)]).failed("AGENT_ERR_INVALID_ARGUMENT");
}
