//! The watcher's side of PostgreSQL (`listen`, `watch_reads`) against the test server
//! (`AGENT_STATE_TEST_PG_URI`; skipped without one), each test in a database of its own (no
//! listener of another test, or a stale row of a killed run, can notify for it): writers
//! notify only while a listener is registered and unexpired, in every kind of write and in
//! both statement modes; the listener's start waits for a write in flight; a listener whose
//! connection is terminated connects again and says so; the reads of versions.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::listen::Listener;
use super::tests::{connect, in_mode, server};
use super::watch_reads::PgWatchReads;
use crate::store::{CommitSignal, Notice, Signal, StoreOptions, WatchReads};
use crate::{delete_agent, Agent, OpenOptions};

/// One test at a time: each creates a database (the server serialises that anyway).
static ONE: Mutex<()> = Mutex::new(());

/// A database of its own on the test server, dropped with it.
struct Db {
    admin: Conn,
    name: String,
    /// Its URI.
    uri: String,
}

impl Db {
    fn new(tag: &str) -> Option<Db> {
        let uri = server()?;
        let name = format!("unit_listen_{tag}_{}", std::process::id());
        let mut admin = connect(&uri);
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        // A query parameter overrides the URI's path, as with libpq.
        let sep = if uri.contains('?') { '&' } else { '?' };
        let uri = format!("{uri}{sep}dbname={name}");
        Some(Db { admin, name, uri })
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.admin.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

fn options(json: &str) -> OpenOptions {
    OpenOptions::from_json(json.as_bytes()).unwrap()
}

fn agent(uri: &str, id: &str, log: bool) -> Agent {
    let log = if log { r#"{"keep_last":10}"# } else { "false" };
    let json = format!(r#"{{"agent_id":"{id}","change_log":{log}}}"#);
    Agent::open_with(Path::new(uri), &options(&json)).unwrap()
}

fn store_options() -> StoreOptions {
    options("{}").store_options()
}

/// A connection of the test's own that listens on the writers' channel.
fn side(uri: &str) -> Conn {
    let mut conn = connect(uri);
    conn.batch_execute("LISTEN agent_state_changes").unwrap();
    conn
}

/// The payloads `conn` receives within a generous bound once one comes (`want` of them), or
/// within `quiet` when none is expected (`want` 0).
fn payloads(conn: &mut Conn, want: usize, quiet: Duration) -> Vec<String> {
    let deadline = Instant::now()
        + if want == 0 {
            quiet
        } else {
            Duration::from_secs(30)
        };
    let mut got = Vec::new();
    while got.len() < want.max(1) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        got.extend(
            conn.notifications(left)
                .unwrap()
                .into_iter()
                .map(|n| n.payload().to_string()),
        );
    }
    got
}

/// The listener's next notices (waiting past quiet spells, up to a generous bound).
fn changed(listener: &mut Listener) -> Vec<Notice> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match listener.wait(Duration::from_millis(500)).unwrap() {
            Signal::Changed(notices) => return notices,
            Signal::Quiet => {}
            Signal::Unknown => panic!("the listener said Unknown with its connection up"),
        }
    }
    panic!("no notice within 30 s");
}

#[test]
fn writers_notify_only_while_a_listener_is_registered_and_unexpired() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("notify") else {
        return;
    };
    let quiet = Duration::from_millis(300);
    let plain = agent(&db.uri, "plain", false);
    plain.set_state_if(br#"{"n":1}"#, None).unwrap();
    let mut side = side(&db.uri);
    plain.set_state_if(br#"{"n":2}"#, None).unwrap();
    assert_eq!(payloads(&mut side, 0, quiet), Vec::<String>::new());

    let mut listener = Listener::open(&db.uri, &store_options()).unwrap();
    // Each kind of write, in both statement modes: the first (under the row's lock), the
    // optimistic one with the log off and on, a replacement, one that sends only its patch
    // (a state larger than SMALL_STATE), and a deletion.
    let cached = in_mode(&db.uri, "cache_statement");
    let big = format!(
        r#"{{"big":"{}"}}"#,
        "x".repeat(crate::store::SMALL_STATE + 10)
    );
    for (uri, mode) in [(&db.uri, "exec"), (&cached, "cache")] {
        let id = |name: &str| format!("{name}-{mode}");
        let a = agent(uri, &id("a"), false);
        let logged = agent(uri, &id("logged"), true);
        let mut expect = |who: &str, version: u64| {
            let want = format!("{version} {}", id(who));
            assert_eq!(payloads(&mut side, 1, quiet), vec![want], "{mode}");
        };
        let v = a.set_state_if(br#"{"n":1}"#, None).unwrap().version;
        expect("a", v);
        let v = a.set_state_if(br#"{"n":2}"#, None).unwrap().version;
        expect("a", v);
        let v = logged.set_state_if(br#"{"n":1}"#, None).unwrap().version;
        expect("logged", v);
        let v = logged.set_state_if(br#"{"n":2}"#, None).unwrap().version;
        expect("logged", v);
        let v = a.replace_state_if(br#"{"r":1}"#, None).unwrap().version;
        expect("a", v);
        let v = a.set_state_if(big.as_bytes(), None).unwrap().version;
        expect("a", v);
        let v = a.set_state_if(br#"{"small":1}"#, None).unwrap().version;
        expect("a", v);
        delete_agent(Path::new(uri), &options("{}"), &id("a"), None).unwrap();
        expect("a", 0);
    }
    // The listener heard them too, one notice per agent and version at least.
    let notices = changed(&mut listener);
    assert!(notices.iter().any(|n| n.id.as_deref() == Some("a-exec")));

    // Unregistered: nothing more.
    drop(listener);
    plain.set_state_if(br#"{"n":3}"#, None).unwrap();
    assert_eq!(payloads(&mut side, 0, quiet), Vec::<String>::new());

    // A registration nobody renews (a listener that crashed): writers notify until it
    // expires, then stop.
    let mut store = connect(&db.uri);
    store
        .batch_execute(
            "INSERT INTO agent_listeners VALUES (1, \
             (extract(epoch FROM statement_timestamp()) * 1000)::bigint + 1500)",
        )
        .unwrap();
    let v = plain.set_state_if(br#"{"n":4}"#, None).unwrap().version;
    assert_eq!(payloads(&mut side, 1, quiet), vec![format!("{v} plain")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let live: i64 = store
            .query(
                "SELECT count(*) FROM agent_listeners WHERE expires_ms > \
                 (extract(epoch FROM statement_timestamp()) * 1000)::bigint",
                &[],
            )
            .unwrap()[0]
            .get(0);
        if live == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the row never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    plain.set_state_if(br#"{"n":5}"#, None).unwrap();
    assert_eq!(payloads(&mut side, 0, quiet), Vec::<String>::new());
}

#[test]
fn a_listener_starts_only_after_a_write_in_flight_has_committed() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("barrier") else {
        return;
    };
    let a = agent(&db.uri, "raced", false);
    a.set_state_if(br#"{"n":1}"#, None).unwrap();
    // Another transaction holds the agent's row: the write below waits for it, its statement
    // already begun (its snapshot taken, before the listener registers).
    let mut holder = connect(&db.uri);
    holder
        .batch_execute("BEGIN; SELECT * FROM agent_state WHERE agent = 'raced' FOR UPDATE")
        .unwrap();
    let uri = db.uri.clone();
    let writer = std::thread::spawn(move || {
        let a = agent(&uri, "raced", false);
        a.set_state_if(br#"{"n":2}"#, None).unwrap().version
    });
    // Until the write waits for the row (the server shows it waiting for a lock).
    let mut admin = connect(&db.uri);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = admin
            .query(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND datname = current_database()",
                &[],
            )
            .unwrap()[0]
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the write never waited");
        std::thread::sleep(Duration::from_millis(20));
    }
    let uri = db.uri.clone();
    let opening = std::thread::spawn(move || {
        let listener = Listener::open(&uri, &store_options()).unwrap();
        let mut reads = PgWatchReads::open(&uri, &store_options()).unwrap();
        (listener, reads.versions_of(&["raced"]).unwrap())
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !opening.is_finished(),
        "the listener started with a write in flight"
    );
    holder.batch_execute("COMMIT").unwrap();
    let written = writer.join().unwrap();
    let (_listener, versions) = opening.join().unwrap();
    // The write it waited for is in the versions read after it started (it could not notify).
    assert_eq!(versions, vec![("raced".to_string(), written)]);
}

#[test]
fn a_listener_whose_connection_is_terminated_connects_again_and_says_unknown() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("terminated") else {
        return;
    };
    let a = agent(&db.uri, "t", false);
    a.set_state_if(br#"{"n":1}"#, None).unwrap();
    let app = format!("unit_listen_terminated_{}", std::process::id());
    let uri = format!("{}&application_name={app}", db.uri);
    let mut listener = Listener::open(&uri, &store_options()).unwrap();
    let mut admin = connect(&db.uri);
    let ended: i64 = admin
        .query(
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = '{app}'"
            ),
            &[],
        )
        .unwrap()[0]
        .get(0);
    assert_eq!(ended, 1);
    // A write while it is away: no one hears it; the Unknown that follows the reconnection
    // makes the watcher read it.
    a.set_state_if(br#"{"n":2}"#, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match listener.wait(Duration::from_millis(500)).unwrap() {
            Signal::Unknown => break,
            Signal::Quiet => assert!(Instant::now() < deadline, "never connected again"),
            Signal::Changed(n) => panic!("a notice from a terminated connection: {n:?}"),
        }
    }
    let v = a.set_state_if(br#"{"n":3}"#, None).unwrap().version;
    assert_eq!(changed(&mut listener), vec![Notice::of("t", v)]);
}

#[test]
fn the_watchers_reads_give_the_versions_of_the_stored_agents_by_prefix_and_by_id() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("reads") else {
        return;
    };
    // Nothing there: watching never creates a store.
    let missing = |e: crate::Error| assert!(matches!(e, crate::Error::Storage(_)), "{e:?}");
    missing(PgWatchReads::open(&db.uri, &store_options()).err().unwrap());
    missing(Listener::open(&db.uri, &store_options()).err().unwrap());
    let mut conn = connect(&db.uri);
    let tables: i64 = conn
        .query(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .unwrap()[0]
        .get(0);
    assert_eq!(tables, 0);

    let ids = ["a%", "a_b", "ab", "a\u{10FFFF}", "b", "ä"];
    for (i, id) in ids.iter().enumerate() {
        let a = agent(&db.uri, id, false);
        for n in 0..=i {
            a.set_state_if(format!(r#"{{"n":{n}}}"#).as_bytes(), None)
                .unwrap();
        }
    }
    // Deleted: not there (its row stays when its log setting is kept, at version 0).
    let gone = agent(&db.uri, "a-gone", true);
    gone.set_state_if(br#"{"n":1}"#, None).unwrap();
    delete_agent(Path::new(&db.uri), &options("{}"), "a-gone", None).unwrap();

    let mut reads = PgWatchReads::open(&db.uri, &store_options()).unwrap();
    let versions = |list: Vec<(String, u64)>| -> Vec<String> {
        list.into_iter()
            .map(|(id, v)| format!("{id}@{v}"))
            .collect()
    };
    assert_eq!(
        versions(reads.versions_with_prefix("").unwrap()),
        ["a%@1", "a_b@2", "ab@3", "a\u{10FFFF}@4", "b@5", "ä@6"]
    );
    assert_eq!(
        versions(reads.versions_with_prefix("a").unwrap()),
        ["a%@1", "a_b@2", "ab@3", "a\u{10FFFF}@4"]
    );
    // No pattern characters: `%` and `_` are themselves.
    assert_eq!(
        versions(reads.versions_with_prefix("a%").unwrap()),
        ["a%@1"]
    );
    assert_eq!(
        versions(reads.versions_with_prefix("a_").unwrap()),
        ["a_b@2"]
    );
    assert_eq!(
        versions(reads.versions_with_prefix("c").unwrap()),
        Vec::<String>::new()
    );
    let mut of = versions(reads.versions_of(&["b", "ä", "a-gone", "nobody"]).unwrap());
    of.sort();
    assert_eq!(of, ["b@5", "ä@6"]);
    assert_eq!(reads.versions_of(&[]).unwrap(), vec![]);
}
