//! Opening, the state's round trip, persistence, isolation of agents, read-only handles.

use std::path::Path;

use agent_state::{Agent, Error, OpenOptions};
use serde_json::json;
use test_support::text;

use crate::{admin, open, server_or_skip, unique, with_param};

#[test]
fn a_postgres_store_needs_an_agent_id() {
    let uri = server_or_skip!();
    let err = Agent::open_with(Path::new(&uri), &OpenOptions::default()).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidArgument("agent_id is required for a PostgreSQL store".into())
    );
}

#[test]
fn unusable_uris_are_refused_clearly_without_the_password() {
    let uri = server_or_skip!();
    let err = open(&with_param(&uri, "sslmode=strict"), "x", json!({})).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("sslmode=strict is not one of")),
        "{err}"
    );
    let err = open(
        "postgresql://someone:hunter2@/postgres?host=/nonexistent/dir&port=1",
        "x",
        json!({"busy_timeout_ms": 500}),
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Unavailable(_)), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    let err = open("postgresql://a:hunter2@/db?port=notaport", "x", json!({})).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(_)), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[test]
fn the_state_round_trips_byte_for_byte_and_persists() {
    let uri = server_or_skip!();
    let id = unique("roundtrip");
    let a = open(&uri, &id, json!({"initial_state": {"status": "idle"}})).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"status":"idle"}"#);
    let s = a.set_state(br#"{"status":"busy","n":1}"#).unwrap();
    assert_eq!(text(&s), r#"{"status":"busy","n":1}"#);
    // The library's encoding (numbers keep their text, member order stays), kept exactly:
    // jsonb would reorder, rewrite numbers and refuse \u0000.
    let exact = text(
        &a.replace_state(br#"{"b":1e2,"a":"\u0000","c":[1.50,{"z":null}]}"#)
            .unwrap(),
    );
    assert!(
        exact.starts_with(r#"{"b":1e"#) && exact.contains(r#""a":"\u0000""#),
        "{exact}"
    );
    a.close().unwrap();
    let b = open(&uri, &id, json!({"initial_state": {"other": true}})).unwrap();
    let v = b.get_state_versioned().unwrap();
    assert_eq!((text(&v.state), v.version), (exact.clone(), 2));
    // Stored as text, exactly the library's bytes.
    let stored: String = admin(&uri)
        .query_one("SELECT value FROM agent_state WHERE agent = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(stored, exact);
}

#[test]
fn agents_of_one_database_are_isolated() {
    let uri = server_or_skip!();
    let (x, y) = (unique("iso-x"), unique("iso-y"));
    let a = open(&uri, &x, json!({})).unwrap();
    let b = open(&uri, &y, json!({"initial_state": {"mine": "y"}})).unwrap();
    a.set_state(br#"{"mine":"x"}"#).unwrap();
    a.set_state(br#"{"more":1}"#).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"mine":"y"}"#);
    assert_eq!(b.get_state_versioned().unwrap().version, 0);
    b.set_state(br#"{"n":1}"#).unwrap();
    assert_eq!(b.get_state_versioned().unwrap().version, 1);
    assert_eq!(a.get_state_versioned().unwrap().version, 2);
    assert_eq!(text(&a.get_state().unwrap()), r#"{"mine":"x","more":1}"#);
}

#[test]
fn reading_never_stores_the_initial_state() {
    let uri = server_or_skip!();
    let id = unique("noinit");
    let a = open(&uri, &id, json!({"initial_state": {"v": 1}})).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), r#"{"v":1}"#);
    assert_eq!(a.get_state_versioned().unwrap().version, 0);
    let row = admin(&uri)
        .query_opt(
            "SELECT value, version FROM agent_state WHERE agent = $1",
            &[&id],
        )
        .unwrap();
    if let Some(row) = row {
        assert_eq!(row.get::<_, Option<String>>(0), None);
        assert_eq!(row.get::<_, i64>(1), 0);
    }
    let b = open(&uri, &id, json!({"initial_state": {"v": 2}})).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"v":2}"#);
    assert_eq!(
        text(&b.set_state(br#"{"w":3}"#).unwrap()),
        r#"{"v":2,"w":3}"#
    );
    assert_eq!(text(&a.get_state().unwrap()), r#"{"v":2,"w":3}"#);
}

#[test]
fn a_read_only_handle_reads_and_refuses_writes() {
    let uri = server_or_skip!();
    let id = unique("ro");
    let w = open(&uri, &id, json!({})).unwrap();
    w.set_state(br#"{"x":1}"#).unwrap();
    let r = open(&uri, &id, json!({"read_only": true})).unwrap();
    assert_eq!(text(&r.get_state().unwrap()), r#"{"x":1}"#);
    for err in [
        r.set_state(br#"{"x":2}"#).unwrap_err(),
        r.replace_state(br#"{"x":2}"#).unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::Storage(m) if m.contains("opened read_only; writes are refused")),
            "{err}"
        );
    }
    w.set_state(br#"{"x":3}"#).unwrap();
    assert_eq!(text(&r.get_state().unwrap()), r#"{"x":3}"#);
    assert_eq!(r.get_state_versioned().unwrap().version, 2);
}

#[test]
fn compare_and_set_sees_through_a_stale_cache() {
    let uri = server_or_skip!();
    let id = unique("cas");
    let a = open(&uri, &id, json!({})).unwrap();
    let b = open(&uri, &id, json!({})).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 1);
    b.set_state(br#"{"n":2}"#).unwrap();
    // a's cache says version 1; the store is at 2.
    let err = a.set_state_if(br#"{"n":3}"#, Some(1)).unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { message: m, .. } if m.contains("at version 2")),
        "{err}"
    );
    let v = a.set_state_if(br#"{"m":1}"#, Some(2)).unwrap();
    assert_eq!(
        (v.version, text(&v.state)),
        (3, r#"{"n":2,"m":1}"#.to_string())
    );
    // A plain write from a stale cache starts from the latest state too.
    b.set_state(br#"{"k":1}"#).unwrap();
    assert_eq!(text(&b.get_state().unwrap()), r#"{"n":2,"m":1,"k":1}"#);
    a.set_state(br#"{"j":1}"#).unwrap();
    let v = b.get_state_versioned().unwrap();
    assert_eq!(
        (v.version, text(&v.state)),
        (5, r#"{"n":2,"m":1,"k":1,"j":1}"#.to_string())
    );
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let uri = server_or_skip!();
    let db = unique("newer").replace('-', "_");
    let mut adm = admin(&uri);
    adm.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let db_uri = crate::with_database(&uri, &db);
    // First open creates the tables.
    open(&db_uri, "a", json!({}))
        .unwrap()
        .set_state(br#"{"x":1}"#)
        .unwrap();
    let mut inside = admin(&db_uri);
    inside
        .batch_execute("UPDATE agent_state_schema SET version = 99")
        .unwrap();
    // Another URI string: another pool, which checks the schema again.
    let err = open(
        &with_param(&db_uri, "application_name=newer"),
        "a",
        json!({}),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Storage(m) if m.contains("schema version 99")),
        "{err}"
    );
    let version: i32 = inside
        .query_one("SELECT version FROM agent_state_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, 99);
    drop(inside);
    adm.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .unwrap();
}

#[test]
fn a_schema_1_database_is_upgraded_keeping_every_state_and_read_only_is_told_why() {
    let uri = server_or_skip!();
    let db = unique("schema1").replace('-', "_");
    let mut adm = admin(&uri);
    adm.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let db_uri = crate::with_database(&uri, &db);
    let mut inside = admin(&db_uri);
    // The tables as version 0.2 created them: no stamp column.
    inside
        .batch_execute(
            "CREATE TABLE agent_state_schema (singleton int PRIMARY KEY CHECK (singleton = 1),
                 version int NOT NULL);
             CREATE TABLE agent_state (agent text PRIMARY KEY, value text,
                 version bigint NOT NULL DEFAULT 0, change_log text);
             CREATE TABLE agent_changes (agent text NOT NULL, version bigint NOT NULL,
                 at_ms bigint NOT NULL, writer bigint NOT NULL, patch text, next text NOT NULL,
                 prev text, PRIMARY KEY (agent, version));
             INSERT INTO agent_state_schema VALUES (1, 1);
             INSERT INTO agent_state (agent, value, version) VALUES ('a', '{\"x\":1}', 3);",
        )
        .unwrap();
    let err = open(&db_uri, "a", json!({"read_only": true})).unwrap_err();
    assert!(
        matches!(&err, Error::Storage(m) if m.contains("schema version 1") && m.contains("read_only")),
        "{err}"
    );
    let a = open(&with_param(&db_uri, "application_name=up"), "a", json!({})).unwrap();
    let v = a.get_state_versioned().unwrap();
    assert_eq!((v.state.json(), v.version), (&br#"{"x":1}"#[..], 3));
    assert_eq!(
        a.set_state(br#"{"y":2}"#).unwrap().json(),
        br#"{"x":1,"y":2}"#
    );
    let version: i32 = inside
        .query_one("SELECT version FROM agent_state_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, agent_state::internals::POSTGRES_SCHEMA_VERSION);
    // Upgraded through schema 3: the agents are listed, with a time of last write.
    let listed = agent_state::list_agents(
        std::path::Path::new(&db_uri),
        &agent_state::OpenOptions::default(),
        &agent_state::AgentQuery {
            limit: 10,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].written_ms > 0, "{listed:?}");
    drop((a, inside));
    adm.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .unwrap();
}

#[test]
fn many_processes_worth_of_handles_create_the_tables_once() {
    let uri = server_or_skip!();
    let db = unique("create").replace('-', "_");
    let mut adm = admin(&uri);
    adm.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let db_uri = crate::with_database(&uri, &db);
    // Distinct URIs: distinct pools, each creating the tables as a new process would.
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let u = with_param(&db_uri, &format!("application_name=create{i}"));
            std::thread::spawn(move || {
                let a = open(&u, &format!("a{i}"), json!({})).unwrap();
                a.set_state(br#"{"ok":true}"#).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let n: i64 = admin(&db_uri)
        .query_one("SELECT count(*) FROM agent_state", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 8);
    adm.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .unwrap();
}

#[test]
fn a_corrupt_stored_state_fails_reads_and_merges_and_a_replace_repairs_it() {
    let uri = server_or_skip!();
    let id = unique("corrupt");
    let a = open(&uri, &id, json!({})).unwrap();
    a.set_state(br#"{"ok":1}"#).unwrap();
    // Behind the library's back; a handle notices a change by the version.
    admin(&uri)
        .execute(
            "UPDATE agent_state SET value = '{\"ok\":', version = version + 1 WHERE agent = $1",
            &[&id],
        )
        .unwrap();
    assert!(matches!(a.get_state(), Err(Error::Corrupt(_))));
    assert!(matches!(a.set_state(br#"{"x":1}"#), Err(Error::Corrupt(_))));
    let b = open(&uri, &id, json!({"change_log": {"keep_last": 5}})).unwrap();
    assert!(matches!(b.get_state(), Err(Error::Corrupt(_))));
    let v = a.replace_state_if(br#"{"fixed":true}"#, Some(2)).unwrap();
    assert_eq!(
        (v.version, text(&v.state)),
        (3, r#"{"fixed":true}"#.to_string())
    );
    assert_eq!(text(&b.get_state().unwrap()), r#"{"fixed":true}"#);
}

/// The database remembers the cap it was given (`store_max_value_bytes`), for every agent and
/// every handle opened later without its own; a database whose tables an older release created
/// (no `agent_settings` table) reads as having none, and gets the table when a cap is recorded.
/// In a database of its own: the cap is store-wide, and the other tests share theirs.
#[test]
fn the_database_remembers_its_cap() {
    let uri = server_or_skip!();
    let db = unique("cap").replace('-', "_");
    let mut adm = admin(&uri);
    adm.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let db_uri = crate::with_database(&uri, &db);
    let a = open(&db_uri, "a", json!({})).unwrap();
    assert_eq!(
        a.max_value_bytes(),
        agent_state::options::DEFAULT_MAX_VALUE_BYTES
    );
    // As an older release left it.
    admin(&db_uri)
        .batch_execute("DROP TABLE agent_settings")
        .unwrap();
    assert_eq!(
        open(&db_uri, "a", json!({})).unwrap().max_value_bytes(),
        agent_state::options::DEFAULT_MAX_VALUE_BYTES
    );
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(3_000_000));
    open(&db_uri, "a", json!({"store_max_value_bytes": 10_000_000}))
        .unwrap()
        .set_state(big.as_bytes())
        .unwrap();
    let b = open(&db_uri, "a", json!({})).unwrap();
    assert_eq!(b.max_value_bytes(), 10_000_000);
    assert_eq!(b.set_state(br#"{"small":1}"#).unwrap().len(), 3_000_021);
    assert_eq!(
        open(&db_uri, "another", json!({}))
            .unwrap()
            .max_value_bytes(),
        10_000_000
    );
    let c = open(&db_uri, "a", json!({"max_value_bytes": 1_000_000})).unwrap();
    match c.set_state(br#"{"small":2}"#) {
        Err(Error::TooLarge(m)) => assert!(
            m.contains("this handle's max_value_bytes (1000000)") && m.contains("already"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    drop((a, b, c));
    adm.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .unwrap();
}
