//! The interface itself: --help everywhere, the exit-code table, --agent, usage errors.

use std::collections::BTreeMap;

use crate::{arg, run, TempDir};

const SUBCOMMANDS: [&str; 14] = [
    "get", "set", "replace", "version", "history", "at", "restore", "watch", "export", "import",
    "ls", "rm", "expire", "check",
];

#[test]
fn every_subcommand_has_help() {
    for sub in SUBCOMMANDS {
        let help = run([sub, "--help"]);
        assert!(
            help.ok().contains(&format!("Usage: agent-state {sub}")),
            "{sub} --help: {help:?}"
        );
        assert!(help.stdout().contains("--agent"), "{sub} takes --agent");
        assert_eq!(run(["help", sub]).ok(), help.stdout());
    }
    let top = run(["--help"]);
    for sub in SUBCOMMANDS {
        assert!(
            top.ok().contains(&format!("  {sub} ")),
            "--help lists {sub}"
        );
    }
}

/// The exit-code table of `--help` is the C header's status table, each code 64 + status.
#[test]
fn exit_code_table_matches_the_c_header() {
    let header = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../include/agent_state.h"
    ))
    .unwrap();
    let statuses: BTreeMap<String, i32> = header
        .lines()
        .filter_map(|l| l.strip_prefix("#define AGENT_ERR_"))
        .map(|rest| {
            let (name, number) = rest.split_once(' ').unwrap();
            (format!("AGENT_ERR_{name}"), number.trim().parse().unwrap())
        })
        .collect();
    assert!(statuses.len() >= 12, "{statuses:?}");
    let help = run(["--help"]);
    let table: BTreeMap<String, i32> = help
        .ok()
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let code = words.next()?.parse::<i32>().ok()?;
            let name = words.next()?;
            name.starts_with("AGENT_ERR_")
                .then(|| (name.to_string(), code))
        })
        .collect();
    let expected: BTreeMap<String, i32> = statuses.into_iter().map(|(n, s)| (n, 64 + s)).collect();
    assert_eq!(table, expected);
    assert!(help.stdout().contains("2    usage error"));
    assert!(help.stdout().contains("76   AGENT_ERR_UNAVAILABLE (12)"));
    assert!(help.stdout().contains("77   AGENT_ERR_AUTH (13)"));
    assert!(help.stdout().contains("78   AGENT_ERR_CANCELLED (14)"));
}

/// `--agent ID` is the library's `agent_id`: agents of one file are isolated. Needs the
/// SQLite backend's many agents per file.
#[test]
fn agent_ids_select_isolated_agents_of_one_file() {
    let dir = TempDir::new("cli_agent");
    let path = dir.file("s.db");
    let p = arg(&path);
    run(["--agent", "a", "set", p, r#"{"who":"a"}"#, "--compact"]).ok();
    run(["set", p, r#"{"who":"b"}"#, "--agent", "b", "--compact"]).ok();
    run(["--agent", "b", "set", p, r#"{"n":2}"#, "--compact"]).ok();
    assert_eq!(
        run(["--agent", "a", "get", p, "--compact"]).ok(),
        "{\"who\":\"a\"}\n"
    );
    assert_eq!(
        run(["get", p, "--agent", "b", "--compact"]).ok(),
        "{\"who\":\"b\",\"n\":2}\n"
    );
    assert_eq!(run(["--agent", "a", "version", p]).ok().trim(), "1");
    assert_eq!(run(["--agent", "b", "version", p]).ok().trim(), "2");
    assert_eq!(run(["--agent", "c", "get", p, "--compact"]).ok(), "{}\n");
}

/// Every command that opens a store takes `--agent`, before or after the subcommand.
#[test]
fn every_command_takes_an_agent_id() {
    let dir = TempDir::new("cli_agent_all");
    let path = dir.file("s.db");
    let p = arg(&path);
    let log = r#"{"keep_last":10}"#;
    run(["--agent", "x", "--change-log", log, "set", p, r#"{"a":1}"#]).ok();
    run(["--agent", "x", "set", p, r#"{"b":2}"#]).ok();
    let commands: [&[&str]; 9] = [
        &["get", p],
        &["set", p, "{}"],
        &["replace", p, r#"{"a":1,"b":2}"#],
        &["version", p],
        &["history", p],
        &["at", p, "1"],
        &["restore", p, "1"],
        &["export", p],
        &["check", p],
    ];
    for args in commands {
        let mut after = args.to_vec();
        after.extend(["--agent", "x"]);
        let mut before = vec!["--agent", "x"];
        before.extend(args);
        for argv in [after, before] {
            let r = run(&argv);
            assert_eq!(r.code, 0, "{argv:?}: {r:?}");
        }
    }
    let export = run(["--agent", "x", "export", p, "--compact"]);
    assert!(
        export.ok().starts_with(r#"{"agent":"x","version":"#),
        "{export:?}"
    );
}

#[test]
fn bad_agent_ids_are_refused_before_anything_is_created() {
    let dir = TempDir::new("cli_agent_bad");
    let missing = dir.file("missing.db");
    let long = "x".repeat(256);
    for id in ["", long.as_str()] {
        run(["--agent", id, "set", arg(&missing), "{}"])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("agent_id");
        assert!(!missing.exists(), "a refused command created the store");
    }
    for n in ["0", "1001"] {
        run(["--max-connections", n, "set", arg(&missing), "{}"])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("max_connections");
    }
    // Without a store, --agent selects nothing: refused, not ignored.
    run(["--agent", "x", "version"])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("--agent");
}

/// A PostgreSQL URI is the server's, never a file name: with no server there, every command
/// fails with AGENT_ERR_UNAVAILABLE (exit 76) and creates nothing in the working directory.
#[test]
fn an_unreachable_server_is_exit_76() {
    let dir = TempDir::new("cli_pg_unreachable");
    let cwd = dir.file("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let uri = "postgresql://app:s3cret@127.0.0.1:1/postgres";
    for args in [
        vec!["get", uri],
        vec!["set", uri, "{}"],
        vec!["version", uri],
        vec!["export", uri],
        vec!["check", uri],
    ] {
        let mut argv = vec!["--agent", "a", "--busy-timeout-ms", "2000"];
        argv.extend(&args);
        let out = std::process::Command::new(crate::BIN)
            .args(&argv)
            .current_dir(&cwd)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64 + 12), "{argv:?}: {stderr}");
        assert!(
            stderr.starts_with("agent-state: AGENT_ERR_UNAVAILABLE: "),
            "{argv:?}: {stderr}"
        );
        if args[0] == "check" {
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["store"], "postgresql://app:***@127.0.0.1:1/postgres");
            assert_eq!(report["integrity"]["ok"], true, "{report}");
            assert_eq!(report["schema"]["ok"], false, "{report}");
        } else {
            assert!(out.stdout.is_empty(), "{argv:?}");
        }
    }
    let created: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
    assert!(
        created.is_empty(),
        "the URI was taken for a file name: {created:?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    for argv in [
        vec!["frobnicate"],
        vec!["get"],
        vec!["at", "s.db", "minus-one"],
        vec!["get", "s.db", "--pretty", "--compact"],
        vec!["--synchronous", "sometimes", "get", "s.db"],
        vec![],
    ] {
        let r = run(&argv);
        assert_eq!(r.code, 2, "{argv:?}: {r:?}");
        // clap's message, or with no arguments at all the help, on stderr.
        assert!(
            r.stderr.starts_with("error: ") || r.stderr.contains("Usage: agent-state"),
            "{argv:?}: {r:?}"
        );
        assert!(r.stdout.is_empty(), "{argv:?}: {r:?}");
    }
}

#[test]
fn reading_commands_never_create_a_store() {
    let dir = TempDir::new("cli_never_create");
    let path = dir.file("missing.db");
    let p = arg(&path);
    for argv in [
        vec!["get", p],
        vec!["version", p],
        vec!["history", p],
        vec!["at", p, "0"],
        vec!["export", p],
    ] {
        run(&argv).failed("AGENT_ERR_STORAGE").says("missing.db");
        assert!(!path.exists(), "{argv:?} created the store");
    }
}
