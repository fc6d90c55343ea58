//! ls, rm, expire: a store's agents as a whole, on SQLite files and, when
//! AGENT_STATE_TEST_PG_URI names a server (tests/pg/with-server.sh), on PostgreSQL too: each
//! test runs its body on every backend there is, the agents of a PostgreSQL run in a namespace
//! of their own (an id prefix no other test or run uses).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_state::{Agent, Error};
use serde_json::{json, Value};

use crate::{arg, opts, run, Run, TempDir};

/// Where one run of a test's body keeps its agents.
struct Backend {
    /// STORE, as the command takes it: a file path or the server's URI.
    store: String,
    /// The prefix of this run's agent ids ("" on SQLite, where the file is the test's own).
    ns: String,
    pg: bool,
}

impl Backend {
    fn path(&self) -> &Path {
        Path::new(&self.store)
    }

    /// The full id of this run's agent `id`.
    fn id(&self, id: &str) -> String {
        format!("{}{id}", self.ns)
    }

    /// Opens this run's agent `id` through the library (`""`: a SQLite file's single agent).
    fn open(&self, id: &str, extra: Value) -> Agent {
        let mut options = json!({ "synchronous": "normal", "busy_timeout_ms": 10_000 });
        if !id.is_empty() || self.pg {
            options["agent_id"] = self.id(id).into();
        }
        for (k, v) in extra.as_object().unwrap() {
            options[k] = v.clone();
        }
        Agent::open_with(self.path(), &opts(options)).unwrap()
    }

    /// Writes `state` (a replacement) to agent `id` and returns its handle.
    fn write(&self, id: &str, state: &str) -> Agent {
        let agent = self.open(id, json!({}));
        agent.replace_state(state.as_bytes()).unwrap();
        agent
    }

    /// `ls` of this run's agents (on PostgreSQL, within its namespace) with `args`: the
    /// parsed lines, ids without the namespace.
    fn ls(&self, args: &[&str]) -> Vec<Value> {
        let mut argv = vec!["ls", &self.store];
        if self.pg && !args.contains(&"--prefix") {
            argv.extend(["--prefix", &self.ns]);
        }
        argv.extend(args);
        self.lines(&run(&argv))
    }

    /// The JSON lines a successful run printed, ids without the namespace; on PostgreSQL
    /// lines of other namespaces (other tests' agents, in expiry) are left out.
    fn lines(&self, r: &Run) -> Vec<Value> {
        r.ok()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter_map(|mut v| {
                let id = v["id"].as_str().unwrap();
                let local = id.strip_prefix(&self.ns)?.to_string();
                v["id"] = local.into();
                Some(v)
            })
            .collect()
    }
}

/// The ids of listing lines.
fn ids(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

/// This test's backends: a SQLite file in `dir`, then the PostgreSQL server when there is one.
fn backends(dir: &TempDir, name: &str) -> Vec<Backend> {
    let mut all = vec![Backend {
        store: arg(&dir.file(&format!("{name}.db"))).to_string(),
        ns: String::new(),
        pg: false,
    }];
    if let Some(uri) = std::env::var("AGENT_STATE_TEST_PG_URI")
        .ok()
        .filter(|u| !u.is_empty())
    {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        all.push(Backend {
            store: uri,
            ns: format!("cli_{name}_{}_{nanos}/", std::process::id()),
            pg: true,
        });
    }
    all
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Makes agent `id` look last written `days` ago, behind the library's back (as the store
/// would after that long).
fn age(b: &Backend, id: &str, days: i64) {
    let at = now_ms() - days * 86_400_000;
    let grain = at - at.rem_euclid(60_000);
    const SQL: &str = "UPDATE agent_state SET written_ms = $1, written_grain = $2 WHERE agent = $3";
    let n = if b.pg {
        test_support::server_client(&b.store)
            .execute(SQL, &[&at, &grain, &b.id(id)])
            .unwrap() as usize
    } else {
        rusqlite::Connection::open(b.path())
            .unwrap()
            .execute(SQL, rusqlite::params![at, grain, b.id(id)])
            .unwrap()
    };
    assert_eq!(n, 1, "no agent {id} to age");
}

/// Agents aged this long are the expiry test's alone (the core's suites age theirs 40 to 44
/// days, the bad-input test here 200), so on a shared server `--idle 365d` finds only them
/// (and leftovers of an earlier run, which the test expires first).
const AGED_DAYS: i64 = 400;
/// The bad-input test's aged agent: idle past its `--idle 180d`, not past `365d`; that test
/// deletes nothing by expiry (it runs beside the expiry test on a shared server).
const BAD_AGED_DAYS: i64 = 200;

#[test]
fn ls_streams_every_agent_in_id_order_through_pages() {
    let dir = TempDir::new("cli_ls");
    for b in backends(&dir, "ls") {
        let t0 = now_ms();
        // More than two pages (1000 ids each), written out of order.
        let n = 2_345;
        let mut names: Vec<String> = (0..n).map(|i| format!("a{i:04}")).collect();
        names.reverse();
        // The handles stay open: closing a file's last one closes its connection, which the
        // next open would open again.
        let handles: Vec<Agent> = names
            .iter()
            .map(|name| b.write(name, &format!(r#"{{"name":"{name}"}}"#)))
            .collect();
        let grown = b.write("b/1", r#"{"x":"0123456789"}"#);
        grown.set_state(br#"{"y":true}"#).unwrap();
        b.write("b/2", "{}");
        let t1 = now_ms();

        let all = b.ls(&[]);
        assert_eq!(all.len(), n + 2);
        names.sort();
        names.extend(["b/1".to_string(), "b/2".to_string()]);
        assert_eq!(ids(&all), names, "every agent, once, ordered by id");
        for line in &all {
            let keys: Vec<_> = line.as_object().unwrap().keys().cloned().collect();
            assert_eq!(keys, ["id", "version", "bytes", "written_at"], "{line}");
            let at = line["written_at"].as_i64().unwrap();
            assert!(t0 - 1000 <= at && at <= t1 + 1000, "{line}: {t0}..{t1}");
        }
        // version and bytes: the stored state's (its exact encoded length).
        let b1 = &all[n];
        assert_eq!(b1["bytes"], r#"{"x":"0123456789","y":true}"#.len());
        assert_eq!(b1["version"], grown.get_state_versioned().unwrap().version);
        assert_eq!(all[n + 1]["bytes"], 2);
        assert_eq!(all[0]["bytes"], r#"{"name":"a0000"}"#.len());

        // --limit across a page boundary, then --after the last id printed.
        let first = b.ls(&["--limit", "1500"]);
        assert_eq!(ids(&first), names[..1500]);
        let after = b.id(&names[1499]);
        let rest = b.ls(&["--after", &after]);
        assert_eq!(ids(&rest), names[1500..]);
        assert_eq!(
            ids(&b.ls(&["--after", &after, "--limit", "2"])),
            names[1500..1502]
        );
        // --prefix (on PostgreSQL the namespace's).
        let sub = b.id("b/");
        assert_eq!(ids(&b.ls(&["--prefix", &sub])), ["b/1", "b/2"]);
        assert_eq!(ids(&b.ls(&["--prefix", &sub, "--limit", "1"])), ["b/1"]);
        assert_eq!(
            ids(&b.ls(&["--prefix", &b.id("a1"), "--limit", "3"])),
            ["a1000", "a1001", "a1002"]
        );
        assert!(b.ls(&["--prefix", &b.id("zz")]).is_empty());
        // JSON Lines whatever the output options.
        assert_eq!(
            b.ls(&["--prefix", &sub, "--pretty"]),
            b.ls(&["--prefix", &sub])
        );
        // A reader that goes away after the first line (`ls | head -1`) ends it quietly.
        let mut child = std::process::Command::new(crate::BIN)
            .args(["ls", &b.store])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut first,
        )
        .unwrap();
        assert!(first.starts_with("{\"id\":"), "{first}");
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stderr.is_empty(), "{out:?}");
        drop(handles);
    }
}

#[test]
fn ls_of_a_file_lists_its_single_agent_first_and_rm_takes_its_empty_id() {
    let dir = TempDir::new("cli_ls_single");
    let path = dir.file("s.db");
    let p = arg(&path);
    run(["set", p, r#"{"single":1}"#]).ok();
    run(["set", p, r#"{"named":1}"#, "--agent", "x"]).ok();
    let out = run(["ls", p]);
    let lines: Vec<Value> = out
        .ok()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ids(&lines), ["", "x"]);
    // An empty file lists nothing.
    let empty = dir.file("empty.db");
    Agent::open_with(&empty, &opts(json!({}))).unwrap();
    assert_eq!(run(["ls", arg(&empty)]).ok(), "");

    assert_eq!(
        run(["rm", p, "--agent", ""]).ok(),
        "{\"id\":\"\",\"deleted_version\":1}\n"
    );
    assert_eq!(run(["get", p]).ok(), "{}\n");
    assert_eq!(run(["get", p, "--agent", "x"]).ok(), "{\"named\":1}\n");
    let out = run(["ls", p]);
    assert!(out.ok().starts_with("{\"id\":\"x\","), "{out:?}");
}

#[test]
fn rm_deletes_one_agent_and_open_handles_find_it_gone() {
    let dir = TempDir::new("cli_rm");
    for b in backends(&dir, "rm") {
        let a = b.write("a", r#"{"n":1}"#);
        a.set_state(br#"{"n":2}"#).unwrap();
        a.set_state(br#"{"n":3}"#).unwrap();
        b.write("b", r#"{"keep":true}"#);
        let id = b.id("a");

        assert_eq!(
            run(["rm", &b.store, "--agent", &id]).ok(),
            format!("{{\"id\":\"{id}\",\"deleted_version\":3}}\n")
        );
        assert_eq!(ids(&b.ls(&[])), ["b"]);
        // The open handle reads its initial state at version 0; a compare-and-set against
        // the version it read before never succeeds, and a new write continues above it.
        let now = a.get_state_versioned().unwrap();
        assert_eq!((now.state.json(), now.version), (&b"{}"[..], 0));
        let err = a.set_state_if(br#"{"n":4}"#, Some(3)).unwrap_err();
        assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
        let again = a.set_state_if(br#"{"again":1}"#, None).unwrap();
        assert!(
            again.version > 3,
            "versions never go back: {}",
            again.version
        );

        // Nothing stored: nothing done, not an error; --if-version 0 means nothing stored.
        let ghost = b.id("ghost");
        let gone = format!("{{\"id\":\"{ghost}\",\"deleted_version\":null}}\n");
        assert_eq!(run(["rm", &b.store, "--agent", &ghost]).ok(), gone);
        assert_eq!(
            run(["rm", &b.store, "--agent", &ghost, "--if-version", "0"]).ok(),
            gone
        );
        // --if-version: a stale version is a conflict and deletes nothing.
        let bid = b.id("b");
        run(["rm", &b.store, "--agent", &bid, "--if-version", "2"])
            .failed("AGENT_ERR_CONFLICT")
            .says("expected version 2")
            .says("nothing was deleted");
        run(["rm", &b.store, "--agent", &bid, "--if-version", "0"]).failed("AGENT_ERR_CONFLICT");
        let kept = b.open("b", json!({})).get_state_versioned().unwrap();
        assert_eq!(kept.state.json(), br#"{"keep":true}"#);
        let v = kept.version.to_string();
        // Pretty on request, like every single document.
        assert_eq!(
            run([
                "rm",
                &b.store,
                "--agent",
                &bid,
                "--if-version",
                &v,
                "--pretty"
            ])
            .ok(),
            format!("{{\n  \"id\": \"{bid}\",\n  \"deleted_version\": {v}\n}}\n")
        );
        assert_eq!(ids(&b.ls(&[])), ["a"]);
    }
}

/// Once `rm` returns, a marker written in the state and in the change log is in neither the
/// database file nor its WAL.
#[test]
fn rm_erases_the_agents_bytes_from_the_file_and_its_wal() {
    let dir = TempDir::new("cli_rm_erase");
    let path = dir.file("s.db");
    let marker = "MARKER-7f3a-erase-me-7f3a";
    let log = json!({ "change_log": { "keep_last": 100 } });
    let b = Backend {
        store: arg(&path).to_string(),
        ns: String::new(),
        pg: false,
    };
    let a = b.open("victim", log.clone());
    for i in 0..5 {
        a.set_state(format!(r#"{{"secret":"{marker}-{i}"}}"#).as_bytes())
            .unwrap();
    }
    b.open("other", log)
        .set_state(br#"{"harmless":true}"#)
        .unwrap();
    let files = || {
        let mut bytes = std::fs::read(&path).unwrap();
        let mut wal = PathBuf::from(&path).into_os_string();
        wal.push("-wal");
        bytes.extend(std::fs::read(&wal).unwrap_or_default());
        bytes
    };
    let found = |bytes: &[u8]| bytes.windows(marker.len()).any(|w| w == marker.as_bytes());
    assert!(found(&files()), "the marker is stored before the deletion");
    run(["rm", &b.store, "--agent", "victim"]).ok();
    assert!(
        !found(&files()),
        "the marker is erased from the file and the WAL"
    );
    assert_eq!(ids(&b.ls(&[])), ["other"]);
}

#[test]
fn expire_deletes_idle_agents_in_batches_longest_idle_first() {
    let dir = TempDir::new("cli_expire");
    for b in backends(&dir, "expire") {
        let expire = |args: &[&str]| {
            let mut argv = vec!["expire", b.store.as_str(), "--idle", "365d"];
            argv.extend(args);
            run(&argv)
        };
        if b.pg {
            // Leftovers of an earlier run of this test, so that the batches below are ours.
            expire(&[]).ok();
        }
        for i in 0..5 {
            b.write(&format!("old{i}"), &format!(r#"{{"i":{i}}}"#));
            age(&b, &format!("old{i}"), AGED_DAYS + i);
        }
        b.write("recent", r#"{"recent":true}"#);
        let everyone = ["old0", "old1", "old2", "old3", "old4", "recent"];
        assert_eq!(ids(&b.ls(&[])), everyone);

        // A dry run lists, the longest idle first, and deletes nothing.
        let dry = expire(&["--dry-run"]);
        let lines = b.lines(&dry);
        assert_eq!(ids(&lines), ["old4", "old3", "old2", "old1", "old0"]);
        assert_eq!(dry.stderr, "", "not a full batch: no note");
        let keys: Vec<_> = lines[0].as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["id", "version", "bytes", "written_at"]);
        assert!(lines[0]["written_at"].as_i64().unwrap() < now_ms() - (AGED_DAYS + 3) * 86_400_000);
        // A full first batch says that more may be idle.
        let dry = expire(&["--dry-run", "--batch", "2"]);
        assert_eq!(ids(&b.lines(&dry)), ["old4", "old3"]);
        assert!(dry.stderr.contains("first batch"), "{dry:?}");
        assert!(expire(&["--dry-run", "--limit", "2"]).stderr.is_empty());
        assert_eq!(ids(&b.ls(&[])), everyone, "dry runs delete nothing");

        // --limit stops after that many, across batches.
        let first = expire(&["--batch", "2", "--limit", "3"]);
        assert_eq!(ids(&b.lines(&first)), ["old4", "old3", "old2"]);
        assert_eq!(ids(&b.ls(&[])), ["old0", "old1", "recent"]);
        // Written again since it went idle: not idle any more.
        b.open("old1", json!({}))
            .set_state(br#"{"back":1}"#)
            .unwrap();
        // Without --limit, batch after batch until one finds fewer.
        let rest = expire(&["--batch", "1"]);
        assert_eq!(ids(&b.lines(&rest)), ["old0"]);
        assert_eq!(ids(&b.ls(&[])), ["old1", "recent"]);
        assert_eq!(b.lines(&expire(&[])), Vec::<Value>::new());
    }
}

/// The duration forms, on a file (on a shared server a short --idle would find other tests'
/// agents).
#[test]
fn expire_takes_every_duration_form() {
    let dir = TempDir::new("cli_expire_forms");
    let path = dir.file("s.db");
    let p = arg(&path);
    run(["set", p, "{}", "--agent", "a"]).ok();
    for idle in ["30d", "2w", "12h", "90m", "45s", "1h30m"] {
        assert_eq!(run(["expire", p, "--idle", idle]).ok(), "", "{idle}");
    }
    std::thread::sleep(Duration::from_millis(600));
    let dry = run(["expire", p, "--idle", "500ms", "--dry-run"]);
    assert!(dry.ok().starts_with("{\"id\":\"a\","), "{dry:?}");
    let out = run(["expire", p, "--idle", "500ms"]);
    assert!(out.ok().starts_with("{\"id\":\"a\","), "{out:?}");
    assert_eq!(run(["ls", p]).ok(), "");
}

#[test]
fn bad_input_is_refused_with_its_exit_code_and_changes_nothing() {
    let dir = TempDir::new("cli_agents_bad");
    for b in backends(&dir, "bad") {
        b.write("a", r#"{"a":1}"#);
        b.write("old", r#"{"old":1}"#);
        age(&b, "old", BAD_AGED_DAYS);
        let before = b.ls(&[]);
        let s = b.store.as_str();
        let a = b.id("a");
        let long = "x".repeat(256);

        // Usage errors (exit 2, clap's message on stderr, nothing on stdout).
        for (argv, says) in [
            (
                vec!["expire", s, "--idle", "30x"],
                "invalid value '30x' for '--idle <DURATION>'",
            ),
            (vec!["expire", s, "--idle", "30"], "no unit"),
            (
                vec!["expire", s, "--idle=-1d"],
                "invalid value '-1d' for '--idle <DURATION>'",
            ),
            (vec!["expire", s, "--idle", "1.5h"], "whole numbers only"),
            (vec!["expire", s], "--idle <DURATION>"),
            (
                vec!["expire", s, "--idle", "1d", "--limit", "0"],
                "'0' for '--limit <N>'",
            ),
            (
                vec!["expire", s, "--idle", "1d", "--batch", "0"],
                "'0' for '--batch <N>'",
            ),
            (
                vec!["expire", s, "--idle", "1d", "--batch", "10001"],
                "'10001' for '--batch <N>'",
            ),
            (vec!["ls", s, "--limit", "0"], "'0' for '--limit <N>'"),
            (
                vec!["ls", s, "--limit=-1"],
                "invalid value '-1' for '--limit <N>'",
            ),
            (vec!["rm", s], "--agent <ID>"),
            (
                vec!["rm", s, "--agent", &a, "--if-version=-2"],
                "invalid value '-2' for '--if-version <V>'",
            ),
            (
                vec!["rm", s, "--agent", &a, "--if-version", "x"],
                "invalid value 'x' for '--if-version <V>'",
            ),
        ] {
            let r = run(&argv);
            assert_eq!(r.code, 2, "{argv:?}: {r:?}");
            assert!(r.stderr.starts_with("error: "), "{argv:?}: {r:?}");
            assert!(r.stderr.contains(says), "{argv:?} says {says:?}: {r:?}");
            assert!(r.stdout.is_empty(), "{argv:?}: {r:?}");
        }
        // The missing --agent of rm shows rm's usage.
        assert!(run(["rm", s]).stderr.contains("Usage: agent-state rm "));

        // The library's and the command's refusals (exit 64 + status).
        run(["ls", s, "--agent", &a])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("takes no --agent");
        run(["--agent", &a, "expire", s, "--idle", "180d"])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("takes no --agent");
        run(["rm", s, "--agent", &a, "--change-log", r#"{"keep_last":1}"#])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("--change-log");
        run(["ls", s, "--prefix", &long])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("prefix");
        run(["ls", s, "--after", &long])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("after");
        run(["rm", s, "--agent", &long])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("agent id");
        run(["ls", s, "--busy-timeout-ms", "99999999999"])
            .failed("AGENT_ERR_INVALID_ARGUMENT")
            .says("busy_timeout_ms");
        run(["rm", s, "--agent", &a, "--if-version", "9"])
            .failed("AGENT_ERR_CONFLICT")
            .says("nothing was deleted");
        run(["--read-only", "rm", s, "--agent", &a]).failed("AGENT_ERR_STORAGE");
        run(["expire", s, "--idle", "180d", "--read-only"]).failed("AGENT_ERR_STORAGE");

        assert_eq!(b.ls(&[]), before, "nothing changed");
        // The aged agent is still there to expire (a dry run sees it).
        let dry = run(["expire", s, "--idle", "180d", "--dry-run"]);
        assert!(ids(&b.lines(&dry)).contains(&"old".to_string()), "{dry:?}");
        run(["rm", s, "--agent", &b.id("old")]).ok();
    }
}

#[test]
fn a_missing_file_is_never_created() {
    let dir = TempDir::new("cli_agents_missing");
    let path = dir.file("missing.db");
    let p = arg(&path);
    for argv in [
        vec!["ls", p],
        vec!["rm", p, "--agent", "a"],
        vec!["expire", p, "--idle", "1d"],
        vec!["expire", p, "--idle", "1d", "--dry-run"],
    ] {
        run(&argv).failed("AGENT_ERR_STORAGE").says("missing.db");
        assert!(!path.exists(), "{argv:?} created the store");
    }
}

#[test]
fn an_unreachable_server_is_exit_76_for_ls_and_expire() {
    let uri = "postgresql://app:s3cret@127.0.0.1:1/postgres";
    for argv in [
        vec!["ls", uri],
        vec!["expire", uri, "--idle", "1d", "--dry-run"],
        vec!["rm", uri, "--agent", "a"],
    ] {
        let mut argv = argv;
        argv.extend(["--busy-timeout-ms", "2000"]);
        run(&argv).failed("AGENT_ERR_UNAVAILABLE");
    }
}
