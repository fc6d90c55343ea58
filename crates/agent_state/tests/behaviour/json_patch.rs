//! RFC 6902 JSON Patch writes and reads of one place: the public RFC 6902 suite through an
//! agent, appends to a growing list stored as deltas, what hooks, the validator and the change
//! log see, compare-and-set, and every bad input refused with nothing written. On either
//! backend (`#[each_backend]`, crates/test-support).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_state::{
    Agent, ChangeKind, Error, ErrorKind, OpenOptions, StateChange, StateChangedHook, Validator,
};
use serde_json::{json, Value};

use test_support::{backend, each_backend, open, opts, text, Backend, TempDir};

/// The cases of tests/conformance/json_patch/cases.py, generated from the public suite in
/// ../shared (generated here when missing; without the corpus, `None`, a failure under CI).
fn cases() -> Option<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out: PathBuf = root.join("target/conformance/json-patch-cases.json");
    let corpus = root.join("../shared/corpora/json-patch-tests");
    if !corpus.is_dir() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no RFC 6902 corpus at {} (CI has ../shared beside the checkout)",
            corpus.display()
        );
        eprintln!("no RFC 6902 corpus at {}: skipped", corpus.display());
        return None;
    }
    let status = std::process::Command::new("python3")
        .arg(root.join("tests/conformance/json_patch/cases.py"))
        .arg(&out)
        .status()
        .expect("python3 runs tests/conformance/json_patch/cases.py");
    assert!(status.success(), "cases.py failed");
    Some(serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap())
}

fn status_name(result: &Result<impl Sized, Error>) -> String {
    match result {
        Ok(_) => "AGENT_OK".to_string(),
        Err(e) => format!("AGENT_ERR_{}", e.kind().name()),
    }
}

#[each_backend]
fn the_public_rfc_6902_suite_passes_through_an_agent() {
    let Some(cases) = cases() else { return };
    let dir = TempDir::new("json_patch_suite");
    let store = dir.store("suite.db");
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for (n, case) in cases["cases"].as_array().unwrap().iter().enumerate() {
        let id = case["id"].as_str().unwrap();
        let agent = open(&store, &opts(json!({"agent_id": format!("case{n}")}))).unwrap();
        let state = case["state"].as_str().unwrap().as_bytes();
        let before = agent.replace_state_if(state, None).unwrap();
        let result = agent.patch_state_if(case["patch"].as_str().unwrap().as_bytes(), None);
        lines.push(format!("{id} {}", status_name(&result)));
        match (case.get("expect"), result) {
            (Some(expect), Ok(got)) => {
                let want: Value = serde_json::from_str(expect.as_str().unwrap()).unwrap();
                let got_value: Value = serde_json::from_slice(got.state.json()).unwrap();
                // The library's own equality (numbers by value, members in any order)...
                let verify = agent.patch_state(case["verify"].as_str().unwrap().as_bytes());
                // ...and serde_json's, where the spelling of numbers agrees.
                if verify.is_err() || (got_value != want && !numbers_differ_only(&got_value)) {
                    failures.push(format!("{id}: got {got_value}, expected {want}"));
                }
                // What was stored is what was returned.
                assert_eq!(text(&agent.get_state().unwrap()), text(&got.state), "{id}");
            }
            (Some(_), Err(e)) => failures.push(format!("{id}: refused ({e})")),
            (None, Ok(got)) if case.get("error").is_some() => {
                failures.push(format!("{id}: applied as {}", text(&got.state)))
            }
            (None, Ok(_)) => {}
            (None, Err(e)) if case.get("error").is_some() => {
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::InvalidArgument
                            | ErrorKind::Path
                            | ErrorKind::TestFailed
                            | ErrorKind::Codec
                    ),
                    "{id}: {e}"
                );
                let after = agent.get_state_versioned().unwrap();
                assert_eq!(
                    (text(&after.state), after.version),
                    (text(&before.state), before.version),
                    "{id}: a refused patch wrote something"
                );
            }
            (None, Err(e)) => failures.push(format!("{id}: refused ({e}), expected to apply")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let name = match backend() {
        Backend::Sqlite => "rust-sqlite",
        Backend::Postgres => "rust-postgres",
    };
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/conformance/json-patch");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(format!("{name}.txt")), lines.join("\n") + "\n").unwrap();
}

/// Whether `v` holds a number whose spelling serde_json compares as text (with
/// `arbitrary_precision`, `1` and `1.0` differ): the library's own `test` decided then.
fn numbers_differ_only(v: &Value) -> bool {
    match v {
        Value::Number(_) => true,
        Value::Array(a) => a.iter().any(numbers_differ_only),
        Value::Object(m) => m.values().any(numbers_differ_only),
        _ => false,
    }
}

/// A hook and a validator that record what they see: kind, patch, version.
#[derive(Default)]
struct Seen(Mutex<Vec<(ChangeKind, Option<String>, u64)>>);

impl StateChangedHook for Seen {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        let patch = c
            .patch
            .as_ref()
            .map(|p| String::from_utf8(p.json().to_vec()).unwrap());
        self.0.lock().unwrap().push((c.kind, patch, c.version));
        Ok(())
    }
}

struct NoEmptyText;

impl Validator for NoEmptyText {
    fn validate(&self, c: &StateChange) -> Result<(), String> {
        let ops = c.patch.as_ref().map(|p| p.value().clone());
        if c.kind == ChangeKind::JsonPatch
            && ops.is_some_and(|o| o.to_string().contains(r#""text":"""#))
        {
            return Err("a message needs text".into());
        }
        Ok(())
    }
}

#[each_backend]
fn appends_reach_hooks_the_validator_and_the_log_as_operations() {
    let dir = TempDir::new("json_patch_hooks");
    let agent = open(
        &dir.store("a.db"),
        &opts(json!({"initial_state": {"messages": []}, "change_log": {"keep_last": 100}})),
    )
    .unwrap();
    let seen = Arc::new(Seen::default());
    agent.on_state_changed(seen.clone()).unwrap();
    agent.set_validator(Some(Arc::new(NoEmptyText))).unwrap();
    let append = |text: &str| {
        format!(r#"[{{"op":"add","path":"/messages/-","value":{{"text":"{text}"}}}}]"#)
    };
    agent.patch_state(append("hi").as_bytes()).unwrap();
    agent.patch_state(append("there").as_bytes()).unwrap();
    let refused = agent.patch_state(append("").as_bytes()).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Rejected, "{refused}");
    agent.set_state(br#"{"status":"done"}"#).unwrap();
    let state = agent.get_state().unwrap();
    assert_eq!(
        text(&state),
        r#"{"messages":[{"text":"hi"},{"text":"there"}],"status":"done"}"#
    );
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (ChangeKind::JsonPatch, Some(append("hi")), 1),
            (ChangeKind::JsonPatch, Some(append("there")), 2),
            (ChangeKind::Merge, Some(r#"{"status":"done"}"#.into()), 3),
        ]
    );
    // The log keeps the operations, says their kind, and rebuilds every state from them.
    let log: Value = serde_json::from_slice(&agent.changes_since(0).unwrap()).unwrap();
    let kinds: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["json_patch", "json_patch", "merge"]);
    assert_eq!(
        log[1]["patch"],
        json!([{"op":"add","path":"/messages/-","value":{"text":"there"}}])
    );
    assert_eq!(
        text(&agent.state_at(1).unwrap()),
        r#"{"messages":[{"text":"hi"}]}"#
    );
    agent.restore(1).unwrap();
    assert_eq!(
        text(&agent.get_state().unwrap()),
        r#"{"messages":[{"text":"hi"}]}"#
    );
}

/// A list grown by appends past the size at which delta storage keeps patches reads back the
/// same from a fresh handle, and each append stored only its operation.
#[each_backend]
fn a_long_list_grown_by_appends_reads_back_from_a_fresh_handle() {
    let dir = TempDir::new("json_patch_delta");
    let store = dir.store("a.db");
    let options = opts(json!({"initial_state": {"messages": []}}));
    let agent = open(&store, &options).unwrap();
    let mut expected = Vec::new();
    for i in 0..400 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        // Written as text: `1.50` must reach the store as it is spelled.
        let message = format!(
            r#"{{"role":"{role}","text":"message {i} {}","n":{i},"f":1.50}}"#,
            "x".repeat(150)
        );
        let op = format!(r#"[{{"op":"add","path":"/messages/-","value":{message}}}]"#);
        agent.patch_state(op.as_bytes()).unwrap();
        expected.push(serde_json::from_str::<Value>(&message).unwrap());
    }
    let written = text(&agent.get_state().unwrap());
    assert!(written.len() > 60_000, "{}", written.len());
    drop(agent);
    let fresh = open(&store, &options).unwrap();
    assert_eq!(text(&fresh.get_state().unwrap()), written);
    let got: Value = serde_json::from_slice(fresh.get_state().unwrap().json()).unwrap();
    assert_eq!(got["messages"].as_array().unwrap().len(), 400);
    assert!(
        written.contains(r#""f":1.50"#),
        "numbers keep their spelling"
    );
    // Reads of one place, and the last ones.
    assert_eq!(
        fresh.get_path("/messages/399/n").unwrap(),
        b"399",
        "the last message's number"
    );
    let tail: Value = serde_json::from_slice(&fresh.get_tail("/messages", 2).unwrap()).unwrap();
    assert_eq!(tail, json!([expected[398], expected[399]]));
}

#[each_backend]
fn compare_and_set_and_tests_guard_a_patch() {
    let dir = TempDir::new("json_patch_cas");
    let agent = open(&dir.store("a.db"), &OpenOptions::default()).unwrap();
    let v1 = agent
        .set_state_if(br#"{"status":"draft","n":1}"#, None)
        .unwrap();
    let publish = br#"[{"op":"test","path":"/status","value":"draft"},
                       {"op":"replace","path":"/status","value":"published"}]"#;
    let stale = agent
        .patch_state_if(publish, Some(v1.version + 1))
        .unwrap_err();
    assert!(matches!(stale, Error::Conflict { .. }), "{stale}");
    let v2 = agent.patch_state_if(publish, Some(v1.version)).unwrap();
    assert_eq!(v2.version, v1.version + 1);
    // The same patch again: its test no longer holds; named by index and path.
    match agent.patch_state(publish).unwrap_err() {
        Error::TestFailed {
            operation,
            path,
            message,
        } => {
            assert_eq!((operation, path.as_str()), (0, "/status"));
            assert!(message.contains("operation 0"), "{message}");
        }
        e => panic!("expected a failed test: {e}"),
    }
    // A patch whose result is the stored state commits nothing.
    let same = agent
        .patch_state_if(br#"[{"op":"replace","path":"/n","value":1}]"#, None)
        .unwrap();
    assert_eq!(same.version, v2.version);
}

#[each_backend]
fn bad_patches_earn_a_specific_status_and_write_nothing() {
    let dir = TempDir::new("json_patch_bad");
    let agent = open(&dir.store("a.db"), &opts(json!({"max_value_bytes": 4096}))).unwrap();
    agent
        .set_state(br#"{"list":[1,2,3],"obj":{"a":1}}"#)
        .unwrap();
    let big = format!(
        r#"[{{"op":"add","path":"/x","value":"{}"}}]"#,
        "y".repeat(5000)
    );
    let grow = format!(
        r#"[{{"op":"add","path":"/x","value":"{}"}},{{"op":"copy","from":"/x","path":"/y"}}]"#,
        "y".repeat(3000)
    );
    let cases: Vec<(&[u8], ErrorKind, &str)> = vec![
        (
            br#"{"op":"add","path":"/a","value":1}"#,
            ErrorKind::InvalidArgument,
            "array",
        ),
        (
            br#"[{"op":"frob","path":"/a"}]"#,
            ErrorKind::InvalidArgument,
            "unknown op",
        ),
        (
            br#"[{"op":"add","path":"/a"}]"#,
            ErrorKind::InvalidArgument,
            "value",
        ),
        (
            br#"[{"op":"add","path":"/a","path":"/b","value":1}]"#,
            ErrorKind::Codec,
            "duplicate",
        ),
        (
            br#"[{"op":"add","path":"/a~2","value":1}]"#,
            ErrorKind::InvalidArgument,
            "~2",
        ),
        (
            br#"[{"op":"remove","path":"/list/01"}]"#,
            ErrorKind::Path,
            "/list/01",
        ),
        (
            br#"[{"op":"remove","path":"/list/3"}]"#,
            ErrorKind::Path,
            "/list/3",
        ),
        (
            br#"[{"op":"remove","path":"/nope"}]"#,
            ErrorKind::Path,
            "/nope",
        ),
        (
            br#"[{"op":"add","path":"/nope/x","value":1}]"#,
            ErrorKind::Path,
            "/nope/x",
        ),
        (
            br#"[{"op":"move","from":"/obj","path":"/obj/a/b"}]"#,
            ErrorKind::Path,
            "move",
        ),
        (
            br#"[{"op":"test","path":"/obj/a","value":2}]"#,
            ErrorKind::TestFailed,
            "/obj/a",
        ),
        (
            br#"[{"op":"replace","path":"","value":[1]}]"#,
            ErrorKind::InvalidArgument,
            "object",
        ),
        (
            br#"[{"op":"add","path":"/d","value":{"$date":5}}]"#,
            ErrorKind::Codec,
            "$date",
        ),
        (
            br#"[{"op":"add","path":"/a","value":1}"#,
            ErrorKind::Json,
            "",
        ),
        (
            b"[{\"op\":\"add\",\"path\":\"/a\",\"value\":\"\xff\"}]",
            ErrorKind::Json,
            "UTF-8",
        ),
        (big.as_bytes(), ErrorKind::TooLarge, "max_value_bytes"),
        (grow.as_bytes(), ErrorKind::TooLarge, "max_value_bytes"),
    ];
    for (patch, kind, says) in cases {
        let shown = String::from_utf8_lossy(patch)
            .chars()
            .take(60)
            .collect::<String>();
        let e = agent.patch_state(patch).unwrap_err();
        assert_eq!(e.kind(), kind, "{shown}: {e}");
        assert!(e.to_string().contains(says), "{shown}: {e}");
        let after = agent.get_state_versioned().unwrap();
        assert_eq!(
            (text(&after.state).as_str(), after.version),
            (r#"{"list":[1,2,3],"obj":{"a":1}}"#, 1),
            "{shown}"
        );
    }
    // A second operation's failure undoes the first's.
    let e = agent
        .patch_state(br#"[{"op":"add","path":"/z","value":1},{"op":"remove","path":"/q"}]"#)
        .unwrap_err();
    assert!(
        matches!(&e, Error::NoSuchPath { operation: Some(1), path, .. } if path == "/q"),
        "{e:?}"
    );
    assert_eq!(agent.get_state_versioned().unwrap().version, 1);
}

#[each_backend]
fn reads_of_one_place() {
    let dir = TempDir::new("json_patch_reads");
    let agent = open(
        &dir.store("a.db"),
        &opts(json!({"initial_state": {"messages": [{"t": "first"}], "a/b": {"~": 7}}})),
    )
    .unwrap();
    // From the initial state, which a read never stores.
    assert_eq!(agent.get_path("/messages/0/t").unwrap(), br#""first""#);
    assert_eq!(agent.get_path("/a~1b/~0").unwrap(), b"7");
    assert_eq!(
        agent.get_path("").unwrap(),
        text(&agent.get_state().unwrap()).as_bytes()
    );
    assert_eq!(agent.get_state_versioned().unwrap().version, 0);
    for (pointer, kind) in [
        ("/messages/1", ErrorKind::Path),
        ("/messages/-", ErrorKind::Path),
        ("/messages/00", ErrorKind::Path),
        ("/nope", ErrorKind::Path),
        ("messages", ErrorKind::InvalidArgument),
        ("/a~2", ErrorKind::InvalidArgument),
    ] {
        let e = agent.get_path(pointer).unwrap_err();
        assert_eq!(e.kind(), kind, "{pointer}: {e}");
    }
    match agent.get_path("/nope").unwrap_err() {
        Error::NoSuchPath {
            path, operation, ..
        } => assert_eq!((path.as_str(), operation), ("/nope", None)),
        e => panic!("{e}"),
    }
    assert_eq!(
        agent.get_tail("/messages", 5).unwrap(),
        br#"[{"t":"first"}]"#
    );
    assert_eq!(agent.get_tail("/messages", 0).unwrap(), b"[]");
    assert_eq!(
        agent.get_tail("/a~1b", 1).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let _ = Agent::builder; // the module's tests open through test_support::open
}

/// Another handle (as another process would) receives a JSON Patch change through its hooks
/// when it polls, rebuilt from the logged operations, with its kind.
#[each_backend]
fn other_handles_see_json_patch_changes_with_their_kind() {
    let dir = TempDir::new("json_patch_feed");
    let store = dir.store("a.db");
    let options =
        opts(json!({"initial_state": {"todo": ["a", "b"]}, "change_log": {"keep_last": 10}}));
    let writer = open(&store, &options).unwrap();
    let reader = open(&store, &options).unwrap();
    let seen = Arc::new(Seen::default());
    reader.on_state_changed(seen.clone()).unwrap();
    reader.get_state().unwrap();
    writer.set_state(br#"{"n":1}"#).unwrap();
    writer
        .patch_state(
            br#"[{"op":"remove","path":"/todo/0"},{"op":"add","path":"/todo/-","value":"c"}]"#,
        )
        .unwrap();
    assert_eq!(reader.poll().unwrap(), 2);
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (ChangeKind::Merge, Some(r#"{"n":1}"#.into()), 1),
            (
                ChangeKind::JsonPatch,
                Some(r#"[{"op":"remove","path":"/todo/0"},{"op":"add","path":"/todo/-","value":"c"}]"#.into()),
                2
            ),
        ]
    );
    assert_eq!(
        text(&reader.get_state().unwrap()),
        r#"{"todo":["b","c"],"n":1}"#
    );
}
