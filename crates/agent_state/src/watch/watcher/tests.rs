//! The watcher's turns on a watch it sees before the watch's start was applied: `attach` adds
//! the watch to the store's list before `Watch::open` asks for its start, so a turn can find it
//! there with nothing read yet. Such a watch must be left alone until its start says where each
//! agent begins; taken for a watch of new agents, it would deliver every change committed
//! before it opened (seen once on a loaded machine, through a pooler's frequent rescans).

use std::sync::Arc;
use std::time::Instant;

use super::{Store, Watcher};
use crate::backends;
use crate::store::{id_hash, Notice};
use crate::watch::queue::Queue;
use crate::watch::shared::{Request, Shared, Sink};
use crate::watch::types::Selector;
use crate::{Agent, OpenOptions};

/// A SQLite store in a directory of its own, its agent `a` at version 1 with the change log
/// on; removed when dropped.
struct Stored {
    dir: std::path::PathBuf,
    agent: Agent,
}

impl Stored {
    fn new() -> Stored {
        let dir = std::env::temp_dir().join(format!(
            "agent_state_unit_watcher_{}_{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let options =
            OpenOptions::from_json(br#"{"agent_id": "a", "change_log": {"keep_last": 10}}"#)
                .unwrap();
        let agent = Agent::open_with(dir.join("w.db"), &options).unwrap();
        agent.set_state(br#"{"n": 1}"#).unwrap();
        Stored { dir, agent }
    }
}

impl Drop for Stored {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn queued(w: &Shared) -> Vec<(String, u64)> {
    let Sink::Queue(queue) = &w.sink else {
        unreachable!("a queue watch")
    };
    let mut events = Vec::new();
    while let Some(e) = queue.take(Some(Instant::now())).unwrap() {
        events.push((e.agent_id.clone(), e.version));
    }
    events
}

#[test]
fn a_watch_seen_before_its_start_is_neither_rescanned_nor_caught_up_until_it_starts() {
    let stored = Stored::new();
    let path = stored.dir.join("w.db");
    let options = OpenOptions::default().store_options();
    let w = Arc::new(Shared::new(
        Selector::Ids(vec!["a".to_string()]),
        Sink::Queue(Queue::new(16).unwrap()),
        false,
        std::time::Duration::from_secs(30),
        crate::work::fork_generation(),
    ));
    let mut watcher = Watcher {
        store: Arc::new(Store {
            key: path.to_string_lossy().into_owned(),
            generation: crate::work::fork_generation(),
            watches: std::sync::Mutex::new(vec![Arc::clone(&w)]),
            asked: std::sync::atomic::AtomicBool::new(false),
        }),
        path: path.clone(),
        options: options.clone(),
        signal: backends::open_signal(&path, &options, None).unwrap(),
        reads: backends::open_watch_reads(&path, &options).unwrap(),
        handles: Default::default(),
        used: 0,
    };

    // Attached, its start not asked yet: a rescan and a notice of its agent deliver nothing.
    watcher.rescan(&w).unwrap();
    let notice = Notice {
        id: None,
        id_hash: id_hash("a"),
        version: 1,
    };
    watcher.notified(&w, std::slice::from_ref(&notice)).unwrap();
    assert_eq!(
        queued(&w),
        vec![],
        "version 1 was committed before the opening"
    );

    // Started: it follows `a` from version 1, so the next change is the first delivered.
    w.following()
        .requests
        .push_back((1, Request::Start(Default::default())));
    watcher.apply_requests(&w).unwrap();
    stored.agent.set_state(br#"{"n": 2}"#).unwrap();
    watcher.rescan(&w).unwrap();
    assert_eq!(queued(&w), vec![("a".to_string(), 2)]);
}
