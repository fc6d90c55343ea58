//! What a watch delivers: the changes of the agents it follows (by id, by prefix, including
//! agents created after it began), each kind with its patch and state as documented, in commit
//! order per agent, none twice, none missed under concurrent writers.

use std::collections::HashMap;
use std::sync::Arc;

use agent_state::value::{accept, operations};
use agent_state::{Selector, Snapshot, WatchKind, WatchOptions};
use serde_json::json;
use test_support::each_backend;

use crate::{brief, next, quiet, value, Store};

#[each_backend]
fn an_id_watch_delivers_each_kind_of_change_of_its_agents_only() {
    let store = Store::new("kinds");
    let a = store.agent("a", json!({}));
    let b = store.agent("b", json!({}));
    let w = store.watch_ids(&["a"], WatchOptions::default());
    a.set_state(br#"{"n": 1}"#).unwrap();
    b.set_state(br#"{"n": 1}"#).unwrap();
    a.set_state(br#"{"m": 2}"#).unwrap();
    a.patch_state(br#"[{"op": "add", "path": "/k", "value": 3}]"#)
        .unwrap();
    a.replace_state(br#"{"r": true}"#).unwrap();

    // The first change carries the state (its predecessor is the writer's initial state).
    let first = next(&w);
    assert_eq!(brief(&store, &first), ("a".into(), 1, WatchKind::Merge));
    assert_eq!(value(&first.patch), json!({"n": 1}));
    assert_eq!(value(&first.state), json!({"n": 1}));
    assert!(first.at_ms > 0);
    let merge = next(&w);
    assert_eq!(brief(&store, &merge), ("a".into(), 2, WatchKind::Merge));
    assert_eq!(value(&merge.patch), json!({"m": 2}));
    assert!(
        merge.state.is_none(),
        "a later merge carries its patch only"
    );
    let patch = next(&w);
    assert_eq!(brief(&store, &patch), ("a".into(), 3, WatchKind::JsonPatch));
    assert_eq!(
        value(&patch.patch),
        json!([{"op": "add", "path": "/k", "value": 3}])
    );
    let replace = next(&w);
    assert_eq!(brief(&store, &replace), ("a".into(), 4, WatchKind::Replace));
    assert!(replace.patch.is_none());
    assert_eq!(value(&replace.state), json!({"r": true}));
    assert_eq!(WatchKind::Replace.name(), "replace");
    assert!(quiet(&w), "agent b is not watched");
}

#[each_backend]
fn a_prefix_watch_follows_agents_created_after_it_began() {
    let store = Store::new("prefix");
    let old = store.agent("team/old", json!({}));
    old.set_state(br#"{"v": 0}"#).unwrap();
    let w = store
        .watch(Selector::Prefix(store.id("team/")), WatchOptions::default())
        .unwrap();
    // Changes before the watch began are not delivered; later ones are.
    old.set_state(br#"{"v": 1}"#).unwrap();
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("team/old".into(), 2, WatchKind::Merge));
    let new = store.agent("team/new", json!({}));
    new.set_state(br#"{"hello": "world"}"#).unwrap();
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("team/new".into(), 1, WatchKind::Merge));
    assert_eq!(value(&e.state), json!({"hello": "world"}));
    store
        .agent("other", json!({}))
        .set_state(br#"{"x": 1}"#)
        .unwrap();
    assert!(quiet(&w), "an agent outside the prefix is not delivered");
}

#[each_backend]
fn with_states_every_event_carries_the_state_after_it() {
    let store = Store::new("states");
    let a = store.agent("a", json!({}));
    a.set_state(br#"{"n": 1}"#).unwrap();
    let w = store.watch_ids(&["a"], WatchOptions::default().states(true));
    a.set_state(br#"{"m": 2}"#).unwrap();
    a.set_state(br#"{"n": null}"#).unwrap();
    assert_eq!(value(&next(&w).state), json!({"n": 1, "m": 2}));
    assert_eq!(value(&next(&w).state), json!({"m": 2}));
}

/// Applies an event to a copy kept from the events, with the crate's own functions.
fn apply(copies: &mut HashMap<String, Arc<Snapshot>>, e: &agent_state::WatchEvent) {
    match (&e.state, &e.patch) {
        (Some(state), _) => {
            let snap = accept::stored(state.as_bytes()).unwrap();
            copies.insert(e.agent_id.clone(), Arc::new(snap));
        }
        (None, Some(patch)) => {
            let copy = copies.get(&e.agent_id).expect("a patch after a state");
            let patch = operations::stored(patch.as_bytes()).unwrap();
            let next = copy.apply(&patch, usize::MAX).unwrap();
            copies.insert(e.agent_id.clone(), Arc::new(next));
        }
        (None, None) => {
            assert_eq!(e.kind, WatchKind::Deleted);
            copies.remove(&e.agent_id);
        }
    }
}

#[each_backend]
fn concurrent_writers_to_many_agents_are_delivered_in_order_none_twice_none_missed() {
    const AGENTS: usize = 12;
    const WRITERS: usize = 3;
    const WRITES: usize = 20;
    let store = Arc::new(Store::new("many"));
    let w = store.watch_all(WatchOptions::default());
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let agents: Vec<_> = (0..AGENTS)
                    .map(|i| store.agent(&format!("agent{i}"), json!({})))
                    .collect();
                for n in 0..WRITES {
                    for (i, a) in agents.iter().enumerate() {
                        if (i + n + t) % 3 == 0 {
                            a.patch_state(
                                format!(r#"[{{"op": "add", "path": "/p{t}", "value": {n}}}]"#)
                                    .as_bytes(),
                            )
                            .unwrap();
                        } else {
                            a.set_state(format!(r#"{{"w{t}": {n}}}"#).as_bytes())
                                .unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for t in writers {
        t.join().unwrap();
    }
    let total = WRITERS * WRITES * AGENTS;
    let mut copies = HashMap::new();
    let mut last: HashMap<String, u64> = HashMap::new();
    for _ in 0..total {
        let e = next(&w);
        assert_ne!(e.kind, WatchKind::Resync, "nothing was missed: {e:?}");
        let before = last.insert(e.agent_id.clone(), e.version).unwrap_or(0);
        assert_eq!(e.version, before + 1, "in commit order, none twice: {e:?}");
        apply(&mut copies, &e);
    }
    assert!(quiet(&w), "nothing beyond the writes");
    for i in 0..AGENTS {
        let name = format!("agent{i}");
        let stored = store.agent(&name, json!({})).get_state_versioned().unwrap();
        assert_eq!(stored.version, (WRITERS * WRITES) as u64);
        let copy = &copies[&store.id(&name)];
        assert_eq!(
            copy.json(),
            stored.state.json(),
            "the copy kept from the events"
        );
    }
}
