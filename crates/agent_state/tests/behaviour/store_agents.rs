//! A store's agents as a whole: listing (order, pages, prefixes, what an entry
//! says), deletion (what open handles see, their hooks and feed, versions that never go back,
//! compare-and-set), erasure from a SQLite file's bytes, and expiry. Both backends; races with
//! other processes are in `store_agents_race.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_state::{
    delete_agent, expire_agents, list_agents, AgentInfo, AgentQuery, Error, OpenOptions,
    StateChange, StateChangedHook,
};
use serde_json::json;

use test_support::{each_backend, open, opts, server_client, sqlite_only, text, Place, TempDir};

/// Where the store of `place` is, and the prefix of this test's agents in it (on PostgreSQL
/// the test's namespace; on SQLite the file is the test's own).
fn store_of(place: &Place) -> (PathBuf, String) {
    match place {
        Place::Sqlite { path, .. } => (path.clone(), String::new()),
        Place::Postgres { uri, agent } => (PathBuf::from(uri), format!("{agent}/")),
    }
}

fn no_options() -> OpenOptions {
    opts(json!({"busy_timeout_ms": 10_000}))
}

fn list(path: &Path, prefix: &str, after: Option<&str>, limit: usize) -> Vec<AgentInfo> {
    list_agents(
        path,
        &no_options(),
        &AgentQuery {
            prefix: Some(prefix.to_string()),
            after: after.map(str::to_string),
            limit,
        },
    )
    .unwrap()
}

fn ids(entries: &[AgentInfo], prefix: &str) -> Vec<String> {
    entries
        .iter()
        .map(|e| e.id.strip_prefix(prefix).unwrap().to_string())
        .collect()
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(u64, String, String, bool)>>,
}

impl StateChangedHook for Recorder {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.seen.lock().unwrap().push((
            c.version,
            text(&c.prev),
            text(&c.next),
            c.patch.is_some(),
        ));
        Ok(())
    }
}

#[each_backend]
fn a_listing_is_ordered_by_id_paged_and_filtered_by_prefix() {
    let dir = TempDir::new("list");
    let base = dir.store("s.db");
    let (path, ns) = store_of(&base);
    let names = ["b", "a", "c/1", "c/2", "c/10", "d", "é"];
    let mut before = i64::MAX;
    // The versions written (a first write's is 1 in a store where no agent was deleted; on
    // PostgreSQL other tests delete agents of the same database).
    let mut versions = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let a = open(&base.agent(name), &opts(json!({}))).unwrap();
        before = before.min(now());
        for n in 0..=i {
            let v = a
                .set_state_if(format!(r#"{{"n":{n}}}"#).as_bytes(), None)
                .unwrap();
            versions.push(v.version);
        }
    }
    // Opened, never written: not listed.
    let _empty = open(
        &base.agent("never"),
        &opts(json!({"change_log": {"keep_last": 5}})),
    )
    .unwrap();
    let all = list(&path, &ns, None, 100);
    assert_eq!(
        ids(&all, &ns),
        ["a", "b", "c/1", "c/10", "c/2", "d", "é"],
        "byte order of the ids"
    );
    let b = all
        .iter()
        .find(|e| e.id.ends_with("/b") || e.id == "b")
        .unwrap();
    assert_eq!(b.version, versions[0]);
    assert_eq!(b.bytes, r#"{"n":0}"#.len() as u64);
    let e = all.last().unwrap();
    assert_eq!(e.version, *versions.last().unwrap());
    assert_eq!(e.bytes, r#"{"n":6}"#.len() as u64);
    assert!(e.written_ms >= before && e.written_ms <= now(), "{e:?}");

    // Pages: after the last id of the previous one.
    let first = list(&path, &ns, None, 3);
    assert_eq!(ids(&first, &ns), ["a", "b", "c/1"]);
    let second = list(&path, &ns, Some(&first[2].id), 3);
    assert_eq!(ids(&second, &ns), ["c/10", "c/2", "d"]);
    let third = list(&path, &ns, Some(&second[2].id), 3);
    assert_eq!(ids(&third, &ns), ["é"]);
    assert!(list(&path, &ns, Some(&third[0].id), 3).is_empty());

    // A prefix, and a prefix with an `after`.
    let c = list(&path, &format!("{ns}c/"), None, 100);
    assert_eq!(ids(&c, &ns), ["c/1", "c/10", "c/2"]);
    let c = list(&path, &format!("{ns}c/"), Some(&format!("{ns}c/1")), 100);
    assert_eq!(ids(&c, &ns), ["c/10", "c/2"]);
    assert!(list(&path, &format!("{ns}zz"), None, 100).is_empty());

    // Bad queries.
    for limit in [0, 10_001] {
        let err = list_agents(
            &path,
            &no_options(),
            &AgentQuery {
                limit,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
}

#[test]
fn a_files_single_agent_is_listed_with_the_empty_id() {
    sqlite_only!("a SQLite file's single agent");
    let dir = TempDir::new("single");
    let path = dir.file("s.db");
    let single = agent_state::Agent::open_with(&path, &opts(json!({}))).unwrap();
    single.set_state(br#"{"single":true}"#).unwrap();
    let named = open(
        &Place::Sqlite {
            path: path.clone(),
            agent: Some("named".into()),
        },
        &opts(json!({})),
    )
    .unwrap();
    named.set_state(br#"{"named":true}"#).unwrap();
    let all = list_agents(
        &path,
        &no_options(),
        &AgentQuery {
            limit: 10,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        all.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["", "named"]
    );
    assert_eq!(
        delete_agent(&path, &no_options(), "", None).unwrap(),
        Some(1)
    );
    assert_eq!(text(&single.get_state().unwrap()), "{}");
    assert_eq!(text(&named.get_state().unwrap()), r#"{"named":true}"#);
    // No store, no listing (nor a new file).
    let missing = dir.file("missing.db");
    let err = list_agents(
        &missing,
        &no_options(),
        &AgentQuery {
            limit: 1,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert!(!missing.exists());
}

#[each_backend]
fn a_deleted_agent_reads_as_new_and_its_versions_never_come_back() {
    let dir = TempDir::new("delete");
    let base = dir.store("s.db");
    let (path, _) = store_of(&base);
    let place = base.agent("gone");
    let id = match &place {
        Place::Sqlite { agent, .. } => agent.clone().unwrap(),
        Place::Postgres { agent, .. } => agent.clone(),
    };
    let initial = json!({"initial_state": {"fresh": true}});
    let a = open(&place, &opts(initial.clone())).unwrap();
    let other = open(&base.agent("stays"), &opts(json!({}))).unwrap();
    other.set_state(br#"{"other":1}"#).unwrap();
    for n in 1..=3 {
        a.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()).unwrap();
    }
    let read_before = a.get_state_versioned().unwrap().version;

    // A version that is not the agent's: a conflict, nothing deleted.
    let err = delete_agent(&path, &no_options(), &id, Some(read_before - 1)).unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(a.get_state_versioned().unwrap().version, read_before);

    assert_eq!(
        delete_agent(&path, &no_options(), &id, Some(read_before)).unwrap(),
        Some(read_before)
    );
    // The open handle sees it gone at its next call: the initial state, at version 0.
    let v = a.get_state_versioned().unwrap();
    assert_eq!(
        (text(&v.state).as_str(), v.version),
        (r#"{"fresh":true}"#, 0)
    );
    assert_eq!(text(&other.get_state().unwrap()), r#"{"other":1}"#);
    // Deleting it again deletes nothing.
    assert_eq!(delete_agent(&path, &no_options(), &id, None).unwrap(), None);
    assert_eq!(
        delete_agent(&path, &no_options(), &id, Some(0)).unwrap(),
        None
    );

    // A compare-and-set against the version read before the deletion never succeeds, also
    // once the agent is written again, up to and past that version.
    let err = a
        .set_state_if(br#"{"stale":true}"#, Some(read_before))
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    let again = open(&place, &opts(json!({}))).unwrap();
    let first = again.set_state_if(br#"{"new":1}"#, Some(0)).unwrap();
    assert!(
        first.version > read_before,
        "a new incarnation continues above: {}",
        first.version
    );
    assert_eq!(text(&first.state), r#"{"new":1}"#, "nothing of before");
    for more in 0..3 {
        let err = a
            .set_state_if(br#"{"stale":true}"#, Some(read_before))
            .unwrap_err();
        assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
        again
            .set_state(format!(r#"{{"more":{more}}}"#).as_bytes())
            .unwrap();
    }
    // The handle from before follows the new incarnation.
    assert_eq!(a.get_state_versioned().unwrap().version, first.version + 3);
    assert!(list(&path, &id, None, 10).len() == 1);
}

#[each_backend]
fn hooks_and_the_feed_see_a_deletion_as_one_change_to_the_initial_state() {
    let dir = TempDir::new("delete_feed");
    let base = dir.store("s.db");
    let (path, _) = store_of(&base);
    let place = base.agent("watched");
    let id = match &place {
        Place::Sqlite { agent, .. } => agent.clone().unwrap(),
        Place::Postgres { agent, .. } => agent.clone(),
    };
    let log = json!({"change_log": {"keep_last": 100}, "initial_state": {"init": 1}});
    let writer = open(&place, &opts(log.clone())).unwrap();
    let watcher = open(&place, &opts(log.clone())).unwrap();
    let seen = Arc::new(Recorder::default());
    watcher.on_state_changed(seen.clone()).unwrap();
    writer.set_state(br#"{"a":1}"#).unwrap();
    writer.set_state(br#"{"b":2}"#).unwrap();
    assert_eq!(watcher.poll().unwrap(), 2);

    let v = writer.get_state_versioned().unwrap().version;
    assert_eq!(
        delete_agent(&path, &no_options(), &id, None).unwrap(),
        Some(v)
    );
    assert_eq!(watcher.poll().unwrap(), 1);
    assert_eq!(
        seen.seen.lock().unwrap().last().unwrap(),
        &(
            0,
            r#"{"init":1,"a":1,"b":2}"#.to_string(),
            r#"{"init":1}"#.to_string(),
            false
        )
    );
    assert_eq!(watcher.poll().unwrap(), 0, "delivered once");

    // Deleted and written again between two polls: the deletion, then the new first change
    // (whose prev is the writer's initial state).
    writer.set_state(br#"{"c":3}"#).unwrap();
    assert_eq!(watcher.poll().unwrap(), 1);
    let v = writer.get_state_versioned().unwrap().version;
    assert_eq!(
        delete_agent(&path, &no_options(), &id, Some(v)).unwrap(),
        Some(v)
    );
    writer.set_state(br#"{"d":4}"#).unwrap();
    assert_eq!(watcher.poll().unwrap(), 2);
    let seen = seen.seen.lock().unwrap();
    let n = seen.len();
    assert_eq!(
        seen[n - 2],
        (
            0,
            r#"{"init":1,"c":3}"#.to_string(),
            r#"{"init":1}"#.to_string(),
            false
        )
    );
    assert_eq!(seen[n - 1].1, r#"{"init":1}"#);
    assert_eq!(seen[n - 1].2, r#"{"init":1,"d":4}"#);
    assert!(seen[n - 1].0 > v);
    // The log setting stayed, and the log holds only the new incarnation.
    let changes: serde_json::Value =
        serde_json::from_slice(&watcher.changes_since(0).unwrap()).unwrap();
    let versions: Vec<u64> = changes
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [seen[n - 1].0]);
}

#[test]
fn a_deletion_leaves_no_byte_of_the_state_or_its_history_in_the_file() {
    sqlite_only!("the bytes of a SQLite file and its WAL");
    let dir = TempDir::new("erase");
    let path = dir.file("s.db");
    let place = Place::Sqlite {
        path: path.clone(),
        agent: Some("secret".into()),
    };
    let marker = "ERASE-ME-7f3a9c";
    let a = open(
        &place,
        &opts(json!({"change_log": {"keep_last": 1000}, "synchronous": "normal"})),
    )
    .unwrap();
    let other = open(
        &Place::Sqlite {
            path: path.clone(),
            agent: Some("other".into()),
        },
        &opts(json!({})),
    )
    .unwrap();
    // The marker in the state, in patches of the history and in states it replaced, large
    // enough for overflow pages; other agents written around it.
    let big = "x".repeat(6000);
    for n in 0..40 {
        a.set_state(format!(r#"{{"note":"{marker} {n}","big":"{big}{n}"}}"#).as_bytes())
            .unwrap();
        other
            .set_state(format!(r#"{{"n":{n}}}"#).as_bytes())
            .unwrap();
    }
    a.replace_state(format!(r#"{{"last":"{marker}"}}"#).as_bytes())
        .unwrap();
    assert!(
        found(&path, marker),
        "the marker is in the files before the deletion"
    );
    let v = a.get_state_versioned().unwrap().version;
    assert_eq!(
        delete_agent(&path, &no_options(), "secret", None).unwrap(),
        Some(v)
    );
    assert!(!found(&path, marker), "a byte of the deleted agent is left");
    // The other agent is intact, and the handles still work.
    assert_eq!(text(&other.get_state().unwrap()), r#"{"n":39}"#);
    other.set_state(br#"{"after":1}"#).unwrap();
    assert_eq!(text(&a.get_state().unwrap()), "{}");
}

/// Whether `marker` is in the store file or its WAL.
fn found(path: &Path, marker: &str) -> bool {
    let mut files = vec![path.to_path_buf()];
    files.push(PathBuf::from(format!("{}-wal", path.display())));
    files.iter().any(|f| {
        std::fs::read(f)
            .map(|bytes| bytes.windows(marker.len()).any(|w| w == marker.as_bytes()))
            .unwrap_or(false)
    })
}

/// Makes the agent at `place` look last written `days` ago (as a store would after that long).
fn age(place: &Place, days: i64) {
    let at = now() - days * 86_400_000;
    let grain = at - at.rem_euclid(60_000);
    const SQL: &str = "UPDATE agent_state SET written_ms = $1, written_grain = $2 WHERE agent = $3";
    match place {
        Place::Sqlite { path, agent } => {
            let n = rusqlite::Connection::open(path)
                .unwrap()
                .execute(
                    SQL,
                    rusqlite::params![at, grain, agent.as_deref().unwrap_or("")],
                )
                .unwrap();
            assert_eq!(n, 1);
        }
        Place::Postgres { uri, agent } => {
            let n = server_client(uri)
                .execute(SQL, &[&at, &grain, agent])
                .unwrap();
            assert_eq!(n, 1);
        }
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[each_backend]
fn expiry_deletes_the_idle_agents_in_bounded_batches_longest_idle_first() {
    let dir = TempDir::new("expire");
    let base = dir.store("s.db");
    let (path, ns) = store_of(&base);
    let idle = Duration::from_secs(30 * 86_400);
    // On PostgreSQL other tests' agents share the database: an agent of theirs aged past 30
    // days is impossible (only this test ages agents, in its own namespace).
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let place = base.agent(&format!("old{i}"));
            let a = open(&place, &opts(json!({}))).unwrap();
            a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
            age(&place, 40 + i as i64);
            a
        })
        .collect();
    let recent = open(&base.agent("recent"), &opts(json!({}))).unwrap();
    recent.set_state(br#"{"recent":true}"#).unwrap();

    let dry = expire_agents(&path, &no_options(), idle, 100, true).unwrap();
    let dry: Vec<_> = dry.into_iter().filter(|e| e.id.starts_with(&ns)).collect();
    assert_eq!(
        ids(&dry, &ns),
        ["old4", "old3", "old2", "old1", "old0"],
        "longest idle first"
    );
    assert_eq!(
        list(&path, &ns, None, 100).len(),
        6,
        "a dry run deletes nothing"
    );

    let first = expire_agents(&path, &no_options(), idle, 2, false).unwrap();
    assert_eq!(ids(&first, &ns), ["old4", "old3"]);
    let second = expire_agents(&path, &no_options(), idle, 2, false).unwrap();
    assert_eq!(ids(&second, &ns), ["old2", "old1"]);
    // Written again since it went idle: not idle any more.
    handles[0].set_state(br#"{"back":true}"#).unwrap();
    let third = expire_agents(&path, &no_options(), idle, 2, false).unwrap();
    assert!(third.iter().all(|e| !e.id.starts_with(&ns)), "{third:?}");
    assert_eq!(ids(&list(&path, &ns, None, 100), &ns), ["old0", "recent"]);
    assert_eq!(text(&handles[4].get_state().unwrap()), "{}");
    assert_eq!(
        text(&handles[0].get_state().unwrap()),
        r#"{"i":0,"back":true}"#
    );
}

#[each_backend]
fn history_can_be_bounded_by_age() {
    let dir = TempDir::new("history_age");
    let place = dir.store("s.db");
    let a = open(&place, &opts(json!({"change_log": {"keep_seconds": 3600}}))).unwrap();
    for n in 0..5 {
        a.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()).unwrap();
    }
    let changes: serde_json::Value = serde_json::from_slice(&a.changes_since(0).unwrap()).unwrap();
    assert_eq!(changes.as_array().unwrap().len(), 5, "all within the hour");
}

#[each_backend]
fn store_functions_refuse_bad_input_with_a_specific_error() {
    let dir = TempDir::new("bad");
    let base = dir.store("s.db");
    let (path, _) = store_of(&base);
    open(&base.agent("x"), &opts(json!({})))
        .unwrap()
        .set_state(b"{}")
        .unwrap();
    let long = "x".repeat(256);
    for err in [
        delete_agent(&path, &no_options(), &long, None).unwrap_err(),
        delete_agent(&path, &no_options(), "a\0b", None).unwrap_err(),
        expire_agents(&path, &no_options(), Duration::ZERO, 0, true).unwrap_err(),
    ] {
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
    let ro = opts(json!({"read_only": true}));
    let err = delete_agent(&path, &ro, "x", None).unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
}

#[each_backend]
fn a_fired_cancel_token_ends_a_store_call_before_it_begins() {
    let dir = TempDir::new("cancel");
    let base = dir.store("s.db");
    let (path, _) = store_of(&base);
    let place = base.agent("kept");
    let id = match &place {
        Place::Sqlite { agent, .. } => agent.clone().unwrap(),
        Place::Postgres { agent, .. } => agent.clone(),
    };
    let a = open(&place, &opts(json!({}))).unwrap();
    a.set_state(br#"{"kept":true}"#).unwrap();
    let fired = agent_state::Cancel::new();
    fired.cancel();
    let err = fired
        .scope(|| delete_agent(&path, &no_options(), &id, None))
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled(_)), "{err:?}");
    let err = fired
        .scope(|| expire_agents(&path, &no_options(), Duration::ZERO, 10, false))
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled(_)), "{err:?}");
    assert_eq!(
        text(&a.get_state().unwrap()),
        r#"{"kept":true}"#,
        "nothing deleted"
    );
}
