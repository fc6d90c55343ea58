//! Delta storage: a state stored as its base and the patches after it reads back exactly
//! (bytes, member order, numbers) cold, by a handle that catches up, and after the log is
//! switched; the stored patches stay bounded; an older file upgrades with its states. On
//! either backend (`#[each_backend]`, crates/test-support), but for the tests of SQLite files,
//! which say so.

use agent_state::{Agent, OpenOptions};
use serde_json::json;

use test_support::{each_backend, open, opts, server_client, sqlite_only, text, Place, TempDir};

/// A member of about 200 bytes.
fn filler(i: usize) -> String {
    format!("{i:05}-{}", "x".repeat(190))
}

/// A state of about `kib` KiB, of ~200-byte members.
fn big_state(kib: usize) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    for i in 0..kib * 5 {
        map.insert(format!("m{i}"), json!(filler(i)));
    }
    serde_json::to_vec(&serde_json::Value::Object(map)).unwrap()
}

/// The `n`th patch of a varied history: adds a member, changes a nested field, a number
/// that must keep its spelling, and every few writes deletes one.
fn patch(n: usize) -> Vec<u8> {
    let mut p = json!({
        format!("added{n}"): filler(n),
        "nested": {"count": n, "keep": {"f": 1.5e300, "big": 12345678901234567890u64}},
    });
    if n.is_multiple_of(3) {
        p[format!("m{}", n / 3)] = serde_json::Value::Null;
    }
    if n.is_multiple_of(5) {
        p["nested"]["gone"] = serde_json::Value::Null;
    } else {
        p["nested"]["gone"] = json!([n, "a"]);
    }
    serde_json::to_vec(&p).unwrap()
}

fn fresh_read(place: &Place) -> (String, u64) {
    let reader = open(place, &OpenOptions::default()).unwrap();
    let v = reader.get_state_versioned().unwrap();
    (text(&v.state), v.version)
}

/// Every version reads back as its writer returned it: from a new handle (a cold read: the
/// base and the patches after it), and from a handle that reads every few writes (it catches
/// up by the patches it missed), across many bases.
fn history_reads_back_exactly(options: serde_json::Value) {
    let dir = TempDir::new("delta_exact");
    let place = dir.store("a.db");
    let a = open(&place, &opts(options)).unwrap();
    let b = open(&place, &OpenOptions::default()).unwrap();
    a.replace_state(&big_state(8)).unwrap();
    for n in 1..=200 {
        let written = a.set_state_if(&patch(n), None).unwrap();
        let expect = (text(&written.state), written.version);
        if n.is_multiple_of(7) {
            let v = b.get_state_versioned().unwrap();
            assert_eq!(
                (text(&v.state), v.version),
                expect,
                "caught up at write {n}"
            );
        }
        if n.is_multiple_of(23) || n == 200 {
            assert_eq!(fresh_read(&place), expect, "cold read at write {n}");
        }
    }
    // A merge through the handle that caught up starts from the latest state.
    let from_b = b.set_state(br#"{"last":true}"#).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), text(&from_b));
}

#[each_backend]
fn a_large_state_reads_back_exactly_across_many_patches() {
    history_reads_back_exactly(json!({"synchronous": "normal"}));
}

#[each_backend]
fn a_large_state_with_the_log_on_reads_back_exactly() {
    history_reads_back_exactly(json!({"synchronous": "normal", "change_log": {"keep_last": 10}}));
}

#[each_backend]
fn logged_states_of_a_large_state_are_rebuilt_exactly() {
    let dir = TempDir::new("delta_state_at");
    let place = dir.store("a.db");
    let log = json!({"synchronous": "normal", "change_log": {"keep_last": 1000}});
    let a = open(&place, &opts(log)).unwrap();
    a.replace_state(&big_state(6)).unwrap();
    let mut states = Vec::new();
    for n in 1..=150 {
        states.push(a.set_state_if(&patch(n), None).unwrap());
    }
    for w in states.iter().step_by(11) {
        assert_eq!(text(&a.state_at(w.version).unwrap()), text(&w.state));
    }
}

#[each_backend]
fn switching_the_log_keeps_a_large_state() {
    let dir = TempDir::new("delta_switch");
    let place = dir.store("a.db");
    let a = open(&place, &opts(json!({"synchronous": "normal"}))).unwrap();
    a.replace_state(&big_state(6)).unwrap();
    for n in 1..=10 {
        a.set_state(&patch(n)).unwrap();
    }
    let before = fresh_read(&place);
    a.close().unwrap();
    // On: the patches stored while it was off are not history.
    let on = json!({"synchronous": "normal", "change_log": {"keep_last": 100}});
    let b = open(&place, &opts(on)).unwrap();
    assert_eq!(fresh_read(&place), before);
    let changes = |since| -> usize {
        let list: serde_json::Value =
            serde_json::from_slice(&b.changes_since(since).unwrap()).unwrap();
        list.as_array().unwrap().len()
    };
    assert_eq!(changes(before.1), 0);
    assert!(matches!(
        b.changes_since(before.1 - 1),
        Err(agent_state::Error::Gap { .. })
    ));
    for n in 11..=20 {
        b.set_state(&patch(n)).unwrap();
    }
    assert_eq!(changes(before.1), 10);
    let logged = fresh_read(&place);
    b.close().unwrap();
    // Off again: the state stays.
    let c = open(&place, &opts(json!({"change_log": false}))).unwrap();
    assert_eq!(fresh_read(&place), logged);
    c.set_state(&patch(21)).unwrap();
    assert_eq!(fresh_read(&place).1, logged.1 + 1);
}

/// With the log off, a large state keeps at most `max_patches` patch rows (128 for a 32 KiB
/// state), however long its history; each write stores a patch, not the state.
#[test]
fn the_stored_patches_stay_bounded() {
    sqlite_only!("counts the rows of a SQLite file");
    let dir = TempDir::new("delta_bounded");
    let path = dir.file("a.db");
    let a = Agent::open_with(&path, &opts(json!({"synchronous": "normal"}))).unwrap();
    a.replace_state(&big_state(32)).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let rows = || -> (i64, i64) {
        raw.query_row(
            "SELECT (SELECT count(*) FROM agent_changes), (SELECT version - base FROM agent_state)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let mut most = 0;
    let mut patched = 0;
    for n in 1..=300 {
        a.set_state(&patch(n)).unwrap();
        let (count, behind) = rows();
        assert_eq!(count, behind, "one patch row per version after the base");
        most = most.max(count);
        patched += i64::from(count > 0);
    }
    assert!(
        most as u64 <= agent_state::internals::max_patches(big_state(32).len() + 300 * 400),
        "{most} patch rows"
    );
    assert!(
        patched > 250,
        "most writes stored only their patch ({patched} of 300)"
    );
}

/// A file of schema 4 (the whole state in its row) upgrades in place: its large and small
/// states read back as they were, and the next writes store patches.
#[test]
fn a_store_of_schema_4_upgrades_with_its_states() {
    sqlite_only!("writes a SQLite file of the previous schema");
    let dir = TempDir::new("delta_upgrade");
    let path = dir.file("a.db");
    let big = String::from_utf8(big_state(16)).unwrap();
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(&format!(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE agent_state (agent TEXT PRIMARY KEY NOT NULL, value BLOB,
                 version INTEGER NOT NULL DEFAULT 0, change_log BLOB,
                 written_ms INTEGER NOT NULL DEFAULT 0, written_grain INTEGER NOT NULL DEFAULT 0);
             CREATE TABLE agent_changes (agent TEXT NOT NULL, version INTEGER NOT NULL,
                 at_ms INTEGER NOT NULL, writer INTEGER NOT NULL, patch BLOB, next BLOB, prev BLOB,
                 PRIMARY KEY (agent, version)) WITHOUT ROWID;
             CREATE INDEX agent_state_idle ON agent_state (written_grain);
             CREATE TABLE agent_deleted (id_hash INTEGER PRIMARY KEY NOT NULL,
                 version INTEGER NOT NULL);
             INSERT INTO agent_state (agent, value, version) VALUES
                 ('big', CAST('{big}' AS BLOB), 7), ('small', CAST('{{\"s\":1}}' AS BLOB), 3);
             PRAGMA application_id = {};
             PRAGMA user_version = 4;",
            agent_state::internals::APPLICATION_ID
        ))
        .unwrap();
    }
    let with = |id: &str| opts(json!({"agent_id": id, "synchronous": "normal"}));
    let big_agent = Agent::open_with(&path, &with("big")).unwrap();
    let v = big_agent.get_state_versioned().unwrap();
    assert_eq!((text(&v.state), v.version), (big.clone(), 7));
    let small = Agent::open_with(&path, &with("small")).unwrap();
    let v = small.get_state_versioned().unwrap();
    assert_eq!((text(&v.state), v.version), (r#"{"s":1}"#.to_string(), 3));
    let written = big_agent.set_state_if(&patch(1), None).unwrap();
    let reread = Agent::open_with(&path, &with("big")).unwrap();
    assert_eq!(text(&reread.get_state().unwrap()), text(&written.state));
    let raw = rusqlite::Connection::open(&path).unwrap();
    let (schema, patches): (i64, i64) = raw
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version()),
                    (SELECT count(*) FROM agent_changes WHERE agent = 'big')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (schema, patches),
        (i64::from(agent_state::internals::SQLITE_SCHEMA_VERSION), 1)
    );
}

/// On PostgreSQL, a write to a large state with the log off stores its patch: the row's base
/// stays behind its version, and the patch rows hold no state.
#[each_backend]
fn a_large_state_on_the_server_stores_patches() {
    let dir = TempDir::new("delta_server");
    let place = dir.store("a.db");
    let Place::Postgres { uri, agent } = &place else {
        eprintln!("skipped on SQLite: PostgreSQL's own rows");
        return;
    };
    let a = open(&place, &opts(json!({"synchronous": "normal"}))).unwrap();
    a.replace_state(&big_state(32)).unwrap();
    for n in 1..=10 {
        a.set_state(&patch(n)).unwrap();
    }
    let mut client = server_client(uri);
    let row = client
        .query_one(
            "SELECT s.version - s.base,
                    (SELECT count(*) FROM agent_changes c WHERE c.agent = s.agent AND c.next IS NULL
                       AND c.version > s.base),
                    (SELECT max(octet_length(c.patch)) FROM agent_changes c WHERE c.agent = s.agent)
             FROM agent_state s WHERE s.agent = $1",
            &[agent],
        )
        .unwrap();
    let (behind, patches, largest): (i64, i64, Option<i32>) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((behind, patches), (10, 10));
    assert!(
        largest.unwrap() < 1024,
        "a patch row holds {largest:?} bytes"
    );
    assert_eq!(fresh_read(&place).1, 11);
}
