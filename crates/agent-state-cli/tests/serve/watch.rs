//! The watch stream: where it starts, every change in commit order whichever process makes
//! it, the slow subscriber's close, the stop's close.

use serde_json::{json, Value};
use tungstenite::protocol::frame::coding::CloseCode;

use crate::client::{escaped, store_and_id, Server};
use test_support::{each_backend, open, opts, sqlite_only, TempDir};

fn stored(agent: &agent_state::Agent) -> (u64, Value) {
    let v = agent.get_state_versioned().unwrap();
    (v.version, serde_json::from_slice(v.state.json()).unwrap())
}

#[each_backend]
fn streams_start_where_the_client_is_and_carry_every_change_in_order() {
    let dir = TempDir::new("serve_watch");
    let place = dir.store("watch.db").agent("bot 1/α");
    let writer = open(&place, &opts(json!({"change_log": {"keep_last": 1000}}))).unwrap();
    writer
        .set_state(br#"{"messages":{},"mood":"calm"}"#)
        .unwrap();
    writer.set_state(br#"{"mood":"busy"}"#).unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let watch = format!("/v1/agents/{}/watch", escaped(&id));

    let at =
        |v: u64| -> Value { serde_json::from_slice(writer.state_at(v).unwrap().json()).unwrap() };
    let mut fresh = server.watch(&watch);
    let mut behind = server.watch(&format!("{watch}?since=1")).from(1, at(1));
    let mut current = server.watch(&format!("{watch}?since=2")).from(2, at(2));
    let mut origin = server.watch(&format!("{watch}?since=0")).from(0, json!({}));
    fresh.until(2);
    behind.until(2);
    origin.until(2);
    assert_eq!(fresh.kinds, ["snapshot"]);
    assert_eq!(behind.kinds, ["patch"]);
    assert_eq!(origin.kinds, ["patch", "patch"]);

    // Patches and replacements, by this process: the server is another one.
    for n in 0..40u64 {
        if n % 10 == 9 {
            writer
                .replace_state(format!(r#"{{"reset":{n}}}"#).as_bytes())
                .unwrap();
        } else if n % 3 == 0 {
            writer
                .set_state(format!(r#"{{"mood":null,"messages":{{"m{n}":"hi {n}"}}}}"#).as_bytes())
                .unwrap();
        } else {
            writer
                .set_state(format!(r#"{{"n":{n},"deep":{{"k{}":[{n}]}}}}"#, n % 4).as_bytes())
                .unwrap();
        }
    }
    let (version, state) = stored(&writer);
    assert_eq!(version, 42);
    for stream in [&mut fresh, &mut behind, &mut current, &mut origin] {
        stream.until(version);
        assert_eq!(stream.state, state);
        assert_eq!(stream.kinds.iter().filter(|k| *k == "replace").count(), 4);
    }
    assert_eq!(
        current.kinds.len(),
        40,
        "nothing before the next change: {:?}",
        current.kinds
    );

    // A stream opened from a version the log still keeps gets exactly what follows it.
    let mut late = server.watch(&format!("{watch}?since=30")).from(30, at(30));
    late.until(version);
    assert_eq!((late.kinds.len(), &late.state), (12, &state));
}

/// A JSON Patch goes out as its own message, its operations as written, live and when a
/// stream catches up from the change log after a gap; merge patches and replacements between
/// them keep their own types.
#[each_backend]
fn json_patches_stream_as_their_operations_live_and_from_the_log() {
    let dir = TempDir::new("serve_json_patch");
    let place = dir.store("json_patch.db").agent("patched");
    let writer = open(&place, &opts(json!({"change_log": {"keep_last": 1000}}))).unwrap();
    writer
        .set_state(br#"{"messages":[{"text":"a"}],"status":"idle"}"#)
        .unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let watch = format!("/v1/agents/{}/watch", escaped(&id));
    let at =
        |v: u64| -> Value { serde_json::from_slice(writer.state_at(v).unwrap().json()).unwrap() };
    let mut live = server.watch(&format!("{watch}?since=1")).from(1, at(1));

    let ops = json!([
        {"op": "add", "path": "/messages/-", "value": {"text": "b", "n": 1.5e3}},
        {"op": "test", "path": "/status", "value": "idle"},
        {"op": "replace", "path": "/status", "value": "busy"},
        {"op": "copy", "from": "/messages/0", "path": "/first"},
        {"op": "move", "from": "/first/text", "path": "/headline"},
        {"op": "remove", "path": "/first"},
        {"op": "add", "path": "/messages/0", "value": null}
    ]);
    writer.patch_state(ops.to_string().as_bytes()).unwrap();
    let message = live.next().unwrap();
    assert_eq!(message["type"], "json_patch");
    assert_eq!(message["version"], 2);
    assert_eq!(message["ops"], ops, "the operations as written");
    assert_eq!(message.as_object().unwrap().len(), 3, "{message}");
    assert_eq!(live.state, stored(&writer).1);

    // Operations that read what the previous ones wrote, between merges and a replacement.
    for n in 0..12u64 {
        match n % 4 {
            0 => writer.set_state(format!(r#"{{"n":{n}}}"#).as_bytes()),
            1 => writer.patch_state(
                format!(r#"[{{"op":"add","path":"/messages/1","value":{n}}},{{"op":"remove","path":"/messages/0"}}]"#)
                    .as_bytes(),
            ),
            2 => writer.patch_state(br#"[{"op":"move","from":"/messages/0","path":"/messages/-"}]"#),
            _ => writer.replace_state(format!(r#"{{"messages":[{n},{{"k":[]}}],"status":"reset"}}"#).as_bytes()),
        }
        .unwrap();
    }
    let (version, state) = stored(&writer);
    assert_eq!(version, 14);
    live.until(version);
    assert_eq!(live.state, state);
    let expected: Vec<&str> = std::iter::once("json_patch")
        .chain((0..12).map(|n| match n % 4 {
            0 => "patch",
            1 | 2 => "json_patch",
            _ => "replace",
        }))
        .collect();
    assert_eq!(live.kinds, expected);

    // A client that was away since version 1, and one since 5: each catches up from the log
    // with the same messages, and its copy ends equal to the stored state.
    for since in [1, 5] {
        let mut back = server
            .watch(&format!("{watch}?since={since}"))
            .from(since, at(since));
        back.until(version);
        assert_eq!(back.kinds, expected[usize::try_from(since).unwrap() - 1..]);
        assert_eq!(back.state, state);
    }
    // A failed JSON Patch commits nothing and sends nothing: the next message is the next
    // change.
    writer
        .patch_state(br#"[{"op":"test","path":"/status","value":"other"}]"#)
        .unwrap_err();
    writer.set_state(br#"{"after":true}"#).unwrap();
    let next = live.next().unwrap();
    assert_eq!(
        (next["type"].as_str(), next["version"].as_u64()),
        (Some("patch"), Some(15))
    );
    assert_eq!(live.state, stored(&writer).1);
}

#[each_backend]
fn a_client_far_behind_gets_the_state_not_hundreds_of_changes() {
    let dir = TempDir::new("serve_far");
    let place = dir.store("far.db").agent("far");
    let writer = open(
        &place,
        &opts(json!({"change_log": {"keep_last": 1000}, "synchronous": "normal"})),
    )
    .unwrap();
    for n in 0..300 {
        writer
            .set_state(format!(r#"{{"n":{n}}}"#).as_bytes())
            .unwrap();
    }
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let watch = format!("/v1/agents/{}/watch", escaped(&id));
    let at =
        |v: u64| -> Value { serde_json::from_slice(writer.state_at(v).unwrap().json()).unwrap() };
    // 299 behind: more than the 256 a subscriber may fall behind.
    let mut far = server.watch(&format!("{watch}?since=1")).from(1, at(1));
    far.until(300);
    assert_eq!(far.kinds, ["snapshot"]);
    // 256 behind: the changes themselves.
    let mut near = server.watch(&format!("{watch}?since=44")).from(44, at(44));
    near.until(300);
    assert_eq!((near.kinds.len(), near.kinds[0].as_str()), (256, "patch"));
    assert_eq!(near.state, stored(&writer).1);
}

#[each_backend]
fn a_since_in_the_future_or_an_unknown_agent_is_refused_before_the_upgrade() {
    let dir = TempDir::new("serve_refusals");
    let place = dir.store("refusals.db").agent("known");
    open(&place, &opts(json!({"change_log": {"keep_last": 10}})))
        .unwrap()
        .set_state(br#"{"a":1}"#)
        .unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let token = crate::client::TOKEN;
    let known = format!("/v1/agents/{}/watch", escaped(&id));
    assert_eq!(
        server.watch_refused(&format!("{known}?since=2&access_token={token}")),
        400
    );
    assert_eq!(
        server.watch_refused(&format!("{known}?since=one&access_token={token}")),
        400
    );
    let unknown = format!("/v1/agents/{}x/watch", escaped(&id));
    assert_eq!(
        server.watch_refused(&format!("{unknown}?access_token={token}")),
        404
    );
}

#[each_backend]
fn without_a_change_log_each_new_version_comes_as_a_snapshot() {
    let dir = TempDir::new("serve_nolog");
    let place = dir.store("nolog.db").agent("quiet");
    let writer = open(&place, &opts(json!({}))).unwrap();
    writer.set_state(br#"{"a":1}"#).unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let mut stream = server
        .watch(&format!("/v1/agents/{}/watch?since=0", escaped(&id)))
        .from(0, json!({}));
    stream.until(1);
    writer.set_state(br#"{"b":2}"#).unwrap();
    stream.until(2);
    assert_eq!(stream.kinds, ["snapshot", "snapshot"]);
    assert_eq!(stream.state, json!({"a":1,"b":2}));
}

#[test]
fn a_subscriber_that_stops_reading_is_closed_with_4001_not_buffered() {
    sqlite_only!("the backlog is the server's, the same on every backend; SQLite writes the big changes fast");
    let dir = TempDir::new("serve_slow");
    let place = dir.store("slow.db");
    // The log keeps every change: with a short one, a feed that falls behind a fast writer
    // finds the changes it missed pruned and sends one snapshot in their place, and the backlog
    // this test needs may never build up (it did not, once writes got faster).
    let writer = open(
        &place,
        &opts(json!({"change_log": {"keep_last": 1000}, "synchronous": "normal"})),
    )
    .unwrap();
    writer.set_state(br#"{"blob":""}"#).unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let mut stream = server.watch(&format!("/v1/agents/{}/watch", escaped(&id)));
    stream.until(1);
    // The client reads nothing while ~40 MB of changes are committed: more than the socket
    // buffers hold and the 256 messages the server keeps for a subscriber.
    let blob = "x".repeat(64 * 1024);
    for n in 0..640 {
        writer
            .set_state(format!(r#"{{"blob":"{n}{blob}"}}"#).as_bytes())
            .unwrap();
    }
    let code = loop {
        match stream.next() {
            Ok(_) => continue,
            Err(code) => break code,
        }
    };
    assert_eq!(code, Some(CloseCode::from(4001)));
    assert!(
        stream.version.unwrap() < 641,
        "it was closed before the end"
    );
}

#[each_backend]
fn a_stopping_server_closes_its_streams_with_1001_and_exits_0() {
    let dir = TempDir::new("serve_stop");
    let place = dir.store("stop.db");
    open(&place, &opts(json!({"change_log": {"keep_last": 10}})))
        .unwrap()
        .set_state(br#"{"a":1}"#)
        .unwrap();
    let (store, id) = store_and_id(&place);
    let mut server = Server::start(&dir, &store);
    let mut stream = server.watch(&format!("/v1/agents/{}/watch", escaped(&id)));
    stream.until(1);
    let pid = server.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(stream.next().unwrap_err(), Some(CloseCode::Away));
    assert_eq!(server.child.wait().unwrap().code(), Some(0));
}
