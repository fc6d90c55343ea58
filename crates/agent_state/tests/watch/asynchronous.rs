//! A watch read from async code (`Watch::recv`, `Watch::poll_recv`): each change awaited
//! without a thread waiting, a waiting task woken by a change and by the close, cancel-safe,
//! several tasks on one watch.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use agent_state::{Error, WatchKind, WatchOptions};
use serde_json::json;
use test_support::each_backend;

use crate::{brief, Store, PATIENCE};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits (without an executor) until `wakes` was woken once more than `before`.
fn woken(wakes: &Wakes, before: usize) {
    let deadline = Instant::now() + PATIENCE;
    while wakes.0.load(Ordering::SeqCst) == before {
        assert!(Instant::now() < deadline, "never woken");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[each_backend]
fn recv_awaits_each_change_in_order() {
    let store = Store::new("recv");
    let a = store.agent("a", json!({}));
    let w = Arc::new(store.watch_ids(&["a"], WatchOptions::default()));
    runtime().block_on(async {
        let reader = {
            let w = Arc::clone(&w);
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while seen.len() < 3 {
                    let e = w.recv().await.expect("open").unwrap();
                    seen.push((e.version, e.kind));
                }
                seen
            })
        };
        for n in 1..=3 {
            a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
        }
        let seen = tokio::time::timeout(PATIENCE, reader).await.unwrap();
        let merge = WatchKind::Merge;
        assert_eq!(seen.unwrap(), [(1, merge), (2, merge), (3, merge)]);
    });
}

#[each_backend]
fn a_waiting_recv_is_woken_by_a_change_and_by_the_close() {
    let store = Store::new("recv_wake");
    let a = store.agent("a", json!({}));
    let w = store.watch_ids(&["a"], WatchOptions::default());
    let wakes = Arc::new(Wakes::default());
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    assert!(w.poll_recv(&mut cx).is_pending(), "nothing committed yet");
    a.set_state(br#"{"n": 1}"#).unwrap();
    woken(&wakes, 0);
    let Poll::Ready(Some(Ok(e))) = w.poll_recv(&mut cx) else {
        panic!("woken for an event")
    };
    assert_eq!(brief(&store, &e), ("a".into(), 1, WatchKind::Merge));
    assert!(w.poll_recv(&mut cx).is_pending());
    let before = wakes.0.load(Ordering::SeqCst);
    w.close();
    woken(&wakes, before);
    assert!(matches!(w.poll_recv(&mut cx), Poll::Ready(None)), "closed");
}

#[each_backend]
fn a_recv_dropped_before_it_completes_takes_no_event() {
    let store = Store::new("recv_cancel");
    let a = store.agent("a", json!({}));
    let w = store.watch_ids(&["a"], WatchOptions::default());
    runtime().block_on(async {
        // Nothing committed: the wait times out and its future is dropped.
        let waited = tokio::time::timeout(Duration::from_millis(20), w.recv()).await;
        assert!(waited.is_err(), "nothing to receive yet: {waited:?}");
        // Waiting when the change comes, woken by it, then dropped before it is polled again:
        // the event stays queued for the next call.
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(Arc::clone(&wakes));
        {
            let mut dropped = std::pin::pin!(w.recv());
            let poll = dropped.as_mut().poll(&mut Context::from_waker(&waker));
            assert!(poll.is_pending(), "nothing committed yet");
            a.set_state(br#"{"n": 1}"#).unwrap();
            woken(&wakes, 0);
        }
        let e = tokio::time::timeout(PATIENCE, w.recv()).await.ok();
        let e = e.flatten().expect("the change").unwrap();
        assert_eq!(brief(&store, &e), ("a".into(), 1, WatchKind::Merge));
    });
}

#[each_backend]
fn several_tasks_waiting_on_one_watch_each_get_their_own_events() {
    let store = Store::new("recv_many");
    let a = store.agent("a", json!({}));
    let w = Arc::new(store.watch_ids(&["a"], WatchOptions::default()));
    runtime().block_on(async {
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let w = Arc::clone(&w);
                tokio::spawn(async move { w.recv().await.expect("open").unwrap().version })
            })
            .collect();
        for n in 1..=4 {
            a.set_state(format!(r#"{{"n": {n}}}"#).as_bytes()).unwrap();
        }
        let mut versions = Vec::new();
        for r in readers {
            versions.push(tokio::time::timeout(PATIENCE, r).await.unwrap().unwrap());
        }
        versions.sort_unstable();
        assert_eq!(versions, [1, 2, 3, 4], "each event to one task, none lost");
    });
}

#[each_backend]
fn recv_on_a_callback_watch_is_refused() {
    let store = Store::new("recv_callback");
    let w = agent_state::Watch::with_callback(
        &store.location,
        &crate::connection(),
        agent_state::Selector::Ids(vec![store.id("a")]),
        WatchOptions::default(),
        Box::new(|_| {}),
    )
    .unwrap();
    runtime().block_on(async {
        assert!(matches!(
            w.recv().await,
            Some(Err(Error::InvalidArgument(_)))
        ));
    });
}
