//! The interface itself: --help everywhere, the exit-code table, --agent, usage errors.

use std::collections::BTreeMap;

use crate::{arg, run, store_with, TempDir};

const SUBCOMMANDS: [&str; 11] = [
    "get", "set", "replace", "version", "history", "at", "restore", "watch", "export", "import",
    "check",
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
        "/include/agent_state.h"
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
}

#[test]
fn agent_ids_are_refused_until_stores_hold_many_agents() {
    let dir = TempDir::new("cli_agent");
    let path = dir.file("s.db");
    store_with(&path, r#"{"a":1}"#, Some(10));
    let p = arg(&path);
    let commands: [&[&str]; 11] = [
        &["get", p],
        &["set", p, "{}"],
        &["replace", p, "{}"],
        &["version", p],
        &["version"],
        &["history", p],
        &["at", p, "1"],
        &["restore", p, "1"],
        &["watch", p],
        &["export", p],
        &["check", p],
    ];
    for args in commands {
        // As a global option before the subcommand and as its own option after it.
        let mut after = args.to_vec();
        after.extend(["--agent", "x"]);
        let mut before = vec!["--agent", "x"];
        before.extend(args);
        for argv in [after, before] {
            let r = run(&argv);
            assert_eq!(r.code, 64 + 1, "{argv:?}: {r:?}");
            assert!(
                r.stderr.starts_with(
                    "agent-state: AGENT_ERR_INVALID_ARGUMENT: --agent \"x\": \
                     this store holds a single agent; --agent needs agent_id support"
                ),
                "{argv:?}: {r:?}"
            );
        }
    }
    let missing = dir.file("missing.db");
    run(["--agent", "x", "set", arg(&missing), "{}"]).failed("AGENT_ERR_INVALID_ARGUMENT");
    assert!(!missing.exists(), "a refused command created the store");
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
