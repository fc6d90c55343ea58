//! The asynchronous agent: many tasks on one agent lose no update, calls run on the library's
//! worker threads (never on the runtime's), and a dropped call writes nothing or everything.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_state::{AsyncAgent, Error, OpenOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;
use test_support::{each_backend, open, TempDir};

#[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
#[serde(default)]
struct Tally {
    n: u64,
    last: Option<String>,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[each_backend]
fn many_tasks_on_one_agent_lose_nothing_and_run_on_worker_threads() {
    let dir = TempDir::new("async_many");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    // Where each commit ran: the hook runs on the thread that made the change.
    let threads = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&threads);
    agent
        .on_change(move |_| {
            let name = std::thread::current().name().map(str::to_string);
            log.lock().unwrap().push(name);
        })
        .unwrap()
        .keep();
    let agent = AsyncAgent::from(agent);
    runtime().block_on(async {
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let agent = agent.clone();
                tokio::spawn(async move {
                    if i % 2 == 0 {
                        agent.update(|t: &mut Tally| t.n += 1).await.map(|_| ())
                    } else {
                        let v = agent.set(&json!({"last": format!("task {i}")})).await?;
                        assert!(v.version >= 1);
                        agent.get::<Tally>().await.map(|_| ())
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let v = agent.get_state_versioned().await.unwrap();
        assert_eq!(v.get::<Tally>().unwrap().n, 20, "no increment lost");
        assert_eq!(v.version, 40);
    });
    let threads = threads.lock().unwrap();
    assert_eq!(threads.len(), 40);
    assert!(
        threads
            .iter()
            .all(|name| name.as_deref() == Some("agent_state-worker")),
        "every commit ran on the library's worker threads: {threads:?}"
    );
}

#[each_backend]
fn a_dropped_call_writes_nothing_or_everything() {
    let dir = TempDir::new("async_dropped");
    let agent = open(&dir.store("a"), &OpenOptions::default()).unwrap();
    // The first write's validator holds the handle (validators run under its lock) until told.
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let gate = Mutex::new(Some((entered_tx, released)));
    agent
        .validate_with(move |_| {
            if let Some((entered, released)) = gate.lock().unwrap().take() {
                entered.send(()).unwrap();
                released.recv().unwrap();
            }
            Ok(())
        })
        .unwrap();
    let agent = AsyncAgent::from(agent);
    let first = {
        let agent = agent.clone();
        std::thread::spawn(move || {
            agent
                .agent()
                .set(&json!({"first": true}))
                .map(|v| v.version)
        })
    };
    entered.recv().unwrap();
    runtime().block_on(async {
        // The second write waits for the handle; its future is dropped meanwhile.
        let dropped = tokio::time::timeout(
            Duration::from_millis(100),
            agent.set(&json!({"second": true})),
        )
        .await;
        assert!(
            dropped.is_err(),
            "it could not complete while the handle was held"
        );
        release.send(()).unwrap();
        assert_eq!(first.join().unwrap().unwrap(), 1);
        // The dropped write fired its token while it waited: it ends with nothing written,
        // unless its wait had already ended when it looked (a loaded machine may run the
        // worker late), and then it writes everything. Never a part: whenever the state is
        // read, its version counts the second write exactly when the state holds it.
        agent.set(&json!({"third": true})).await.unwrap();
        let read = agent.get_state_versioned().await.unwrap();
        let state = read.get::<serde_json::Value>().unwrap();
        let second = state.get("second").is_some();
        assert_eq!(read.version, 2 + u64::from(second), "{state}");
        assert_eq!(
            (&state["first"], &state["third"]),
            (&json!(true), &json!(true))
        );
        // A call whose future is never polled never starts.
        drop(agent.set(&json!({"never": true})));
        assert!(agent.get_value().await.unwrap().get("never").is_none());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_a_tokio_test_runtime_share_one_agent() {
    let dir = TempDir::new("async_tokio_test");
    let agent = agent_state::Agent::builder()
        .initial_state(&Tally::default())
        .change_log(agent_state::ChangeLog::KeepLast(100))
        .open_async(dir.file("a.db"))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let agent = agent.clone();
            tokio::spawn(async move { agent.update(|t: &mut Tally| t.n += 1).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(agent.get::<Tally>().await.unwrap().n, 16);
    // The JSON-text forms.
    let v = agent
        .patch_state_if(
            br#"[{"op": "add", "path": "/list", "value": [1, 2, 3]}]"#,
            Some(16),
        )
        .await
        .unwrap();
    assert_eq!(v.version, 17);
    assert_eq!(agent.get_tail("/list", 2).await.unwrap(), b"[2,3]");
    assert_eq!(agent.get_path("/n").await.unwrap(), b"16");
    let stale = agent.set_state_if(br#"{"n": 0}"#, Some(16)).await;
    assert!(matches!(stale, Err(Error::Conflict { .. })));
    agent
        .replace_state_if(br#"{"n": 0}"#, Some(17))
        .await
        .unwrap();
    assert_eq!(agent.restore(17).await.unwrap().version, 19);
    assert_eq!(agent.state_at(18).await.unwrap().json(), br#"{"n":0}"#);
    agent.close().await.unwrap();
    assert!(matches!(agent.get_value().await, Err(Error::Closed)));
}

/// The synchronous agent called from async code (as a program in `#[tokio::main]` may, before
/// it learns of `AsyncAgent`) works on every backend: opening, writing, reading, closing and
/// dropping the handle on a runtime's worker thread (PostgreSQL's connections have runtimes of
/// their own, on which tokio refuses to block from inside another: those waits move to a
/// thread of their own). Both kinds of runtime.
#[each_backend]
fn the_synchronous_agent_works_inside_a_tokio_runtime() {
    let dir = TempDir::new("sync_in_async");
    let place = dir.store("a");
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for runtime in [runtime(), current] {
        let place = place.clone();
        runtime.block_on(async move {
            let agent = open(&place, &OpenOptions::default()).unwrap();
            agent.update(|t: &mut Tally| t.n += 1).unwrap();
            assert!(agent.get::<Tally>().unwrap().n >= 1);
            agent.close().unwrap();
            drop(agent);
            let again = open(&place, &OpenOptions::default()).unwrap();
            again.set(&json!({"last": "inside"})).unwrap();
            drop(again);
        });
    }
    let agent = open(&place, &OpenOptions::default()).unwrap();
    assert_eq!(
        agent.get::<Tally>().unwrap(),
        Tally {
            n: 2,
            last: Some("inside".into())
        }
    );
}
