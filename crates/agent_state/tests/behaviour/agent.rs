//! Behaviour of the safe Rust API: persistence, initial state, transactions, concurrency (hooks:
//! hooks.rs).
//! On either backend (`#[each_backend]`, crates/test-support), but for the tests of SQLite files,
//! which say so.

use std::path::PathBuf;
use std::sync::Arc;

use agent_state::{Agent, Error, OpenOptions};
use serde_json::{json, Value};

use test_support::{
    each_backend, open, opts, sqlite_only, text, write_behind_the_back, Recorder, TempDir,
};

#[each_backend]
fn reference_page_flow_and_persistence() {
    let dir = TempDir::new("flow");
    let store = dir.store("conv.db");
    let o = opts(json!({"initial_state": {"status": "idle", "lastReply": "", "at": 0}}));
    {
        let a = open(&store, &o).unwrap();
        assert_eq!(
            text(&a.get_state().unwrap()),
            r#"{"status":"idle","lastReply":"","at":0}"#
        );
        let s = a.set_state(br#"{"status":"processing"}"#).unwrap();
        assert_eq!(text(&s), r#"{"status":"processing","lastReply":"","at":0}"#);
        let s = a
            .set_state(br#"{"status":"idle","at":1764471600123}"#)
            .unwrap();
        assert_eq!(
            text(&s),
            r#"{"status":"idle","lastReply":"","at":1764471600123}"#
        );
        a.close().unwrap();
        assert_eq!(a.get_state().unwrap_err(), Error::Closed);
    }
    let a = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(
        text(&a.get_state().unwrap()),
        r#"{"status":"idle","lastReply":"","at":1764471600123}"#
    );
    let s = a.replace_state(br#"{"fresh":true}"#).unwrap();
    assert_eq!(text(&s), r#"{"fresh":true}"#);
}

#[each_backend]
fn reading_never_persists_the_default() {
    let dir = TempDir::new("default");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"initial_state": {"v": 1}}))).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"v":1}"#);
    a.close().unwrap();
    let b = open(&store, &opts(json!({"initial_state": {"v": 2}}))).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"v":2}"#);
    // The first write persists initial state merged with the patch.
    assert_eq!(
        text(&b.set_state(br#"{"w":3}"#).unwrap()),
        r#"{"v":2,"w":3}"#
    );
    b.close().unwrap();
    let c = open(&store, &opts(json!({"initial_state": {"v": 9}}))).unwrap();
    assert_eq!(text(&c.get_state().unwrap()), r#"{"v":2,"w":3}"#);
}

#[each_backend]
fn failed_writes_change_nothing() {
    let dir = TempDir::new("failed");
    let store = dir.store("a.db");
    let a = open(&store, &opts(json!({"max_value_bytes": 64}))).unwrap();
    a.set_state(br#"{"keep":1}"#).unwrap();
    let big = format!(r#"{{"s":"{}"}}"#, "x".repeat(60));
    assert!(matches!(
        a.set_state(big.as_bytes()),
        Err(Error::TooLarge(_))
    ));
    assert!(matches!(a.set_state(b"{\"a\":"), Err(Error::Json(_))));
    assert!(matches!(
        a.set_state(br#"{"a":1,"a":2}"#),
        Err(Error::Codec(_))
    ));
    assert!(matches!(
        a.set_state(br#"{"d":{"$date":"yesterday"}}"#),
        Err(Error::Codec(_))
    ));
    assert!(matches!(
        a.set_state(b"[1]"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        a.replace_state(br#"{"$set":[1]}"#),
        Err(Error::InvalidArgument(_))
    ));
    // A merge that would leave the top level shaped like a tagged value.
    a.replace_state(br#"{"$bigint":"5","x":1}"#).unwrap();
    assert!(matches!(
        a.set_state(br#"{"x":null}"#),
        Err(Error::Codec(_))
    ));
    a.close().unwrap();
    let b = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"$bigint":"5","x":1}"#);
}

#[each_backend]
fn options_are_checked() {
    for bad in [
        json!({"nope": 1}),
        json!({"synchronous": "sometimes"}),
        json!({"max_value_bytes": -1}),
        json!({"busy_timeout_ms": "soon"}),
        json!({"read_only": 1}),
        json!({"initial_state": [1]}),
        json!([]),
    ] {
        assert!(
            matches!(
                OpenOptions::from_json(bad.to_string().as_bytes()),
                Err(Error::InvalidArgument(_))
            ),
            "{bad}"
        );
    }
    let dir = TempDir::new("opts");
    let too_big = opts(json!({"max_value_bytes": 8, "initial_state": {"long": "xxxxxxxx"}}));
    assert!(matches!(
        open(&dir.store("a.db"), &too_big),
        Err(Error::TooLarge(_))
    ));
}

#[test]
fn foreign_and_newer_files_are_refused_untouched() {
    sqlite_only!("files of other applications and of a newer schema");
    let dir = TempDir::new("foreign");
    let text_file = dir.file("notes.txt");
    std::fs::write(&text_file, "hello, this is not a database\n".repeat(200)).unwrap();
    let before = std::fs::read(&text_file).unwrap();
    assert!(matches!(
        Agent::open_with(&text_file, &OpenOptions::default()),
        Err(Error::Storage(_))
    ));
    assert_eq!(std::fs::read(&text_file).unwrap(), before);

    let other = dir.file("other.db");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    let before = std::fs::read(&other).unwrap();
    let err = Agent::open_with(&other, &OpenOptions::default()).unwrap_err();
    assert!(
        matches!(err, Error::Storage(ref m) if m.contains("another application")),
        "{err}"
    );
    assert_eq!(std::fs::read(&other).unwrap(), before);

    let newer = dir.file("newer.db");
    Agent::open_with(&newer, &OpenOptions::default())
        .unwrap()
        .close()
        .unwrap();
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        c.execute_batch("PRAGMA user_version = 99;").unwrap();
    }
    let err = Agent::open_with(&newer, &OpenOptions::default()).unwrap_err();
    assert!(
        matches!(err, Error::Storage(ref m) if m.contains("newer")),
        "{err}"
    );
}

#[test]
fn new_files_are_private_and_read_only_refuses_writes() {
    sqlite_only!("file modes, and a read-only file left byte for byte");
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("perm");
    let path = dir.file("a.db");
    let a = Agent::open_with(&path, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"x":1}"#).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{}", path.display(), suffix));
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
    a.close().unwrap();
    let before = std::fs::read(&path).unwrap();
    let r = Agent::open_with(&path, &opts(json!({"read_only": true}))).unwrap();
    assert_eq!(text(&r.get_state().unwrap()), r#"{"x":1}"#);
    assert!(matches!(r.set_state(br#"{"x":2}"#), Err(Error::Storage(_))));
    assert!(matches!(r.replace_state(br#"{}"#), Err(Error::Storage(_))));
    r.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(matches!(
        Agent::open_with(dir.file("absent.db"), &opts(json!({"read_only": true}))),
        Err(Error::Storage(_))
    ));
    assert!(matches!(
        Agent::open_with(dir.file("no/such/dir/a.db"), &OpenOptions::default()),
        Err(Error::Storage(_))
    ));
}

#[each_backend]
fn threads_on_one_agent_lose_nothing_and_hooks_chain_in_commit_order() {
    const THREADS: usize = 8;
    const EACH: usize = 150;
    let dir = TempDir::new("threads");
    let a = Arc::new(open(&dir.store("a.db"), &opts(json!({"synchronous": "normal"}))).unwrap());
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for n in 1..=EACH {
                    a.set_state(format!(r#"{{"t{t}":{n}}}"#).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let state: Value = serde_json::from_slice(a.get_state().unwrap().json()).unwrap();
    for t in 0..THREADS {
        assert_eq!(state[format!("t{t}")], json!(EACH));
    }
    let seen = rec.seen.lock().unwrap();
    assert_eq!(seen.len(), THREADS * EACH);
    assert_eq!(seen[0].1, "{}");
    for pair in seen.windows(2) {
        assert_eq!(
            pair[1].1, pair[0].0,
            "prev of a delivery is next of the one before"
        );
    }
}

#[each_backend]
fn two_handles_on_one_file_see_each_others_commits() {
    let dir = TempDir::new("two");
    let store = dir.store("a.db");
    let a = Arc::new(
        open(
            &store,
            &opts(json!({"synchronous": "normal", "busy_timeout_ms": 60000})),
        )
        .unwrap(),
    );
    let b = Arc::new(
        open(
            &store,
            &opts(json!({"synchronous": "normal", "busy_timeout_ms": 60000})),
        )
        .unwrap(),
    );
    a.set_state(br#"{"a":1}"#).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"a":1}"#);
    b.set_state(br#"{"b":1}"#).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"a":1,"b":1}"#);
    let writers: Vec<_> = [(a.clone(), "a"), (b.clone(), "b")]
        .into_iter()
        .map(|(agent, key)| {
            std::thread::spawn(move || {
                for n in 2..=300 {
                    agent
                        .set_state(format!(r#"{{"{key}":{n}}}"#).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let expect = r#"{"a":300,"b":300}"#;
    assert_eq!(text(&a.get_state().unwrap()), expect);
    assert_eq!(text(&b.get_state().unwrap()), expect);
}

#[each_backend]
fn snapshots_outlive_changes_and_close() {
    let dir = TempDir::new("snap");
    let a = open(&dir.store("a.db"), &OpenOptions::default()).unwrap();
    a.set_state(br#"{"v":1}"#).unwrap();
    let old = a.get_state().unwrap();
    a.set_state(br#"{"v":2}"#).unwrap();
    a.close().unwrap();
    assert_eq!(text(&old), r#"{"v":1}"#);
    assert_eq!(*old.json_with_nul().last().unwrap(), 0);
}

#[each_backend]
fn reads_see_commits_of_any_other_connection() {
    let dir = TempDir::new("foreign_commit");
    let store = dir.store("a.db");
    let a = open(&store, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"n":0}"#).unwrap();
    for n in 1..=200 {
        assert_eq!(
            text(&a.get_state().unwrap()),
            format!(r#"{{"n":{}}}"#, n - 1)
        );
        write_behind_the_back(&store, &format!(r#"{{"n":{n}}}"#));
        if n % 2 == 0 {
            // A merge must also start from the other connection's commit.
            assert_eq!(
                text(&a.set_state(br#"{"m":1}"#).unwrap()),
                format!(r#"{{"n":{n},"m":1}}"#)
            );
            a.replace_state(format!(r#"{{"n":{n}}}"#).as_bytes())
                .unwrap();
        }
    }
    assert_eq!(text(&a.get_state().unwrap()), r#"{"n":200}"#);
}

#[each_backend]
fn a_corrupt_stored_state_fails_reads_and_merges_and_a_replace_repairs_it() {
    let dir = TempDir::new("corrupt");
    let store = dir.store("a.db");
    let a = open(&store, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"ok":1}"#).unwrap();
    let rec = Arc::new(Recorder::default());
    a.on_state_changed(rec.clone()).unwrap();
    write_behind_the_back(&store, r#"{"ok":"#);
    assert!(matches!(a.get_state(), Err(Error::Corrupt(_))));
    assert!(matches!(a.set_state(br#"{"x":1}"#), Err(Error::Corrupt(_))));
    assert_eq!(
        text(&a.replace_state(br#"{"fixed":true}"#).unwrap()),
        r#"{"fixed":true}"#
    );
    assert_eq!(text(&a.get_state().unwrap()), r#"{"fixed":true}"#);
    assert_eq!(
        rec.seen.lock().unwrap().last().unwrap(),
        &(r#"{"fixed":true}"#.to_string(), "{}".to_string(), None)
    );
}

#[each_backend]
fn a_store_whose_state_no_longer_decodes_still_opens() {
    let dir = TempDir::new("corrupt_open");
    let store = dir.store("a.db");
    open(&store, &OpenOptions::default())
        .unwrap()
        .set_state(br#"{"ok":1}"#)
        .unwrap();
    write_behind_the_back(&store, r#"{"ok":"#);
    let a = open(&store, &opts(json!({"change_log": {"keep_last": 5}}))).unwrap();
    assert!(matches!(a.get_state(), Err(Error::Corrupt(_))));
    assert_eq!(
        text(&a.replace_state(br#"{"fixed":1}"#).unwrap()),
        r#"{"fixed":1}"#
    );
}

#[test]
fn writes_to_a_deleted_store_are_refused_not_lost() {
    sqlite_only!("a deleted file");
    let dir = TempDir::new("deleted");
    let sub = dir.file("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join("a.db");
    let a = Agent::open_with(&path, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    std::fs::remove_dir_all(&sub).unwrap();
    let err = a.set_state(br#"{"n":2}"#).unwrap_err();
    assert!(
        matches!(&err, Error::Storage(m) if m.contains("deleted")),
        "{err}"
    );
}

/// A file's single agent re-reads its state on any commit to the file: even a write made
/// behind the library's back that leaves the version as it was is seen (a named agent, or a
/// PostgreSQL one, goes by its version instead: see `test_support::write_behind_the_back`).
#[test]
fn the_single_agent_of_a_file_sees_a_foreign_write_that_keeps_the_version() {
    sqlite_only!("SQLite's own commit counters, and a raw write to its file");
    let dir = TempDir::new("foreign_same_version");
    let path = dir.file("a.db");
    let a = Agent::open_with(&path, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"n":0}"#).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    for n in 1..=50 {
        raw.execute(
            "UPDATE agent_state SET value = ?1 WHERE agent = ''",
            [format!(r#"{{"n":{n}}}"#)],
        )
        .unwrap();
        let v = a.get_state_versioned().unwrap();
        assert_eq!((text(&v.state), v.version), (format!(r#"{{"n":{n}}}"#), 1));
    }
}

/// The store remembers the cap it was given (`store_max_value_bytes`): a handle opened later
/// with the defaults can write the large state another handle stored, and a handle with a
/// smaller cap of its own is told which cap refused the write and how to raise it.
#[test]
fn the_store_remembers_its_cap() {
    sqlite_only!("a store's cap is store-wide: on PostgreSQL it is tested in a database of its own (tests/postgres)");
    let dir = TempDir::new("store_cap");
    let store = dir.store("a.db");
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(3_000_000));
    {
        let a = open(&store, &opts(json!({"store_max_value_bytes": 10_000_000}))).unwrap();
        assert_eq!(a.max_value_bytes(), 10_000_000);
        a.set_state(big.as_bytes()).unwrap();
    }
    // The defaults: the store's cap.
    let b = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(b.max_value_bytes(), 10_000_000);
    b.set_state(br#"{"small":1}"#).unwrap();
    // A handle's own cap wins, and its refusal says which cap and how to raise it.
    let c = open(&store, &opts(json!({"max_value_bytes": 1_000_000}))).unwrap();
    assert_eq!(c.max_value_bytes(), 1_000_000);
    match c.set_state(br#"{"small":2}"#) {
        Err(Error::TooLarge(m)) => {
            for part in [
                "this handle's max_value_bytes (1000000)",
                "already 3000021 bytes",
                "max_value_bytes of at least 3000021",
                "store_max_value_bytes",
            ] {
                assert!(m.contains(part), "{part:?} not in {m:?}");
            }
        }
        other => panic!("{other:?}"),
    }
    // A write that changes nothing is not too large.
    assert_eq!(c.set_state_if(br#"{"small":1}"#, None).unwrap().version, 2);
    assert_eq!(
        text(&b.get_state().unwrap()).len(),
        3_000_021,
        "the smaller handle wrote nothing"
    );
    // read_only handles cannot record a cap.
    assert!(matches!(
        OpenOptions::from_json(br#"{"read_only":true,"store_max_value_bytes":100}"#),
        Err(Error::InvalidArgument(_))
    ));
    // Recording a smaller cap later is the store's new default.
    drop((b, c));
    open(&store, &opts(json!({"store_max_value_bytes": 4_000_000}))).unwrap();
    let d = open(&store, &OpenOptions::default()).unwrap();
    assert_eq!(d.max_value_bytes(), 4_000_000);
    // A store without a recorded cap: the default, and the refusal says so.
    let e = open(&dir.store("b.db"), &OpenOptions::default()).unwrap();
    match e.set_state(big.as_bytes()) {
        Err(Error::TooLarge(m)) => assert!(m.contains("the default cap"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Creating a new store file is the library's own one-time set-up: handles opening a file that
/// does not exist yet, each on its own connection (as separate processes would), all succeed,
/// even with `busy_timeout_ms: 0`. (Handles with an agent id share one connection per file and
/// take turns on it, which `busy_timeout_ms` does bound.)
#[test]
fn first_opens_of_a_new_file_succeed_with_no_busy_timeout() {
    sqlite_only!("a new file (on PostgreSQL: tests/postgres, a new database)");
    const THREADS: usize = 4;
    for round in 0..8 {
        let dir = TempDir::new("first_open");
        let path = dir.file("new.db");
        let barrier = Arc::new(std::sync::Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let options = opts(json!({"busy_timeout_ms": 0}));
                    barrier.wait();
                    Agent::open_with(&path, &options)
                        .map(drop)
                        .map_err(|e| format!("round {round}, thread {t}: {e}"))
                })
            })
            .collect();
        let failures: Vec<String> = threads
            .into_iter()
            .filter_map(|t| t.join().unwrap().err())
            .collect();
        assert!(failures.is_empty(), "{failures:#?}");
    }
}
