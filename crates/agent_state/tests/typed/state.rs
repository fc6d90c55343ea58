//! States through serde: typed reads, merges that skip or delete with `Option`, replacement,
//! `serde_json::Value`, read-modify-write, and the bytes stored.

use std::sync::Arc;

use agent_state::{Error, OpenOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use test_support::{each_backend, open, TempDir};

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone, Default)]
struct Job {
    id: String,
    step: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone, Default)]
struct State {
    status: String,
    job: Job,
}

/// A patch as Rust programs write one: every field optional.
#[derive(Serialize, Default)]
struct Patch {
    status: Option<String>,
    job: Option<JobPatch>,
}

#[derive(Serialize, Default)]
struct JobPatch {
    step: Option<u32>,
    /// None: leave it; Some(None): delete it (with merge); Some(Some(text)): set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<Option<String>>,
}

fn processing() -> State {
    State {
        status: "processing".into(),
        job: Job {
            id: "j1".into(),
            step: 2,
            note: Some("retrying".into()),
        },
    }
}

#[each_backend]
fn set_skips_none_and_merge_deletes_with_it() {
    let dir = TempDir::new("typed_option_rule");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    agent.replace(&processing()).unwrap();
    // set: the None fields (status, job.note) are left out; nothing is deleted.
    let v = agent
        .set(&Patch {
            job: Some(JobPatch {
                step: Some(3),
                note: Some(None),
            }),
            ..Patch::default()
        })
        .unwrap();
    let mut want = processing();
    want.job.step = 3;
    assert_eq!(v.get::<State>().unwrap(), want);
    assert_eq!(v.version, 2);
    // merge: Some(None) is a null, which deletes; a skipped field is untouched.
    let v = agent
        .merge(&json!({"job": JobPatch { step: None, note: Some(None) }}))
        .unwrap();
    // step: None is written as null by serde and deletes "step" with merge.
    assert_eq!(v.get::<Value>().unwrap()["job"], json!({"id": "j1"}));
    // The stored text is exactly the merge of the JSON the patches were.
    assert_eq!(
        agent.get_state().unwrap().json(),
        br#"{"status":"processing","job":{"id":"j1"}}"#
    );
}

#[each_backend]
fn typed_reads_writes_and_values_agree_with_the_json_api() {
    let dir = TempDir::new("typed_roundtrip");
    let place = dir.store("a");
    let agent = open(&place, &OpenOptions::default()).unwrap();
    let written = agent.replace(&processing()).unwrap();
    assert_eq!(written.version, 1);
    // The bytes are those the JSON form stores for the same members in the same order.
    assert_eq!(
        agent.get_state().unwrap().json(),
        br#"{"status":"processing","job":{"id":"j1","step":2,"note":"retrying"}}"#
    );
    assert_eq!(agent.get::<State>().unwrap(), processing());
    assert_eq!(
        agent.get_value().unwrap(),
        json!({"status": "processing", "job": {"id": "j1", "step": 2, "note": "retrying"}})
    );
    // A Value is one more Serialize.
    let v = agent.set(&json!({"status": "idle"})).unwrap();
    assert_eq!(v.get::<State>().unwrap().status, "idle");
    // Compare-and-set forms.
    let stale = agent.set_if(&json!({"status": "x"}), Some(1));
    assert!(matches!(
        stale,
        Err(Error::Conflict {
            expected: 1,
            actual: 2,
            ..
        })
    ));
    agent.replace_if(&processing(), Some(2)).unwrap();
    agent.merge_if(&json!({"status": "done"}), Some(3)).unwrap();
    assert_eq!(agent.get::<State>().unwrap().status, "done");
}

#[each_backend]
fn what_is_not_an_object_or_does_not_fit_is_refused_with_nothing_written() {
    let dir = TempDir::new("typed_refusals");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    agent.replace(&processing()).unwrap();
    for e in [
        agent.set(&[1, 2]).unwrap_err(),
        agent.merge(&"text").unwrap_err(),
        agent.replace(&Option::<u8>::None).unwrap_err(),
        agent
            .replace(&json!({"$date": "2026-11-30T03:06:44.123Z"}))
            .unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    }
    // A state read into a type it does not fit: the message says where.
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Other {
        status: u32,
    }
    let e = agent.get::<Other>().unwrap_err();
    match &e {
        Error::Serde(m) => assert!(m.contains("status") || m.contains("u32"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.kind(), agent_state::ErrorKind::Codec);
    assert_eq!(agent.get_state_versioned().unwrap().version, 1);
}

#[each_backend]
fn update_is_a_compare_and_set_that_loses_no_increment() {
    #[derive(Serialize, Deserialize, Default)]
    #[serde(default)]
    struct Counter {
        n: u64,
    }
    let dir = TempDir::new("typed_update");
    let place = dir.store("a");
    let agents: Vec<_> = (0..2)
        .map(|_| Arc::new(open(&place, &OpenOptions::default()).unwrap()))
        .collect();
    let threads: Vec<_> = agents
        .iter()
        .flat_map(|agent| (0..2).map(move |_| Arc::clone(agent)))
        .map(|agent| {
            std::thread::spawn(move || {
                for _ in 0..10 {
                    agent.update(|c: &mut Counter| c.n += 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(agents[0].get::<Counter>().unwrap().n, 40);
}
