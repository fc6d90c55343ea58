//! A watch's life: its callback form, add and remove, close waking a reader, the errors of bad
//! input, and its cost in threads (one per store, whatever the number of agents).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_state::{Error, OpenOptions, Selector, Watch, WatchEvent, WatchKind, WatchOptions};
use serde_json::json;
use test_support::{each_backend, own_process, TempDir};

use crate::{brief, connection, next, quiet, Store, PATIENCE};

#[each_backend]
fn close_wakes_a_waiting_reader_and_ends_the_iteration() {
    let store = Store::new("close");
    let w = Arc::new(store.watch_all(WatchOptions::default()));
    let reader = {
        let w = Arc::clone(&w);
        std::thread::spawn(move || w.next(None))
    };
    // The reader is waiting (or about to): closing wakes it either way.
    std::thread::sleep(Duration::from_millis(50));
    w.close();
    assert_eq!(reader.join().unwrap(), Err(Error::Closed));
    assert!(Iterator::next(&mut &*w).is_none(), "the iteration ends");
    w.close(); // idempotent
    assert!(w.ready_fd().is_some());
}

#[each_backend]
fn a_callback_watch_gets_each_event_on_the_watcher_thread() {
    let store = Store::new("callback");
    let a = store.agent("a", json!({}));
    let seen: Arc<Mutex<Vec<WatchEvent>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let w = Watch::with_callback(
        &store.location,
        &connection(),
        Selector::Ids(vec![store.id("a")]),
        WatchOptions::default(),
        Box::new(move |e| sink.lock().unwrap().push(e.clone())),
    )
    .unwrap();
    assert!(w.ready_fd().is_none());
    assert!(matches!(w.try_next(), Err(Error::InvalidArgument(_))));
    for n in 1..=3 {
        a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
    }
    let deadline = std::time::Instant::now() + PATIENCE;
    while seen.lock().unwrap().len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    w.close();
    let versions: Vec<u64> = seen.lock().unwrap().iter().map(|e| e.version).collect();
    assert_eq!(versions, [1, 2, 3]);
}

#[each_backend]
fn a_panicking_callback_ends_its_watch_with_an_error() {
    let store = Store::new("panic");
    let a = store.agent("a", json!({}));
    let w = Watch::with_callback(
        &store.location,
        &connection(),
        Selector::Ids(vec![store.id("a")]),
        WatchOptions::default(),
        Box::new(|_| panic!("the callback's own failure")),
    )
    .unwrap();
    a.set_state(br#"{"n": 1}"#).unwrap();
    let deadline = std::time::Instant::now() + PATIENCE;
    while w.error().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(matches!(w.error(), Some(Error::Hook(_))), "{:?}", w.error());
}

#[each_backend]
fn add_and_remove_change_what_an_id_watch_follows() {
    let store = Store::new("add");
    let a = store.agent("a", json!({}));
    let b = store.agent("b", json!({}));
    b.set_state(br#"{"n": 1}"#).unwrap();
    let w = store.watch_ids(&[], WatchOptions::default());
    a.set_state(br#"{"n": 1}"#).unwrap();
    assert!(quiet(&w), "nothing followed yet");
    w.add(&store.id("a"), None).unwrap();
    w.add(&store.id("b"), Some(0)).unwrap();
    // b from version 0: its first change, caught up from the log.
    let e = next(&w);
    assert_eq!(brief(&store, &e), ("b".into(), 1, WatchKind::Merge));
    a.set_state(br#"{"n": 2}"#).unwrap();
    assert_eq!(brief(&store, &next(&w)), ("a".into(), 2, WatchKind::Merge));
    w.remove(&store.id("a")).unwrap();
    a.set_state(br#"{"n": 3}"#).unwrap();
    assert!(quiet(&w), "a is no longer followed");
}

#[each_backend]
fn bad_input_is_refused_with_a_specific_error() {
    let store = Store::new("bad");
    let invalid = |r: agent_state::Result<Watch>| matches!(r, Err(Error::InvalidArgument(_)));
    let all = || Selector::Prefix(String::new());
    assert!(invalid(store.watch(
        Selector::Ids(vec!["a\0b".into()]),
        WatchOptions::default()
    )));
    assert!(invalid(store.watch(
        Selector::Prefix("x".repeat(300)),
        WatchOptions::default()
    )));
    assert!(invalid(
        store.watch(all(), WatchOptions::default().max_pending(0))
    ));
    let w = store.watch_all(WatchOptions::default());
    assert!(matches!(w.add("a", None), Err(Error::InvalidArgument(_))));
    assert!(matches!(w.remove("a"), Err(Error::InvalidArgument(_))));
    let options = OpenOptions::default();
    let memory = Watch::open(
        ":memory:".as_ref(),
        &options,
        all(),
        WatchOptions::default(),
    );
    assert!(invalid(memory));
    let dir = TempDir::new("watch_nothing");
    let missing = Watch::open(
        &dir.file("none.db"),
        &options,
        all(),
        WatchOptions::default(),
    );
    assert!(matches!(missing, Err(Error::Storage(_))), "{missing:?}");
    assert!(
        !dir.file("none.db").exists(),
        "watching never creates a store"
    );
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// One watcher thread per store, whatever the number of agents watched.
#[own_process]
fn the_watcher_threads_do_not_grow_with_the_agents_watched() {
    let store = Store::new("threads");
    for i in 0..1000 {
        store
            .agent(&format!("a{i}"), json!({"synchronous": "normal"}))
            .set_state(br#"{"n": 1}"#)
            .unwrap();
    }
    let before = threads();
    let one = store.watch_ids(&["a0"], WatchOptions::default());
    let with_one = threads();
    let names: Vec<String> = (0..1000).map(|i| format!("a{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let many = store.watch_ids(&names, WatchOptions::default());
    let all = store.watch_all(WatchOptions::default());
    assert_eq!(with_one, before + 1, "one watcher thread for the store");
    assert_eq!(threads(), with_one, "no thread per agent or per watch");
    store
        .agent("a999", json!({}))
        .set_state(br#"{"n": 2}"#)
        .unwrap();
    assert_eq!(next(&many).version, 2);
    assert_eq!(next(&all).version, 2);
    drop((one, many, all));
    let deadline = std::time::Instant::now() + PATIENCE;
    while threads() > before && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        threads(),
        before,
        "the watcher ends with the store's last watch"
    );
}

/// On SQLite, writers tell watchers through a ring in shared memory next to the store, private
/// to its owner like the store itself.
#[test]
fn the_watch_ring_is_a_private_file_beside_the_store() {
    use std::os::unix::fs::PermissionsExt;
    let store = Store::new("ring");
    let ring = std::path::PathBuf::from(format!("{}-watch", store.location.display()));
    let mode = std::fs::metadata(&ring).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let w = store.watch_all(WatchOptions::default());
    store
        .agent("a", json!({}))
        .set_state(br#"{"n": 1}"#)
        .unwrap();
    assert_eq!(next(&w).version, 1);
}

/// The watcher's idle cost with 10,000 agents watched: the process's CPU time over 20 s while
/// nothing is committed (a measurement, run by hand: `cargo test --release -p agent_state
/// --test watch idle_cost -- --ignored --nocapture`).
#[test]
#[ignore]
fn idle_cost_with_ten_thousand_agents_watched() {
    fn cpu_ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
    let store = Store::new("idle");
    let a = store.agent("seed", json!({"synchronous": "normal"}));
    drop(a);
    let names: Vec<String> = (0..10_000).map(|i| format!("a{i}")).collect();
    for chunk in names.chunks(500) {
        for name in chunk {
            store
                .agent(name, json!({"synchronous": "normal"}))
                .set_state(br#"{"n": 1}"#)
                .unwrap();
        }
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let ids = store.watch_ids(&refs, WatchOptions::default());
    let all = store.watch_all(WatchOptions::default());
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks();
    std::thread::sleep(Duration::from_secs(20));
    let used = cpu_ticks() - before;
    // Clock ticks are 1/100 s: the share of one core is ticks / (20 s * 100).
    println!(
        "idle: {used} ticks in 20 s = {:.2}% of a core",
        used as f64 / 20.0
    );
    drop((ids, all));
}
