//! Through a connection pooler (PgBouncer, tests/pg/bouncer.sh): the server session under a
//! client changes between its transactions (transaction mode), so the library relies on no
//! prepared statement and no session setting beyond the transaction that made it. Skipped
//! unless `AGENT_STATE_TEST_PG_POOLER` names the pool mode of the pooler at
//! `AGENT_STATE_TEST_PG_URI` (tests/pg/pooler-suites.sh sets both).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::{admin, open, server_or_skip, unique, without_exec_mode};

/// The pool mode of the pooler the tests run through, or `None` (with a notice).
fn pooler() -> Option<String> {
    match std::env::var("AGENT_STATE_TEST_PG_POOLER") {
        Ok(mode) if !mode.is_empty() => Some(mode),
        _ => {
            eprintln!("skipped: AGENT_STATE_TEST_PG_POOLER is unset (not through a pooler)");
            None
        }
    }
}

/// 8 threads writing 8 agents (every thread each agent, in turn; half of them with the change
/// log on), with reads between: no write fails, none is lost. Before the backend used unnamed
/// statements this failed in transaction mode at once: `prepared statement "s8" does not
/// exist (SQLSTATE 26000)`, a statement prepared on one server session and run on another.
#[test]
fn eight_threads_on_eight_agents_lose_no_update() {
    const THREADS: usize = 8;
    const AGENTS: usize = 8;
    const EACH: usize = 20;
    let uri = server_or_skip!();
    let Some(mode) = pooler() else { return };
    let ids: Arc<Vec<String>> = Arc::new((0..AGENTS).map(|_| unique("bouncer8")).collect());
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (uri, ids) = (uri.clone(), ids.clone());
            std::thread::spawn(move || {
                let handles: Vec<_> = ids
                    .iter()
                    .enumerate()
                    .map(|(n, id)| {
                        let log = if n % 2 == 0 {
                            json!({"keep_last": 5})
                        } else {
                            json!(false)
                        };
                        open(
                            &uri,
                            id,
                            json!({"change_log": log, "busy_timeout_ms": 10000}),
                        )
                        .unwrap()
                    })
                    .collect();
                for i in 0..EACH {
                    for (n, a) in handles.iter().enumerate() {
                        a.set_state(format!(r#"{{"t{t}_{i}":{n}}}"#).as_bytes())
                            .unwrap_or_else(|e| panic!("thread {t}, agent {n}, write {i}: {e}"));
                        a.get_state().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for id in ids.iter() {
        let a = open(&uri, id, json!({})).unwrap();
        let v = a.get_state_versioned().unwrap();
        let state: Value = serde_json::from_slice(v.state.json()).unwrap();
        assert_eq!(state.as_object().unwrap().len(), THREADS * EACH, "{id}");
        assert_eq!(v.version, (THREADS * EACH) as u64, "{id}");
    }
    eprintln!("{mode} mode: {} writes, none lost", THREADS * AGENTS * EACH);
}

/// The server's own value of `name` (`SHOW`, in a session of its own, not through the pooler).
fn server_default(uri: &str, name: &str) -> String {
    show(&mut admin(uri), name)
}

/// `SHOW name` in one simple query (no prepared statement: it works through any pooler).
fn show(client: &mut postgres::Client, name: &str) -> String {
    client
        .simple_query(&format!("SHOW {name}"))
        .unwrap()
        .into_iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .unwrap()
}

/// After writes with a `busy_timeout_ms` and `synchronous` other than the server's defaults
/// (the transactions' `lock_timeout` and `synchronous_commit`), every server session behind the
/// pooler still has the server's defaults: plain clients through the pooler, as many as its
/// pool has server connections, each holding one (`BEGIN`), see them all. (Before, the
/// library set them for the session, and the next client of that server session got them.)
#[test]
fn no_session_setting_leaks_to_other_clients_of_the_pooler() {
    let uri = server_or_skip!();
    let Some(mode) = pooler() else { return };
    let lock_default = server_default(&uri, "lock_timeout");
    let sync_default = server_default(&uri, "synchronous_commit");
    assert_eq!(sync_default, "on", "the test server commits synchronously");
    let id = unique("leak");
    // One thread: the writes need no concurrency to leave a setting behind.
    let options = json!({"busy_timeout_ms": 1234, "synchronous": "normal"});
    let a = open(&uri, &id, options.clone()).unwrap();
    for i in 0..25 {
        a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        a.get_state().unwrap();
    }
    // Locked writes as well: switching the change log on takes the row's lock.
    let mut logged = options;
    logged["change_log"] = json!({"keep_last": 2});
    let b = open(&uri, &id, logged).unwrap();
    b.set_state(br#"{"logged":true}"#).unwrap();
    drop((a, b));
    // The pool's server connections (tests/pg/bouncer.sh: 20 in transaction mode), each held
    // by one plain client at once, so that every one is looked at. (With
    // `default_query_exec_mode=cache_statement`, in session mode, the handles' sessions had the
    // settings: the pooler resets a server session when its client leaves, as the handles'
    // pool did when they were dropped.)
    let mut clients: Vec<postgres::Client> = (0..20)
        .map(|_| postgres::Client::connect(&without_exec_mode(&uri), postgres::NoTls).unwrap())
        .collect();
    for c in &mut clients {
        c.batch_execute("BEGIN").unwrap();
        assert_eq!(show(c, "lock_timeout"), lock_default, "{mode} mode");
        assert_eq!(show(c, "synchronous_commit"), sync_default, "{mode} mode");
    }
    for c in &mut clients {
        c.batch_execute("ROLLBACK").unwrap();
    }
}
