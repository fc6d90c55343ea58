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
    let line = format!("{{\"agent\":null,\"version\":2,\"schema\":0,\"state\":{source_state}}}\n");
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
        json!([{"version": 3, "at": changes[0]["at"], "kind": "replace", "schema": 0,
                "migrated_from": null, "patch": null, "next": {"from": "source"}}])
    );
}

#[test]
fn import_checks_every_line_before_touching_the_store() {
    let dir = TempDir::new("cli_import_bad");
    let target = dir.file("target.db");
    let t = arg(&target);
    let good = r#"{"agent":null,"version":3,"state":{"a":1}}"#;
    let cases: [(String, &str, &str); 12] = [
        (
            r#"{"agent":null,"version":1,"schema":-1,"state":{}}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "schema must be an integer from 0 to 1000000",
        ),
        (
            r#"{"agent":null,"version":1,"schema":1000001,"state":{}}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "schema must be an integer",
        ),
        (
            r#"{"agent":null,"version":1,"schema":"2","state":{}}"#.into(),
            "AGENT_ERR_INVALID_ARGUMENT",
            "schema must be an integer",
        ),
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
        "{\"agent\":\"alice\",\"version\":1,\"schema\":0,\"state\":{\"from\":\"alice\"}}\n"
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
    Agent::open_with(&empty, &opts(json!({}))).unwrap();
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

/// Schema versions across export and import, on SQLite and, when AGENT_STATE_TEST_PG_URI names
/// a server, on PostgreSQL (agents under an id prefix of the run's own).
mod schema {
    use std::path::Path;
    use std::time::{SystemTime, UNIX_EPOCH};

    use agent_state::Agent;
    use serde_json::{json, Value};

    use crate::{opts, run_with_stdin, Run, TempDir};

    /// The steps of version 2: `messages` added (0 -> 1), `nick` renamed `name` (1 -> 2).
    const STEPS: &str = r#"[
      {"from": 0, "ops": [{"op": "default", "path": "/messages", "value": []}]},
      {"from": 1, "ops": [{"op": "rename", "path": "/user/nick", "to": "name"}]}
    ]"#;

    /// One agent of a test: a store (a SQLite file of its own, or the server) and its id.
    struct Place {
        store: String,
        agent: String,
        pg: bool,
    }

    impl Place {
        /// `agent-state --agent ID COMMAND STORE EXTRA...` with `stdin`.
        fn run(&self, command: &str, extra: &[&str], stdin: Option<&[u8]>) -> Run {
            let mut argv = vec!["--agent", &self.agent, command, &self.store];
            argv.extend(extra);
            run_with_stdin(argv, stdin)
        }

        /// `agent-state --GLOBAL... COMMAND ...`: options before the command.
        fn run_with(
            &self,
            global: &[&str],
            command: &str,
            extra: &[&str],
            stdin: Option<&[u8]>,
        ) -> Run {
            let mut argv: Vec<&str> = global.to_vec();
            argv.extend(["--agent", &self.agent, command, &self.store]);
            argv.extend(extra);
            run_with_stdin(argv, stdin)
        }

        fn open(&self, extra: Value) -> Agent {
            let mut options = json!({ "agent_id": self.agent, "busy_timeout_ms": 30_000 });
            for (k, v) in extra.as_object().unwrap() {
                options[k] = v.clone();
            }
            Agent::open_with(Path::new(&self.store), &opts(options)).unwrap()
        }

        /// The agent as stored: its version, state and schema version.
        fn stored(&self) -> (u64, Value, u32) {
            let agent = self.open(json!({ "read_only": true }));
            let current = agent.get_state_versioned().unwrap();
            let (state, schema) = agent.state_at_stored(current.version).unwrap();
            (
                current.version,
                serde_json::from_slice(state.json()).unwrap(),
                schema,
            )
        }

        /// Nothing written: on SQLite not even the file, on the server no state of the agent.
        fn untouched(&self) -> bool {
            if self.pg {
                self.stored().0 == 0
            } else {
                !Path::new(&self.store).exists()
            }
        }
    }

    /// Where a test's agents live: `place(name)` is a fresh agent.
    struct Backend<'a> {
        dir: &'a TempDir,
        pg: Option<(String, String)>,
    }

    impl Backend<'_> {
        fn place(&self, name: &str) -> Place {
            match &self.pg {
                None => Place {
                    store: crate::arg(&self.dir.file(&format!("{name}.db"))).to_string(),
                    agent: "agent".into(),
                    pg: false,
                },
                Some((uri, ns)) => Place {
                    store: uri.clone(),
                    agent: format!("{ns}{name}"),
                    pg: true,
                },
            }
        }
    }

    fn backends<'a>(dir: &'a TempDir, test: &str) -> Vec<Backend<'a>> {
        let mut all = vec![Backend { dir, pg: None }];
        if let Some(uri) = std::env::var("AGENT_STATE_TEST_PG_URI")
            .ok()
            .filter(|u| !u.is_empty())
        {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let ns = format!("cli_{test}_{}_{nanos}/", std::process::id());
            all.push(Backend {
                dir,
                pg: Some((uri, ns)),
            });
        }
        all
    }

    fn steps(dir: &TempDir) -> String {
        let path = dir.file("steps.json");
        std::fs::write(&path, STEPS).unwrap();
        crate::arg(&path).to_string()
    }

    #[test]
    fn an_exported_state_is_imported_under_its_schema_version() {
        let dir = TempDir::new("cli_transfer_schema");
        for b in backends(&dir, "keep") {
            let source = b.place("source");
            // Written by a program of schema version 2 (nothing stored before: no migration).
            let writer = source.open(json!({ "schema_version": 2 }));
            writer
                .replace_state(br#"{"user":{"name":"ann"},"messages":[]}"#)
                .unwrap();
            drop(writer);
            let exported = source.run("export", &[], None);
            assert_eq!(
                exported.ok(),
                format!(
                    "{{\"agent\":{},\"version\":1,\"schema\":2,\"state\":{{\"user\":{{\"name\":\"ann\"}},\"messages\":[]}}}}\n",
                    serde_json::to_string(&source.agent).unwrap()
                )
            );
            // Into a fresh store, without --schema-version: stored under schema 2.
            let target = b.place("target");
            target.run("import", &[], Some(&exported.stdout)).ok();
            assert_eq!(
                target.stored(),
                (1, json!({"user": {"name": "ann"}, "messages": []}), 2)
            );
            // A program of version 2 finds it current; one of version 1 is refused.
            assert_eq!(
                target
                    .run_with(&["--schema-version", "2"], "get", &["--compact"], None)
                    .ok(),
                "{\"user\":{\"name\":\"ann\"},\"messages\":[]}\n"
            );
            target
                .run_with(&["--schema-version", "1"], "get", &[], None)
                .failed("AGENT_ERR_NEWER_SCHEMA");
            // And exported again, the line says the same schema.
            assert!(target
                .run("export", &[], None)
                .ok()
                .contains("\"version\":1,\"schema\":2,"));
        }
    }

    #[test]
    fn a_line_without_schema_imports_as_schema_0() {
        let dir = TempDir::new("cli_transfer_schema_old");
        for b in backends(&dir, "old") {
            let target = b.place("target");
            let line = br#"{"agent":null,"version":4,"state":{"user":{"nick":"bo"}}}"#;
            target.run("import", &[], Some(line)).ok();
            assert_eq!(target.stored(), (1, json!({"user": {"nick": "bo"}}), 0));
            // A program of version 2 then migrates it once, as any state of schema 0.
            let steps = steps(&dir);
            assert_eq!(
                target
                    .run_with(
                        &["--schema-version", "2", "--steps", &steps],
                        "get",
                        &["--compact"],
                        None
                    )
                    .ok(),
                "{\"user\":{\"name\":\"bo\"},\"messages\":[]}\n"
            );
        }
    }

    #[test]
    fn schema_version_upgrades_an_older_line_and_refuses_a_newer_one() {
        let dir = TempDir::new("cli_transfer_schema_upgrade");
        let steps = steps(&dir);
        for b in backends(&dir, "upgrade") {
            let old = br#"{"agent":null,"version":3,"schema":0,"state":{"user":{"nick":"cy"}}}"#;
            // Upgraded by the steps before it is written: version 1, schema 2, no migration.
            let target = b.place("upgraded");
            let r = target.run_with(
                &["--schema-version", "2", "--steps", &steps],
                "import",
                &[],
                Some(old),
            );
            let report: Value = serde_json::from_str(r.ok()).unwrap();
            assert_eq!(report["agents"][0]["version"], 1);
            assert_eq!(
                target.stored(),
                (1, json!({"user": {"name": "cy"}, "messages": []}), 2)
            );
            // A step missing: AGENT_ERR_MIGRATION naming the line and the step, nothing written.
            let missing = b.place("missing");
            missing
                .run_with(&["--schema-version", "2"], "import", &[], Some(old))
                .failed("AGENT_ERR_MIGRATION")
                .says("line 1")
                .says("schema step 0 -> 1");
            assert!(missing.untouched());
            // A line of a newer schema than --schema-version: refused, nothing written.
            let newer = b.place("newer");
            newer
                .run_with(
                    &["--schema-version", "1"],
                    "import",
                    &[],
                    Some(br#"{"agent":null,"version":1,"schema":2,"state":{}}"#),
                )
                .failed("AGENT_ERR_NEWER_SCHEMA")
                .says("line 1")
                .says("schema version 2");
            assert!(newer.untouched());
            // The same schema as --schema-version: written as it is.
            let same = b.place("same");
            same.run_with(
                &["--schema-version", "1"],
                "import",
                &[],
                Some(br#"{"agent":null,"version":1,"schema":1,"state":{"a":1}}"#),
            )
            .ok();
            assert_eq!(same.stored(), (1, json!({"a": 1}), 1));
        }
    }

    #[test]
    fn a_target_state_of_another_schema_is_refused_or_migrated_as_for_any_write() {
        let dir = TempDir::new("cli_transfer_schema_force");
        let steps = steps(&dir);
        for b in backends(&dir, "force") {
            let line = br#"{"agent":null,"version":7,"schema":2,"state":{"user":{"name":"di"},"messages":[]}}"#;
            // Without --force a held state is a conflict, whatever its schema, and the import
            // commits nothing (not even a migration of the old state).
            let older = b.place("older");
            older
                .open(json!({}))
                .replace_state(br#"{"user":{"nick":"old"}}"#)
                .unwrap();
            older
                .run_with(&["--steps", &steps], "import", &[], Some(line))
                .failed("AGENT_ERR_CONFLICT")
                .says("--force");
            assert_eq!(older.stored(), (1, json!({"user": {"nick": "old"}}), 0));
            // --force over a state of an older schema with no step for it: the library's
            // migration of the old state fails, nothing is written.
            older
                .run("import", &["--force"], Some(line))
                .failed("AGENT_ERR_MIGRATION")
                .says("line 1");
            assert_eq!(older.stored(), (1, json!({"user": {"nick": "old"}}), 0));
            // With the steps: migrated (version 2), then replaced (version 3), under schema 2.
            let r = older.run_with(&["--steps", &steps], "import", &["--force"], Some(line));
            let report: Value = serde_json::from_str(r.ok()).unwrap();
            assert_eq!(report["agents"][0]["version"], 3);
            assert_eq!(
                older.stored(),
                (3, json!({"user": {"name": "di"}, "messages": []}), 2)
            );
            // --force over a state of a newer schema: refused, left as it was.
            let newer = b.place("newer");
            newer
                .open(json!({ "schema_version": 3 }))
                .replace_state(br#"{"v":3}"#)
                .unwrap();
            newer
                .run("import", &["--force"], Some(line))
                .failed("AGENT_ERR_NEWER_SCHEMA")
                .says("line 1");
            assert_eq!(newer.stored(), (1, json!({"v": 3}), 3));
        }
    }

    #[test]
    fn export_reads_any_schema_as_stored() {
        let dir = TempDir::new("cli_transfer_schema_export");
        for b in backends(&dir, "export") {
            let source = b.place("source");
            source
                .open(json!({ "schema_version": 5 }))
                .replace_state(br#"{"v":5}"#)
                .unwrap();
            // Whatever --schema-version says: export opens read-only and upgrades nothing.
            let line = source.run_with(&["--schema-version", "1"], "export", &[], None);
            assert!(
                line.ok().contains("\"schema\":5,\"state\":{\"v\":5}"),
                "{line:?}"
            );
        }
    }
}
