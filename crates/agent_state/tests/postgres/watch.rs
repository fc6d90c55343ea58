//! Watching a PostgreSQL store (`agent_state::Watch`) against the test server: commits of another process are delivered; writers notify only while a watch is
//! open; a write in flight while a watch opens is not lost; a listener connection the server
//! ends is made again and nothing is missed; polling (`watch_poll_ms`, for a transaction
//! pooler) delivers and registers nothing.
//!
//! Each test but the pooler's runs in a database of its own (created and dropped by the test):
//! no other test's watch, nor a registration a killed run left behind, can make its writers
//! notify; through a pooler (tests/pg/pooler-suites.sh) those are skipped, and the polling one
//! runs through it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_state::{Agent, OpenOptions, Selector, Watch, WatchEvent, WatchKind, WatchOptions};
use postgres::fallible_iterator::FallibleIterator;
use serde_json::{json, Value};

use crate::crash::Server;
use crate::{server, with_param, without_exec_mode};

/// One test at a time: each makes a database, and the process-killing one ends connections.
static ONE: Mutex<()> = Mutex::new(());

/// The generous bound on anything a test waits for (a loaded machine).
const PATIENCE: Duration = Duration::from_secs(30);

/// A database of the test's own, dropped with it.
struct Db {
    admin: postgres::Client,
    name: String,
    uri: String,
}

impl Db {
    fn new(tag: &str) -> Option<Db> {
        let uri = server()?;
        if std::env::var("AGENT_STATE_TEST_PG_POOLER").is_ok() {
            // Through a pooler, a new database is not reachable (nor is LISTEN carried).
            eprintln!("skipped: the watch's notifications need the server, not a pooler");
            return None;
        }
        let name = format!("watch_{tag}_{}", std::process::id());
        let mut admin =
            postgres::Client::connect(&without_exec_mode(&uri), postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        // A query parameter overrides the URI's path.
        let uri = with_param(&uri, &format!("dbname={name}"));
        Some(Db { admin, name, uri })
    }

    /// A plain connection to the test's database.
    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&without_exec_mode(&self.uri), postgres::NoTls).unwrap()
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

fn open(uri: &str, id: &str, log: bool) -> Agent {
    let log = if log {
        json!({"keep_last": 1000})
    } else {
        json!(false)
    };
    let options = json!({"agent_id": id, "change_log": log, "busy_timeout_ms": 30_000});
    let options = OpenOptions::from_json(options.to_string().as_bytes()).unwrap();
    Agent::open_with(Path::new(uri), &options).unwrap()
}

fn watch(uri: &str, selector: Selector, options: WatchOptions) -> Watch {
    let open = OpenOptions::from_json(br#"{"busy_timeout_ms": 30000}"#).unwrap();
    Watch::open(Path::new(uri), &open, selector, options).unwrap()
}

/// Events until every agent of `last` has reached its version there (or PATIENCE ends).
fn events_until(w: &Watch, last: &BTreeMap<String, u64>) -> Vec<WatchEvent> {
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let mut at: HashMap<String, u64> = HashMap::new();
    while last.iter().any(|(id, v)| at.get(id) != Some(v)) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "not delivered within 30 s: {last:?}, got to {at:?}"
        );
        if let Some(e) = w.next(Some(left)).unwrap() {
            at.insert(e.agent_id.clone(), e.version);
            got.push(e);
        }
    }
    got
}

/// Per agent, the versions delivered are consecutive, none twice, each event's state (with
/// WatchOptions::states) is the stored state at the end for the last one.
fn check_complete(events: &[WatchEvent], uri: &str) {
    let mut by_agent: BTreeMap<&str, Vec<&WatchEvent>> = BTreeMap::new();
    for e in events {
        by_agent.entry(&e.agent_id).or_default().push(e);
    }
    for (id, list) in by_agent {
        for pair in list.windows(2) {
            assert_eq!(
                pair[1].version,
                pair[0].version + 1,
                "{id}: a gap or a repeat ({:?} then {:?})",
                pair[0].kind,
                pair[1].kind
            );
        }
        let last = list.last().unwrap();
        // Opened without a change_log option: the agent's own setting stays.
        let options = json!({"agent_id": id}).to_string();
        let options = OpenOptions::from_json(options.as_bytes()).unwrap();
        let stored = Agent::open_with(Path::new(uri), &options).unwrap();
        let stored = stored.get_state().unwrap();
        let stored: Value = serde_json::from_slice(stored.json()).unwrap();
        let copy: Value = serde_json::from_str(last.state.as_deref().unwrap()).unwrap();
        assert_eq!(copy, stored, "{id}");
    }
}

/// The child's part: with `AGENT_STATE_WATCH_CHILD` (the URI and an agent id), writes 20
/// changes to that agent, then exits. A no-op in an ordinary run.
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var("AGENT_STATE_WATCH_CHILD") else {
        return;
    };
    let (uri, id) = spec.split_once('\n').unwrap();
    let a = open(uri, id, true);
    for i in 0..20 {
        a.set_state(format!(r#"{{"n":{i}}}"#).as_bytes()).unwrap();
    }
}

#[test]
fn a_watch_receives_every_commit_of_another_process_in_order() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("process") else { return };
    // The store exists before the watch (watching never creates one).
    open(&db.uri, "p-setup", false).set_state(b"{}").unwrap();
    let w = watch(
        &db.uri,
        Selector::Prefix("p-".into()),
        WatchOptions::default(),
    );
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "watch::child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("AGENT_STATE_WATCH_CHILD", format!("{}\np-child", db.uri))
        .status()
        .unwrap();
    assert!(status.success());
    let events = events_until(&w, &BTreeMap::from([("p-child".to_string(), 20)]));
    let versions: Vec<u64> = events.iter().map(|e| e.version).collect();
    assert_eq!(versions, (1..=20).collect::<Vec<u64>>());
    // The first carries its state (its predecessor is the writer's initial state); the
    // others their patch, decoded from the log.
    assert!(events[0].state.is_some());
    assert!(events[1..]
        .iter()
        .all(|e| e.kind == WatchKind::Merge && e.patch.is_some()));
    assert_eq!(events[19].patch.as_deref(), Some(r#"{"n":19}"#));
}

/// Notifications that `client` (listening) receives within `quiet`.
fn heard(client: &mut postgres::Client, quiet: Duration) -> Vec<String> {
    let mut got = Vec::new();
    let mut n = client.notifications();
    let mut it = n.timeout_iter(quiet);
    while let Some(note) = it.next().unwrap() {
        got.push(note.payload().to_string());
    }
    got
}

#[test]
fn writers_notify_only_while_a_watch_is_open() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("notify") else { return };
    let a = open(&db.uri, "n-a", false);
    a.set_state(br#"{"n":1}"#).unwrap();
    let mut side = db.client();
    side.batch_execute("LISTEN agent_state_changes").unwrap();
    a.set_state(br#"{"n":2}"#).unwrap();
    assert_eq!(
        heard(&mut side, Duration::from_millis(500)),
        Vec::<String>::new()
    );

    let w = watch(
        &db.uri,
        Selector::Ids(vec!["n-a".into()]),
        WatchOptions::default(),
    );
    a.set_state(br#"{"n":3}"#).unwrap();
    assert_eq!(heard(&mut side, PATIENCE), vec!["3 n-a".to_string()]);
    events_until(&w, &BTreeMap::from([("n-a".to_string(), 3)]));

    // Closed (the store's last watch in this process): the registration goes with it.
    w.close();
    drop(w);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let rows: i64 = side
            .query_one("SELECT count(*) FROM agent_listeners", &[])
            .unwrap()
            .get(0);
        if rows == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the registration stayed after the watch closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    a.set_state(br#"{"n":4}"#).unwrap();
    assert_eq!(
        heard(&mut side, Duration::from_millis(500)),
        Vec::<String>::new()
    );
}

#[test]
fn a_write_in_flight_while_a_watch_opens_is_not_lost() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("race") else { return };
    let a = open(&db.uri, "r-a", false);
    a.set_state(br#"{"n":1}"#).unwrap();
    // Another session holds the agent's row: the write below waits for it, its statement
    // begun before the watch registers.
    let mut holder = db.client();
    holder
        .batch_execute("BEGIN; SELECT 1 FROM agent_state WHERE agent = 'r-a' FOR UPDATE")
        .unwrap();
    let uri = db.uri.clone();
    let writer = std::thread::spawn(move || {
        open(&uri, "r-a", false)
            .set_state_if(br#"{"n":2}"#, None)
            .unwrap()
            .version
    });
    let mut admin = db.client();
    let deadline = Instant::now() + PATIENCE;
    while admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND datname = current_database()",
            &[],
        )
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(
            Instant::now() < deadline,
            "the write never waited for the row"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // No safety-net rescan during the test: only the notifications (or the start) can tell.
    let options = WatchOptions::default().rescan_interval(Duration::from_secs(3600));
    let uri = db.uri.clone();
    let opening = std::thread::spawn(move || watch(&uri, Selector::Prefix("r-".into()), options));
    std::thread::sleep(Duration::from_millis(300));
    let opened_first = opening.is_finished();
    holder.batch_execute("COMMIT").unwrap();
    let in_flight = writer.join().unwrap();
    let w = opening.join().unwrap();
    let next = a.set_state_if(br#"{"n":3}"#, None).unwrap().version;
    let events = events_until(&w, &BTreeMap::from([("r-a".to_string(), next)]));
    let versions: Vec<u64> = events.iter().map(|e| e.version).collect();
    // The write in flight committed after the watch began (delivered), or the watch began only
    // once it had committed (its start version): never lost between the two.
    if opened_first {
        assert_eq!(versions, vec![in_flight, next]);
    } else {
        assert_eq!(versions, vec![next]);
    }
}

#[test]
fn a_listener_connection_the_server_ends_is_made_again_and_nothing_is_missed() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(db) = Db::new("terminated") else {
        return;
    };
    let ids = ["t-a", "t-b", "t-c"];
    for id in ids {
        open(&db.uri, id, true).set_state(b"{}").unwrap();
    }
    let options = WatchOptions::default()
        .states(true)
        .rescan_interval(Duration::from_secs(3600));
    let w = watch(&db.uri, Selector::Prefix("t-".into()), options);
    let uri = db.uri.clone();
    let writer = std::thread::spawn(move || {
        let agents: Vec<Agent> = ids.iter().map(|id| open(&uri, id, true)).collect();
        let mut last = BTreeMap::new();
        for i in 0..60 {
            for (a, id) in agents.iter().zip(ids) {
                let v = a
                    .set_state_if(format!(r#"{{"{id}":{i}}}"#).as_bytes(), None)
                    .unwrap()
                    .version;
                last.insert(id.to_string(), v);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        last
    });
    // The listener: the connection whose last statement was its start's wait for writes.
    let mut admin = db.client();
    let mut ended = 0;
    let deadline = Instant::now() + PATIENCE;
    while ended < 2 && !writer.is_finished() {
        let n: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() \
                 AND query LIKE 'BEGIN; SET LOCAL lock_timeout = %; LOCK TABLE agent_state%'",
                &[],
            )
            .unwrap()
            .get(0);
        ended += n;
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    let last = writer.join().unwrap();
    let events = events_until(&w, &last);
    check_complete(&events, &db.uri);
    eprintln!(
        "{ended} listener connection(s) ended; {} events",
        events.len()
    );
}

/// Polling (`WatchOptions::poll_interval`, the open option `watch_poll_ms`): what a
/// connection through a transaction pooler uses; through PgBouncer in both modes when
/// tests/pg/pooler-suites.sh runs this suite, against the server directly otherwise.
#[test]
fn polling_delivers_also_through_a_transaction_pooler() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(uri) = server() else { return };
    let tag = format!("poll-{}-", std::process::id());
    let a = open(&uri, &format!("{tag}a"), true);
    a.set_state(br#"{"n":0}"#).unwrap();
    let options = WatchOptions::default()
        .states(true)
        .poll_interval(Some(Duration::from_millis(100)));
    let w = watch(&uri, Selector::Prefix(tag.clone()), options);
    let mut last = 0;
    for i in 1..=5 {
        last = a
            .set_state_if(format!(r#"{{"n":{i}}}"#).as_bytes(), None)
            .unwrap()
            .version;
    }
    let b = open(&uri, &format!("{tag}b"), false);
    let b_last = b.set_state_if(br#"{"b":1}"#, None).unwrap().version;
    let events = events_until(
        &w,
        &BTreeMap::from([(format!("{tag}a"), last), (format!("{tag}b"), b_last)]),
    );
    check_complete(&events, &uri);
}

#[test]
fn a_watch_catches_up_after_the_server_restarts() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    if server().is_none() || std::env::var("AGENT_STATE_TEST_PG_POOLER").is_ok() {
        return;
    }
    let Some((own, uri)) = Server::start() else {
        return;
    };
    let agents: Vec<Agent> = ["s-a", "s-b"]
        .iter()
        .map(|id| open(&uri, id, true))
        .collect();
    for a in &agents {
        a.set_state(b"{}").unwrap();
    }
    let options = WatchOptions::default()
        .states(true)
        .rescan_interval(Duration::from_secs(3600));
    let w = watch(&uri, Selector::Prefix("s-".into()), options);
    let mut last = BTreeMap::new();
    let write_all = |round: u32, last: &mut BTreeMap<String, u64>| {
        for (i, a) in agents.iter().enumerate() {
            // A write may meet the server just back (Unavailable): the next one goes through.
            let deadline = Instant::now() + PATIENCE;
            loop {
                match a.set_state_if(format!(r#"{{"r{i}":{round}}}"#).as_bytes(), None) {
                    Ok(v) => {
                        last.insert(format!("s-{}", ["a", "b"][i]), v.version);
                        break;
                    }
                    Err(e) => assert!(Instant::now() < deadline, "{e:?}"),
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    write_all(1, &mut last);
    events_until(&w, &last);
    assert!(own.run("kill").status.success());
    assert!(own.run("restart").status.success());
    // Written at once after the restart: before the watcher is back (its registration, kept
    // in the table, still makes the writers notify, and no one hears it).
    for round in 2..6 {
        write_all(round, &mut last);
    }
    let events = events_until(&w, &last);
    check_complete(&events, &uri);
}
