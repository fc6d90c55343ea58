//! The schema versions the backends store (SQLite's schema 6, PostgreSQL's 5): each write's
//! `schema` and `migrated_from` read back through `read_stored` and the change log, with the
//! log off and on, across a state stored as its base and patches, reset by a deletion; and the
//! upgrade of a store of the previous schema, which keeps every state, version and log entry
//! (as schema 0).
//!
//! These use the backends' traits, below the agent, so each test runs on a SQLite file and, when
//! `AGENT_STATE_TEST_PG_URI` names a server (tests/pg/with-server.sh), on PostgreSQL, where
//! the optimistic write (one statement at the commit) is exercised too. Without a server the
//! PostgreSQL half says it was skipped (a failure under `CI=true`, as test-support's
//! `#[each_backend]`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::store::{
    Backend, LogRetention, LoggedChange, NewChange, StoreOptions, Synchronous, Txn,
};
use crate::value::snapshot::Snapshot;

/// Where a test's stores are.
#[derive(Clone, Debug)]
enum Place {
    /// A SQLite file (removed with its directory at the end of the test).
    Sqlite(PathBuf),
    /// A PostgreSQL database; agents are named by the test (unique per run).
    Postgres(String),
}

/// A directory of its own under the system temp dir, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agent_state_unit_{name}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The test server, if any (see the module's comment).
fn pg_uri() -> Option<String> {
    let uri = std::env::var("AGENT_STATE_TEST_PG_URI")
        .ok()
        .filter(|u| !u.is_empty());
    if uri.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "AGENT_STATE_TEST_PG_URI is unset under CI=true: the PostgreSQL half cannot run"
        );
        eprintln!("skipped on PostgreSQL: AGENT_STATE_TEST_PG_URI is unset");
    }
    uri
}

/// Runs `test` on a fresh SQLite file, then on the test server (when there is one), with an
/// agent id unique to this run.
fn each_backend(name: &str, test: impl Fn(&Place, &str)) {
    let dir = Dir::new(name);
    test(&Place::Sqlite(dir.0.join("a.db")), "a");
    if let Some(uri) = pg_uri() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let agent = format!("unit_{name}_{}_{nanos}", std::process::id());
        test(&Place::Postgres(uri), &agent);
    }
}

fn options(agent: &str, read_only: bool) -> StoreOptions {
    StoreOptions {
        synchronous: Synchronous::Normal,
        busy_timeout: Duration::from_secs(5),
        server_timeout: Duration::from_secs(10),
        read_only,
        agent_id: Some(agent.to_string()),
        max_connections: 4,
    }
}

fn location(place: &Place) -> &Path {
    match place {
        Place::Sqlite(path) => path,
        Place::Postgres(uri) => Path::new(uri),
    }
}

fn open(place: &Place, agent: &str) -> Box<dyn Backend> {
    super::open(location(place), &options(agent, false)).unwrap()
}

/// The test's own connection to the server, behind the library's back.
fn server_client(uri: &str) -> postgres::Client {
    let server = std::env::var("AGENT_STATE_TEST_PG_SERVER_URI")
        .ok()
        .filter(|s| !s.is_empty());
    postgres::Client::connect(server.as_deref().unwrap_or(uri), postgres::NoTls).unwrap()
}

/// One row of integers (NULL: `None`) that `sql` (parameter `$1`: `agent`) selects, read
/// behind the library's back.
fn raw_row(place: &Place, sql: &str, agent: &str) -> Vec<Option<i64>> {
    match place {
        Place::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            let sql = sql.replace("$1", "?1");
            conn.query_row(&sql, [agent], |r| {
                (0..r.as_ref().column_count())
                    .map(|i| r.get::<_, Option<i64>>(i))
                    .collect()
            })
            .unwrap()
        }
        Place::Postgres(uri) => {
            let row = server_client(uri).query_one(sql, &[&agent]).unwrap();
            (0..row.len()).map(|i| row.get(i)).collect()
        }
    }
}

/// How a write is committed: under the lock, or optimistically (PostgreSQL's one-statement
/// commit; the same as locked on SQLite).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Commit {
    Locked,
    Optimistic,
}

/// One write to make.
struct Write<'a> {
    version: u64,
    patch: Option<&'a [u8]>,
    next: &'a Snapshot,
    schema: u32,
    migrated_from: Option<u32>,
}

fn write(store: &mut dyn Backend, how: Commit, log: Option<LogRetention>, w: &Write<'_>) {
    let txn = match how {
        Commit::Locked => Txn::write(&*store),
        Commit::Optimistic => Txn::optimistic_write(&*store),
    }
    .unwrap();
    // The first change of an incarnation: version 1, or the first after a deletion (7 here).
    let first = w.version == 1 || w.version == 7;
    let empty = b"{}";
    let change = NewChange {
        prev_logged: false,
        first,
        version: w.version,
        at_ms: crate::store::now_ms(),
        writer: 7,
        patch: w.patch,
        schema: w.schema,
        migrated_from: w.migrated_from,
        prev: first.then_some(&empty[..]),
        next: w.next,
    };
    txn.write_change(&change, log).unwrap();
    txn.commit().unwrap();
    store.end_call();
}

fn set_log(store: &mut dyn Backend, log: Option<LogRetention>) {
    let txn = Txn::write(&*store).unwrap();
    txn.set_log_retention(log).unwrap();
    txn.commit().unwrap();
    store.end_call();
}

/// The stored version and schema version (`None`: nothing stored), and how many patches the
/// state is read with.
fn stored(store: &mut dyn Backend) -> Option<(u64, u32, usize)> {
    in_read(store, |txn| {
        txn.read_stored(None)
            .unwrap()
            .map(|r| (r.version, r.schema, r.patches.len()))
    })
}

/// `f` in a read transaction, which ends with the call (a named SQLite agent's handle shares
/// its connection with the file's others, and holds it until its call ends).
fn in_read<T>(store: &mut dyn Backend, f: impl FnOnce(&Txn<'_>) -> T) -> T {
    let txn = Txn::read(&*store).unwrap();
    let out = f(&txn);
    drop(txn);
    store.end_call();
    out
}

/// (version, schema, migrated_from) of each entry.
fn entries(changes: &[LoggedChange]) -> Vec<(u64, u32, Option<u32>)> {
    changes
        .iter()
        .map(|c| (c.version, c.schema, c.migrated_from))
        .collect()
}

const KEEP: LogRetention = LogRetention {
    keep_last: Some(1000),
    keep_seconds: None,
};

/// A state of about `kib` KiB (a large state: stored as its base and patches), with `n`.
fn big(kib: usize, n: u64) -> Snapshot {
    let mut map = serde_json::Map::new();
    for i in 0..kib * 5 {
        map.insert(
            format!("m{i}"),
            json!(format!("{i:05}-{}", "x".repeat(190))),
        );
    }
    map.insert("n".to_string(), json!(n));
    Snapshot::new(serde_json::Value::Object(map))
}

/// A change written with `schema: 3, migrated_from: Some(2)` reads back with them: the
/// state's through `read_stored`, the entry's through `changes_after`, `change_at` and
/// `replay_to`; a later merge keeps its own (no migration); and the extreme `u32`s come back
/// exactly. With the log off and on, committed under the lock and optimistically.
#[test]
fn the_schema_versions_of_states_and_entries_read_back() {
    each_backend("schema_rw", |place, agent| {
        for how in [Commit::Locked, Commit::Optimistic] {
            for logged in [false, true] {
                let agent = format!("{agent}_{how:?}_{logged}");
                let mut store = open(place, &agent);
                let log = logged.then_some(KEEP);
                if logged {
                    set_log(&mut *store, log);
                }
                let v1 = Snapshot::new(json!({"a": 1}));
                let v2 = Snapshot::new(json!({"b": 2}));
                let v3 = Snapshot::new(json!({"b": 2, "c": 3}));
                let mut w = Write {
                    version: 1,
                    patch: None,
                    next: &v1,
                    schema: 2,
                    migrated_from: None,
                };
                // The first write is always locked (its version depends on the tombstone).
                write(&mut *store, Commit::Locked, log, &w);
                assert_eq!(stored(&mut *store), Some((1, 2, 0)), "{place:?} {agent}");
                w = Write {
                    version: 2,
                    next: &v2,
                    schema: 3,
                    migrated_from: Some(2),
                    ..w
                };
                write(&mut *store, how, log, &w);
                assert_eq!(stored(&mut *store), Some((2, 3, 0)), "{place:?} {agent}");
                w = Write {
                    version: 3,
                    patch: Some(br#"{"c":3}"#),
                    next: &v3,
                    schema: 3,
                    migrated_from: None,
                };
                write(&mut *store, how, log, &w);
                assert_eq!(stored(&mut *store), Some((3, 3, 0)), "{place:?} {agent}");
                w = Write {
                    version: 4,
                    patch: None,
                    next: &v3,
                    schema: u32::MAX,
                    migrated_from: Some(u32::MAX - 1),
                };
                write(&mut *store, how, log, &w);
                assert_eq!(
                    stored(&mut *store),
                    Some((4, u32::MAX, 0)),
                    "{place:?} {agent}"
                );
                // A new handle reads the same.
                let mut other = open(place, &agent);
                assert_eq!(
                    stored(&mut *other),
                    Some((4, u32::MAX, 0)),
                    "{place:?} {agent}"
                );
                if !logged {
                    continue;
                }
                let txn = Txn::read(&*other).unwrap();
                assert_eq!(
                    entries(&txn.changes_after(0, KEEP).unwrap()),
                    [
                        (1, 2, None),
                        (2, 3, Some(2)),
                        (3, 3, None),
                        (4, u32::MAX, Some(u32::MAX - 1))
                    ],
                    "{place:?} {agent}"
                );
                let at = txn.change_at(2, KEEP).unwrap().unwrap();
                assert_eq!((at.schema, at.migrated_from), (3, Some(2)));
                let replay = entries(&txn.replay_to(3).unwrap());
                assert_eq!(replay.last(), Some(&(3, 3, None)), "{place:?} {agent}");
                assert!(replay.contains(&(2, 3, Some(2))) || replay.len() == 1);
            }
        }
    });
}

/// A state large enough to be stored as its base and patches keeps its schema version across
/// the writes that store only a patch, and each patch row carries the write's; a migration
/// stored as a patch (a merge's bytes) records where it came from. Then a deletion resets the
/// head's schema version to 0 (the row stays, with the log setting, when the log is on).
#[test]
fn a_large_state_keeps_its_schema_across_patches_and_a_deletion_resets_it() {
    each_backend("schema_delta", |place, agent| {
        for how in [Commit::Locked, Commit::Optimistic] {
            for logged in [false, true] {
                let agent = format!("{agent}_{how:?}_{logged}");
                let mut store = open(place, &agent);
                let log = logged.then_some(KEEP);
                if logged {
                    set_log(&mut *store, log);
                }
                let first = big(8, 0);
                write(
                    &mut *store,
                    Commit::Locked,
                    log,
                    &Write {
                        version: 1,
                        patch: None,
                        next: &first,
                        schema: 5,
                        migrated_from: None,
                    },
                );
                // The optimistic write works from what the handle last read or wrote.
                assert_eq!(stored(&mut *store), Some((1, 5, 0)));
                for v in 2..=6u64 {
                    let next = big(8, v);
                    let patch = format!(r#"{{"n":{v}}}"#);
                    let (schema, migrated_from) = if v == 4 { (6, Some(5)) } else { (5, None) };
                    let schema = if v > 4 { 6 } else { schema };
                    write(
                        &mut *store,
                        how,
                        log,
                        &Write {
                            version: v,
                            patch: Some(patch.as_bytes()),
                            next: &next,
                            schema,
                            migrated_from,
                        },
                    );
                    let (version, read_schema, patches) = stored(&mut *store).unwrap();
                    assert_eq!((version, read_schema), (v, schema), "{place:?} {agent}");
                    // With the log off, the write stored only its patch (on PostgreSQL with
                    // the log on, every version's state is stored whole).
                    if !logged {
                        assert_eq!(patches as u64, v - 1, "{place:?} {agent}");
                    }
                }
                let mut other = open(place, &agent);
                assert_eq!(stored(&mut *other).map(|s| s.1), Some(6));
                let rows = raw_row(
                    place,
                    "SELECT CAST(schema AS bigint),
                        (SELECT CAST(migrated_from AS bigint) FROM agent_changes
                         WHERE agent = $1 AND version = 4),
                        (SELECT CAST(schema AS bigint) FROM agent_changes
                         WHERE agent = $1 AND version = 3),
                        (SELECT count(*) FROM agent_changes WHERE agent = $1 AND migrated_from
                         IS NOT NULL AND version <> 4)
                     FROM agent_state WHERE agent = $1",
                    &agent,
                );
                assert_eq!(
                    rows,
                    [Some(6), Some(5), Some(5), Some(0)],
                    "{place:?} {agent}"
                );
                if logged {
                    let txn = Txn::read(&*other).unwrap();
                    assert_eq!(
                        entries(&txn.changes_after(2, KEEP).unwrap()),
                        [(3, 5, None), (4, 6, Some(5)), (5, 6, None), (6, 6, None)]
                    );
                }
                drop((store, other));
                let agents = super::open_agents(location(place), &options("", false)).unwrap();
                assert_eq!(agents.delete_agent(&agent, &|_| Ok(())).unwrap(), Some(6));
                let mut store = open(place, &agent);
                assert_eq!(stored(&mut *store), None);
                if logged {
                    // The row stays (it holds the log setting), emptied.
                    let rows = raw_row(
                        place,
                        "SELECT version, CAST(schema AS bigint) FROM agent_state WHERE agent = $1",
                        &agent,
                    );
                    assert_eq!(rows, [Some(0), Some(0)], "{place:?} {agent}");
                }
                // The next incarnation's first write has its own schema version.
                let again = Snapshot::new(json!({"again": true}));
                write(
                    &mut *store,
                    Commit::Locked,
                    log,
                    &Write {
                        version: 7,
                        patch: None,
                        next: &again,
                        schema: 0,
                        migrated_from: None,
                    },
                );
                assert_eq!(stored(&mut *store), Some((7, 0, 0)), "{place:?} {agent}");
            }
        }
    });
}

/// The schema-5 layout of a SQLite file (as the previous release created it), with a small
/// state and its log (`''`, the file's single agent, logged), and a large one stored as its
/// base (in `agent_base`) and two patches (`big`).
const SQLITE_SCHEMA_5: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE agent_state (agent TEXT PRIMARY KEY NOT NULL, value BLOB,
    version INTEGER NOT NULL DEFAULT 0, change_log BLOB,
    written_ms INTEGER NOT NULL DEFAULT 0, written_grain INTEGER NOT NULL DEFAULT 0,
    base INTEGER NOT NULL DEFAULT 0, tail INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0);
CREATE TABLE agent_changes (agent TEXT NOT NULL, version INTEGER NOT NULL,
    at_ms INTEGER NOT NULL, writer INTEGER NOT NULL, patch BLOB, next BLOB, prev BLOB,
    PRIMARY KEY (agent, version)) WITHOUT ROWID;
CREATE INDEX agent_state_idle ON agent_state (written_grain);
CREATE TABLE agent_deleted (id_hash INTEGER PRIMARY KEY NOT NULL, version INTEGER NOT NULL);
CREATE TABLE agent_base (agent TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
INSERT INTO agent_state (agent, value, version, change_log, written_ms, base, bytes) VALUES
    ('', CAST('{\"a\":1,\"b\":2}' AS BLOB), 2, CAST('{\"keep_last\":100}' AS BLOB), 1000, 2, 13),
    ('big', NULL, 9, NULL, 1000, 7, 5000);
INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev) VALUES
    ('', 1, 10, 1, NULL, CAST('{\"a\":1}' AS BLOB), CAST('{}' AS BLOB)),
    ('', 2, 20, 1, CAST('{\"b\":2}' AS BLOB), NULL, NULL),
    ('big', 8, 30, 1, CAST('{\"n\":8}' AS BLOB), NULL, NULL),
    ('big', 9, 40, 1, CAST('{\"n\":9}' AS BLOB), NULL, NULL);
INSERT INTO agent_base (agent, value) VALUES ('big', CAST('{\"n\":7}' AS BLOB));
PRAGMA application_id = 1097290612;
PRAGMA user_version = 5;
";

/// What a store of the previous schema reads as: the single agent's state (version 2, no
/// patches) and log, and `big` (version 9, base 7 and two patches), all of schema 0.
fn check_previous_schema(path: &Path, read_only: bool) {
    let single = StoreOptions {
        agent_id: None,
        ..options("", read_only)
    };
    let store = super::open(path, &single).unwrap();
    let txn = Txn::read(&*store).unwrap();
    let read = txn.read_stored(None).unwrap().unwrap();
    assert_eq!(
        (read.version, read.schema, read.base, read.patches.len()),
        (2, 0, Some((br#"{"a":1,"b":2}"#.to_vec(), 2)), 0)
    );
    let log = txn.changes_after(0, KEEP).unwrap();
    assert_eq!(entries(&log), [(1, 0, None), (2, 0, None)]);
    assert_eq!(log[0].next.as_deref(), Some(&br#"{"a":1}"#[..]));
    assert_eq!(log[1].patch.as_deref(), Some(&br#"{"b":2}"#[..]));
    let at = txn.change_at(2, KEEP).unwrap().unwrap();
    assert_eq!((at.at_ms, at.schema, at.migrated_from), (20, 0, None));
    assert_eq!(
        entries(&txn.replay_to(2).unwrap()),
        [(1, 0, None), (2, 0, None)]
    );
    drop(txn);
    let big = super::open(path, &options("big", read_only)).unwrap();
    let txn = Txn::read(&*big).unwrap();
    let read = txn.read_stored(None).unwrap().unwrap();
    assert_eq!(
        (read.version, read.schema, read.base, read.patches),
        (
            9,
            0,
            Some((br#"{"n":7}"#.to_vec(), 7)),
            vec![br#"{"n":8}"#.to_vec(), br#"{"n":9}"#.to_vec()]
        )
    );
}

/// A file of schema 5 is read as it is by a read-only handle (schema versions 0, the file
/// untouched), and upgraded in place by the first handle that may write: every state, version
/// and log entry kept, of schema 0, and the next writes store their schema versions.
#[test]
fn a_sqlite_store_of_schema_5_upgrades_keeping_everything_as_schema_0() {
    let dir = Dir::new("schema_upgrade_sqlite");
    let path = dir.0.join("a.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(SQLITE_SCHEMA_5)
        .unwrap();
    let user_version = || -> i64 {
        rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    check_previous_schema(&path, true);
    assert_eq!(user_version(), 5, "a read-only handle changes nothing");
    check_previous_schema(&path, false);
    assert_eq!(user_version(), i64::from(super::sqlite::SCHEMA_VERSION));
    assert_eq!(super::sqlite::SCHEMA_VERSION, 6);
    // The columns are there, every row of schema 0.
    let place = Place::Sqlite(path.clone());
    let rows = raw_row(
        &place,
        "SELECT (SELECT count(*) FROM agent_state WHERE schema = 0),
                (SELECT count(*) FROM agent_changes WHERE schema = 0 AND migrated_from IS NULL),
                (SELECT count(*) FROM agent_changes)
         WHERE $1 IS NOT NULL",
        "",
    );
    assert_eq!(rows, [Some(2), Some(4), Some(4)]);
    // Writes go on where the old ones stopped, with their schema versions.
    let mut store = open(&place, "big");
    let next = Snapshot::new(json!({"n": 10}));
    write(
        &mut *store,
        Commit::Locked,
        None,
        &Write {
            version: 10,
            patch: Some(br#"{"n":10}"#),
            next: &next,
            schema: 1,
            migrated_from: Some(0),
        },
    );
    assert_eq!(stored(&mut *store), Some((10, 1, 0)));
    let mut single = super::open(
        &path,
        &StoreOptions {
            agent_id: None,
            ..options("", false)
        },
    )
    .unwrap();
    let next = Snapshot::new(json!({"a": 1, "b": 2, "c": 3}));
    write(
        &mut *single,
        Commit::Locked,
        Some(KEEP),
        &Write {
            version: 3,
            patch: Some(br#"{"c":3}"#),
            next: &next,
            schema: 1,
            migrated_from: None,
        },
    );
    let txn = Txn::read(&*single).unwrap();
    assert_eq!(
        entries(&txn.changes_after(0, KEEP).unwrap()),
        [(1, 0, None), (2, 0, None), (3, 1, None)]
    );
}

/// A database of PostgreSQL's schema 4 (as the previous release created it) is upgraded in
/// place by the first open: every state, version and log entry kept, of schema 0, and the next
/// writes store their schema versions. (Skipped without a server.)
#[test]
fn a_postgres_database_of_schema_4_upgrades_keeping_everything_as_schema_0() {
    let Some(uri) = pg_uri() else {
        return;
    };
    let db = format!(
        "unit_schema4_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros()
    );
    let mut admin = server_client(&uri);
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .unwrap();
    let db_uri = {
        let (scheme, rest) = uri.split_once("://").unwrap();
        let path_start = rest.find('/').unwrap_or(rest.len());
        let after = &rest[path_start..];
        let query = after.find('?').map_or("", |q| &after[q..]);
        format!("{scheme}://{}/{db}{query}", &rest[..path_start])
    };
    let result = std::panic::catch_unwind(|| {
        let mut inside = server_client(&db_uri);
        inside
            .batch_execute(
                "CREATE TABLE agent_state_schema (singleton int PRIMARY KEY
                     CHECK (singleton = 1), version int NOT NULL);
                 CREATE TABLE agent_deleted (id_hash bigint PRIMARY KEY, version bigint NOT NULL);
                 CREATE TABLE agent_settings (name text PRIMARY KEY, value bigint NOT NULL);
                 CREATE TABLE agent_state (agent text PRIMARY KEY, value text,
                     version bigint NOT NULL DEFAULT 0, change_log text,
                     stamp bigint NOT NULL DEFAULT 0, written_ms bigint NOT NULL DEFAULT 0,
                     written_grain bigint NOT NULL DEFAULT 0, base bigint NOT NULL DEFAULT 0,
                     tail bigint NOT NULL DEFAULT 0, bytes bigint NOT NULL DEFAULT 0);
                 CREATE INDEX agent_state_idle ON agent_state (written_grain);
                 CREATE INDEX agent_state_by_id ON agent_state (agent COLLATE \"C\");
                 CREATE TABLE agent_changes (agent text NOT NULL, version bigint NOT NULL,
                     at_ms bigint NOT NULL, writer bigint NOT NULL, patch text, next text,
                     prev text, PRIMARY KEY (agent, version));
                 INSERT INTO agent_state_schema VALUES (1, 4);
                 INSERT INTO agent_state (agent, value, version, change_log, stamp, written_ms,
                     base, bytes) VALUES
                     ('logged', '{\"a\":1,\"b\":2}', 2, '{\"keep_last\":100}', 5, 1000, 2, 13),
                     ('big', '{\"n\":7}', 9, NULL, 6, 1000, 7, 7);
                 INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev)
                 VALUES
                     ('logged', 1, 10, 1, NULL, '{\"a\":1}', '{}'),
                     ('logged', 2, 20, 1, '{\"b\":2}', '{\"a\":1,\"b\":2}', NULL),
                     ('big', 8, 30, 1, '{\"n\":8}', NULL, NULL),
                     ('big', 9, 40, 1, '{\"n\":9}', NULL, NULL);",
            )
            .unwrap();
        let read_only = super::open(Path::new(&db_uri), &options("logged", true));
        assert!(read_only.is_err(), "a read-only handle does not upgrade");
        let mut logged = super::open(Path::new(&db_uri), &options("logged", false)).unwrap();
        let version: i32 = inside
            .query_one("SELECT version FROM agent_state_schema", &[])
            .unwrap()
            .get(0);
        assert_eq!(version, super::postgres::SCHEMA_VERSION);
        assert_eq!(super::postgres::SCHEMA_VERSION, 5);
        let txn = Txn::read(&*logged).unwrap();
        let read = txn.read_stored(None).unwrap().unwrap();
        assert_eq!(
            (read.version, read.schema, read.base),
            (2, 0, Some((br#"{"a":1,"b":2}"#.to_vec(), 2)))
        );
        let log = txn.changes_after(0, KEEP).unwrap();
        assert_eq!(entries(&log), [(1, 0, None), (2, 0, None)]);
        assert_eq!(log[1].patch.as_deref(), Some(&br#"{"b":2}"#[..]));
        let at = txn.change_at(1, KEEP).unwrap().unwrap();
        assert_eq!((at.at_ms, at.schema, at.migrated_from), (10, 0, None));
        assert_eq!(entries(&txn.replay_to(2).unwrap()), [(2, 0, None)]);
        drop(txn);
        let big = super::open(Path::new(&db_uri), &options("big", false)).unwrap();
        let txn = Txn::read(&*big).unwrap();
        let read = txn.read_stored(None).unwrap().unwrap();
        assert_eq!(
            (read.version, read.schema, read.base, read.patches),
            (
                9,
                0,
                Some((br#"{"n":7}"#.to_vec(), 7)),
                vec![br#"{"n":8}"#.to_vec(), br#"{"n":9}"#.to_vec()]
            )
        );
        drop(txn);
        let next = Snapshot::new(json!({"a": 1, "b": 2, "c": 3}));
        write(
            &mut *logged,
            Commit::Locked,
            Some(KEEP),
            &Write {
                version: 3,
                patch: Some(br#"{"c":3}"#),
                next: &next,
                schema: 4,
                migrated_from: Some(0),
            },
        );
        let txn = Txn::read(&*logged).unwrap();
        assert_eq!(txn.read_stored(None).unwrap().unwrap().schema, 4);
        assert_eq!(
            entries(&txn.changes_after(0, KEEP).unwrap()),
            [(1, 0, None), (2, 0, None), (3, 4, Some(0))]
        );
    });
    admin
        .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
