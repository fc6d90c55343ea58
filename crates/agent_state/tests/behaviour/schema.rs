//! Schema evolution: a state stored under an older schema version is upgraded on first touch,
//! once, as a change of its own; a newer one is refused; steps that fail leave the state as it
//! was. On either backend (`#[each_backend]`, crates/test-support).

use std::sync::{Arc, Barrier, Mutex};

use agent_state::{
    Agent, ChangeKind, Error, ErrorKind, OpenOptions, SchemaStep, Snapshot, StateChange,
    StateChangedHook, Validator,
};
use serde_json::{json, Value};

use test_support::{each_backend, open, opts, text, TempDir};

/// The options of the second version of a program: `messages` added, `nick` renamed `name`.
fn v2_options() -> OpenOptions {
    opts(json!({
        "schema_version": 2,
        "schema_steps": [
            {"from": 0, "ops": [{"op": "default", "path": "/messages", "value": []}]},
            {"from": 1, "ops": [{"op": "rename", "path": "/user/nick", "to": "name"}]}
        ],
        "change_log": {"keep_last": 100}
    }))
}

fn value(state: &Snapshot) -> Value {
    serde_json::from_slice(state.json()).unwrap()
}

/// Every change a handle's hooks see: kind, schema, version.
#[derive(Default)]
struct Kinds(Mutex<Vec<(ChangeKind, u32, u64)>>);

impl StateChangedHook for Kinds {
    fn on_state_changed(&self, change: &StateChange) -> Result<(), String> {
        self.0
            .lock()
            .unwrap()
            .push((change.kind, change.schema, change.version));
        Ok(())
    }
}

#[each_backend]
fn an_older_state_is_upgraded_on_first_read_once_as_a_migration() {
    let dir = TempDir::new("schema-read");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"status":"idle","user":{"nick":"ada"}}"#)
        .unwrap();
    assert_eq!(v1.get_state_versioned().unwrap().version, 1);
    v1.close().unwrap();

    let v2 = open(&store, &v2_options()).unwrap();
    let kinds = Arc::new(Kinds::default());
    v2.on_state_changed(kinds.clone()).unwrap();
    let read = v2.get_state_versioned().unwrap();
    assert_eq!(
        value(&read.state),
        json!({"status": "idle", "user": {"name": "ada"}, "messages": []})
    );
    assert_eq!(read.version, 2, "the migration is a change of its own");
    assert_eq!(
        *kinds.0.lock().unwrap(),
        vec![(ChangeKind::Migration { from: 0 }, 2, 2)]
    );
    // Read again, by this handle and a new one: nothing more to do.
    assert_eq!(v2.get_state_versioned().unwrap().version, 2);
    let again = open(&store, &v2_options()).unwrap();
    assert_eq!(again.get_state_versioned().unwrap().version, 2);
    assert_eq!(kinds.0.lock().unwrap().len(), 1);

    // The log records it as its own kind of entry, with the schema versions.
    let log: Value = serde_json::from_slice(&v2.changes_since(1).unwrap()).unwrap();
    assert_eq!(log[0]["version"], 2);
    assert_eq!(log[0]["schema"], 2);
    assert_eq!(log[0]["migrated_from"], 0);
    assert_eq!(log[0]["patch"], Value::Null);
}

#[each_backend]
fn a_write_to_an_older_state_migrates_it_first_then_writes() {
    let dir = TempDir::new("schema-write");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"user":{"nick":"ada"}}"#).unwrap();
    let v2 = open(&store, &v2_options()).unwrap();
    let kinds = Arc::new(Kinds::default());
    v2.on_state_changed(kinds.clone()).unwrap();
    // Written without a read first: the patch is of the new shape, and lands on it.
    let written = v2.set_state_if(br#"{"messages":["hi"]}"#, None).unwrap();
    assert_eq!(
        value(&written.state),
        json!({"user": {"name": "ada"}, "messages": ["hi"]})
    );
    assert_eq!(written.version, 3);
    assert_eq!(
        *kinds.0.lock().unwrap(),
        vec![
            (ChangeKind::Migration { from: 0 }, 2, 2),
            (ChangeKind::Merge, 2, 3)
        ]
    );
    // A compare-and-set at the version read before the migration conflicts: the state
    // changed shape under it.
    assert!(matches!(
        v2.set_state_if(br#"{"x":1}"#, Some(1)),
        Err(Error::Conflict { .. })
    ));
}

#[each_backend]
fn an_older_program_is_refused_a_newer_state_and_writes_nothing() {
    let dir = TempDir::new("schema-newer");
    let store = dir.store("a.db");
    let v2 = open(&store, &v2_options()).unwrap();
    v2.set_state(br#"{"messages":[]}"#).unwrap();
    let v1 = open(&store, &opts(json!({"schema_version": 1}))).unwrap();
    for result in [
        v1.get_state().map(drop),
        v1.set_state(br#"{"x":1}"#).map(drop),
        v1.replace_state(br#"{"x":1}"#).map(drop),
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NewerSchema, "{err}");
        assert!(
            matches!(
                err,
                Error::NewerSchema {
                    stored: 2,
                    declared: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("schema version 2"), "{err}");
    }
    assert_eq!(
        v2.get_state_versioned().unwrap().version,
        1,
        "nothing written"
    );
    // Read-only, it reads the state as stored.
    let reader = open(
        &store,
        &opts(json!({"schema_version": 1, "read_only": true})),
    )
    .unwrap();
    assert_eq!(text(&reader.get_state().unwrap()), r#"{"messages":[]}"#);
}

#[each_backend]
fn a_read_only_handle_reads_an_older_state_as_stored() {
    let dir = TempDir::new("schema-ro");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"user":{"nick":"ada"}}"#).unwrap();
    let mut options = v2_options();
    options.read_only = true;
    options.change_log = None;
    let reader = open(&store, &options).unwrap();
    assert_eq!(
        text(&reader.get_state().unwrap()),
        r#"{"user":{"nick":"ada"}}"#
    );
    assert_eq!(
        v1.get_state_versioned().unwrap().version,
        1,
        "nothing written"
    );
}

#[each_backend]
fn two_handles_that_find_the_same_old_state_migrate_it_once() {
    const HANDLES: usize = 4;
    let dir = TempDir::new("schema-race");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"user":{"nick":"ada"}}"#).unwrap();
    let barrier = Arc::new(Barrier::new(HANDLES));
    let threads: Vec<_> = (0..HANDLES)
        .map(|_| {
            let (store, barrier) = (store.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut options = v2_options();
                options.busy_timeout_ms = 60_000;
                let a = open(&store, &options).unwrap();
                barrier.wait();
                let v = a.get_state_versioned().unwrap();
                (v.version, text(&v.state))
            })
        })
        .collect();
    for t in threads {
        let (version, state) = t.join().unwrap();
        assert_eq!(version, 2, "one migration, whoever made it");
        assert_eq!(state, r#"{"user":{"name":"ada"},"messages":[]}"#);
    }
    let log: Value = serde_json::from_slice(
        &open(&store, &v2_options())
            .unwrap()
            .changes_since(1)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(log.as_array().unwrap().len(), 1, "{log}");
}

/// A step of code that fails on a state without `user`.
struct NeedsUser;

impl SchemaStep for NeedsUser {
    fn upgrade(&self, from: u32, state: &Snapshot) -> Result<Vec<u8>, String> {
        let mut v: Value = serde_json::from_slice(state.json()).unwrap();
        let user = v.get("user").cloned().ok_or("no user to upgrade")?;
        v["owner"] = user;
        v["upgraded_from"] = json!(from);
        Ok(serde_json::to_vec(&v).unwrap())
    }
}

#[each_backend]
fn steps_of_code_run_and_a_failing_step_leaves_the_state_as_it_was() {
    let dir = TempDir::new("schema-code");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"status":"idle"}"#).unwrap();

    let v1_to_2 = open(&store, &opts(json!({"schema_version": 1}))).unwrap();
    v1_to_2
        .set_schema_step(0, Some(Arc::new(NeedsUser)))
        .unwrap();
    let err = v1_to_2.get_state().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Migration, "{err}");
    assert!(matches!(err, Error::Migration { from: 0, .. }), "{err:?}");
    assert!(
        err.to_string().contains("schema step 0 -> 1") && err.to_string().contains("no user"),
        "{err}"
    );
    let err = v1_to_2.set_state(br#"{"a":1}"#).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Migration, "{err}");
    let stored = v1.get_state_versioned().unwrap();
    assert_eq!(
        (stored.version, text(&stored.state)),
        (1, r#"{"status":"idle"}"#.into())
    );

    v1.set_state(br#"{"user":"ada"}"#).unwrap();
    let upgraded = v1_to_2.get_state_versioned().unwrap();
    assert_eq!(
        value(&upgraded.state),
        json!({"status": "idle", "user": "ada", "owner": "ada", "upgraded_from": 0})
    );
    assert_eq!(upgraded.version, 3);
}

#[each_backend]
fn a_missing_step_a_conflicting_step_and_a_rejected_result_fail_the_migration() {
    let dir = TempDir::new("schema-fail");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"user":{"nick":"ada","name":"Ada"}}"#)
        .unwrap();

    // Version 0 -> 1 has no step.
    let missing = open(&store, &opts(json!({"schema_version": 1}))).unwrap();
    let err = missing.get_state().unwrap_err();
    assert!(matches!(err, Error::Migration { from: 0, .. }), "{err:?}");
    assert!(err.to_string().contains("no step is given"), "{err}");

    // The rename finds its new name taken: the data is ambiguous, the migration fails closed.
    let conflicting = open(&store, &v2_options()).unwrap();
    let err = conflicting.get_state().unwrap_err();
    assert!(matches!(err, Error::Migration { from: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("schema step 1 -> 2"), "{err}");

    // The validator sees the upgraded state and may refuse it.
    struct NoEmptyMessages;
    impl Validator for NoEmptyMessages {
        fn validate(&self, change: &StateChange) -> Result<(), String> {
            assert_eq!(change.kind, ChangeKind::Migration { from: 0 });
            Err("messages must not be empty".into())
        }
    }
    let one = opts(json!({
        "schema_version": 1,
        "schema_steps": [{"from": 0, "ops": [{"op": "default", "path": "/messages", "value": []}]}]
    }));
    let gated = open(&store, &one).unwrap();
    gated
        .set_validator(Some(Arc::new(NoEmptyMessages)))
        .unwrap();
    let err = gated.get_state().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Migration, "{err}");
    assert!(
        err.to_string().contains("messages must not be empty"),
        "{err}"
    );

    let stored = v1.get_state_versioned().unwrap();
    assert_eq!(stored.version, 1, "nothing written by any of them");
}

#[each_backend]
fn history_reads_as_stored_or_upgraded_and_restore_upgrades() {
    let dir = TempDir::new("schema-history");
    let store = dir.store("a.db");
    let v1 = open(&store, &opts(json!({"change_log": {"keep_last": 100}}))).unwrap();
    v1.set_state(br#"{"user":{"nick":"ada"}}"#).unwrap();
    let v2 = open(&store, &v2_options()).unwrap();
    v2.set_state(br#"{"messages":["hi"]}"#).unwrap(); // version 2: migration, 3: the write

    let (old, schema) = v2.state_at_stored(1).unwrap();
    assert_eq!(
        (text(&old), schema),
        (r#"{"user":{"nick":"ada"}}"#.into(), 0)
    );
    assert_eq!(
        value(&v2.state_at_upgraded(1).unwrap()),
        json!({"user": {"name": "ada"}, "messages": []})
    );
    assert_eq!(
        value(&v2.upgrade_state(old.json(), 0).unwrap()),
        json!({"user": {"name": "ada"}, "messages": []})
    );
    let log: Value = serde_json::from_slice(&v2.changes_since(0).unwrap()).unwrap();
    let schemas: Vec<(u64, u64)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["version"].as_u64().unwrap(),
                c["schema"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(schemas, vec![(1, 0), (2, 2), (3, 2)]);

    // Restoring version 1 writes it back upgraded, never in its old shape.
    let restored = v2.restore(1).unwrap();
    assert_eq!(
        value(&restored.state),
        json!({"user": {"name": "ada"}, "messages": []})
    );
    assert_eq!(v2.state_at_stored(restored.version).unwrap().1, 2);
    // A newer state is not upgraded down.
    let err = open(&store, &opts(json!({"schema_version": 1})))
        .unwrap()
        .upgrade_state(br#"{}"#, 2)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NewerSchema);
}

#[each_backend]
fn steps_are_checked_when_given() {
    let dir = TempDir::new("schema-args");
    let store = dir.store("a.db");
    let err = OpenOptions::from_json(
        br#"{"schema_version": 1, "schema_steps": [{"from": 1, "ops": []}]}"#,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = OpenOptions::from_json(
        br#"{"schema_version": 1, "schema_steps": [{"from": 0, "ops": [{"op": "frob"}]}]}"#,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let a = open(&store, &v2_options()).unwrap();
    assert_eq!(a.schema_version(), 2);
    let err = a.set_schema_step(2, Some(Arc::new(NeedsUser))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = a.set_schema_step(0, Some(Arc::new(NeedsUser))).unwrap_err();
    assert!(
        err.to_string().contains("already give a declarative step"),
        "{err}"
    );
}

/// A program that declares no schema version keeps working as before: it writes version 0,
/// and reads what it wrote.
#[each_backend]
fn a_program_without_a_schema_version_is_unchanged() {
    let dir = TempDir::new("schema-none");
    let store = dir.store("a.db");
    let a: Agent = open(&store, &OpenOptions::default()).unwrap();
    a.set_state(br#"{"a":1}"#).unwrap();
    assert_eq!(a.get_state_versioned().unwrap().version, 1);
    assert_eq!(a.state_at_stored(1).unwrap().1, 0);
}

/// A compare-and-set that cannot hold fails before anything is committed: an older state is
/// not migrated by a write that is refused anyway.
#[each_backend]
fn a_failing_compare_and_set_does_not_migrate() {
    let dir = TempDir::new("schema-cas");
    let store = dir.store("a.db");
    let v1 = open(&store, &OpenOptions::default()).unwrap();
    v1.set_state(br#"{"user":{"nick":"ada"}}"#).unwrap();
    let v2 = open(&store, &v2_options()).unwrap();
    let err = v2.set_state_if(br#"{"x":1}"#, Some(7)).unwrap_err();
    assert!(matches!(err, Error::Conflict { actual: 1, .. }), "{err:?}");
    assert_eq!(v1.state_at_stored(1).unwrap().1, 0, "not migrated");
    assert_eq!(v1.get_state_versioned().unwrap().version, 1);
    // At the stored version of the older state: it is migrated first, which moves the version
    // the caller expected (a version read in the old shape no longer describes the state).
    let written = v2.set_state_if(br#"{"x":1}"#, Some(1));
    assert!(
        matches!(written, Err(Error::Conflict { actual: 2, .. })),
        "{written:?}"
    );
}
