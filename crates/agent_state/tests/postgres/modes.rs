//! The URI parameter `default_query_exec_mode` (how statements are sent): `exec` (the default)
//! and `cache_statement` accepted, any other value refused at open; in `cache_statement` mode a
//! handle whose server connection was ended (its prepared statements and session settings gone
//! with it) writes again on a new one, and the handle's `busy_timeout_ms` bounds the wait for a
//! row another session holds, in both modes.

use agent_state::Error;
use serde_json::json;

use crate::{admin, open, server_or_skip, unique, with_param, without_exec_mode, RowLock};

/// `uri` without any `default_query_exec_mode` (the suite may run with one), then with `mode`.
fn in_mode(uri: &str, mode: &str) -> String {
    with_param(
        &without_exec_mode(uri),
        &format!("default_query_exec_mode={mode}"),
    )
}

/// Whether the tests run through a pooler in transaction mode, where `cache_statement` is not
/// for (see the book's PostgreSQL guide): its statements and session settings would not follow
/// the client from one server session to the next.
fn transaction_pooling() -> bool {
    std::env::var("AGENT_STATE_TEST_PG_POOLER").is_ok_and(|p| p == "transaction")
}

#[test]
fn both_modes_are_accepted_and_another_value_is_refused_naming_the_accepted_ones() {
    let uri = server_or_skip!();
    for mode in ["exec", "cache_statement"] {
        if mode == "cache_statement" && transaction_pooling() {
            continue;
        }
        let id = unique(&format!("mode-{mode}"));
        let a = open(&in_mode(&uri, mode), &id, json!({})).unwrap();
        a.set_state(br#"{"a":1}"#).unwrap();
        a.set_state(br#"{"b":2}"#).unwrap();
        // Another handle, in the other mode, reads what this one wrote.
        let other = if mode == "exec" && !transaction_pooling() {
            "cache_statement"
        } else {
            "exec"
        };
        let b = open(&in_mode(&uri, other), &id, json!({})).unwrap();
        let v = b.get_state_versioned().unwrap();
        assert_eq!((v.version, v.state.json()), (2, &br#"{"a":1,"b":2}"#[..]));
    }
    for bad in [
        "cache_describe",
        "describe_exec",
        "simple_protocol",
        "EXEC",
        "",
    ] {
        let err = open(&in_mode(&uri, bad), &unique("mode-bad"), json!({})).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m)
                if m.contains(&format!("default_query_exec_mode={bad}"))
                    && m.contains("exec")
                    && m.contains("cache_statement")),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_handle_whose_connection_was_ended_prepares_again_on_a_new_one() {
    let uri = server_or_skip!();
    if transaction_pooling() {
        eprintln!("skipped: cache_statement is for a session of the library's own, not transaction pooling");
        return;
    }
    let app = unique("mode-ended").replace('-', "_");
    let puri = with_param(
        &in_mode(&uri, "cache_statement"),
        &format!("application_name={app}"),
    );
    let id = unique("mode-ended");
    for log in [json!(false), json!({"keep_last": 5})] {
        let a = open(&puri, &id, json!({"max_connections": 1, "change_log": log})).unwrap();
        for i in 0..3 {
            a.set_state(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
        }
        let ended: i64 = admin(&uri)
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&app],
            )
            .unwrap()
            .get(0);
        assert!(ended >= 1, "no connection of the handle to end");
        // The first call after finds the connection gone (or, idle, its end read at the
        // checkout) and connects again: a read, then a write, each prepared anew.
        let v = a.get_state_versioned().unwrap();
        assert_eq!(v.state.json(), br#"{"i":2}"#);
        let w = a.set_state(br#"{"i":3}"#).unwrap();
        assert_eq!(w.json(), br#"{"i":3}"#);
        assert_eq!(a.get_state_versioned().unwrap().version, v.version + 1);
    }
}

#[test]
fn busy_timeout_bounds_the_wait_for_a_held_row_in_both_modes() {
    let uri = server_or_skip!();
    for mode in ["exec", "cache_statement"] {
        if mode == "cache_statement" && transaction_pooling() {
            continue;
        }
        for log in [json!(false), json!({"keep_last": 5})] {
            let id = unique(&format!("mode-busy-{mode}"));
            // A server timeout far longer than the busy timeout: a wait that lock_timeout did
            // not end would end on the client's clock, as Unavailable, not Busy.
            let a = open(
                &in_mode(&uri, mode),
                &id,
                json!({"busy_timeout_ms": 200, "server_timeout_ms": 60000, "change_log": log}),
            )
            .unwrap();
            a.set_state(br#"{"x":1}"#).unwrap();
            a.set_state(br#"{"x":2}"#).unwrap();
            let held = RowLock::hold(&uri, &id);
            let err = a.set_state(br#"{"x":3}"#).unwrap_err();
            assert!(
                matches!(&err, Error::Busy(m) if m.contains("held the agent's row")),
                "{mode}: {err}"
            );
            held.release();
            assert_eq!(a.set_state(br#"{"x":4}"#).unwrap().json(), br#"{"x":4}"#);
        }
    }
}
