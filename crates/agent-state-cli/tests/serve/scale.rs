//! What watching costs the server: not a thread nor a store query per watched agent (one watch
//! of the store carries every agent's changes), and a change reaches its streams whichever
//! process commits it.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::{escaped, store_and_id, Server, Stream};
use test_support::{each_backend, open, opts, Place, TempDir};

/// `count` agents beside `place`, each with a state at version 1 and a change log: their ids.
fn agents(place: &Place, count: usize) -> Vec<String> {
    let options = opts(json!({"change_log": {"keep_last": 10}, "synchronous": "normal"}));
    (0..count)
        .map(|n| {
            let agent = place.agent(&format!("a{n:05}"));
            open(&agent, &options)
                .unwrap()
                .set_state(format!(r#"{{"n":{n}}}"#).as_bytes())
                .unwrap();
            store_and_id(&agent).1
        })
        .collect()
}

/// A server of a store of `count` agents (see [`agents`]), in a directory of its own.
struct Fleet {
    // Dropped first: the server stops before its store is removed.
    server: Server,
    place: Place,
    ids: Vec<String>,
    _dir: TempDir,
}

fn fleet(name: &str, count: usize) -> Fleet {
    let dir = TempDir::new(name);
    let place = dir.store(&format!("{name}.db"));
    let ids = agents(&place, count);
    let server = Server::start(&dir, &store_and_id(&place).0);
    Fleet {
        server,
        place,
        ids,
        _dir: dir,
    }
}

/// A stream of each agent, every one past its first message (the snapshot at version 1).
fn watch_each(server: &Server, ids: &[String]) -> Vec<Stream> {
    ids.iter()
        .map(|id| {
            let mut stream = server.watch(&format!("/v1/agents/{}/watch", escaped(id)));
            stream.until(1);
            stream
        })
        .collect()
}

/// The threads of process `pid` (Linux: its /proc/PID/task entries).
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

/// The CPU time process `pid` has used, user and system (Linux: /proc/PID/stat).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces:
    // utime and stime are fields 14 and 15, the 12th and 13th after it.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let per_second: u64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100);
    Duration::from_millis(ticks * 1000 / per_second)
}

/// Watched agents add no thread to the server: 500 streams of 500 agents run on the threads
/// that 5 streams of 5 run on (the feeds were one polling thread per agent).
#[each_backend]
fn the_servers_threads_do_not_grow_with_the_watched_agents() {
    let Fleet {
        server, place, ids, ..
    } = &fleet("serve_threads", 500);
    let pid = server.child.id();
    let mut streams = watch_each(server, &ids[..5]);
    let few = threads(pid);
    streams.extend(watch_each(server, &ids[5..]));
    let many = threads(pid);
    eprintln!("server threads: {few} with 5 watched agents, {many} with 500");
    // A little room for the runtime's pool of blocking threads, which a stream's start uses
    // (one at a time here) and which may keep one more for a while.
    assert!(
        many <= few + 3,
        "{few} threads with 5 watched agents, {many} with 500"
    );
    // Each stream still carries its own agent's changes.
    let writer = open(&place.agent("a00250"), &opts(json!({}))).unwrap();
    writer.set_state(br#"{"late":true}"#).unwrap();
    streams[250].until(2);
    assert_eq!(streams[250].state, json!({"n": 250, "late": true}));
    assert_eq!(streams[250].kinds, ["snapshot", "patch"]);
}

/// With 1,000 agents watched and nothing committed, the server waits: no query per agent, no
/// timer per agent. The bound is generous (the tests share a loaded machine); the measured
/// figure is the bench's.
#[each_backend]
fn an_idle_server_watching_a_thousand_agents_uses_little_cpu() {
    let Fleet { server, ids, .. } = &fleet("serve_idle", 1000);
    let pid = server.child.id();
    let _streams = watch_each(server, ids);
    // Past the streams' starts (the runtime's blocking threads finish theirs).
    std::thread::sleep(Duration::from_secs(1));
    let (start, used) = (Instant::now(), cpu_time(pid));
    std::thread::sleep(Duration::from_secs(4));
    let (elapsed, used) = (start.elapsed(), cpu_time(pid) - used);
    let share = used.as_secs_f64() / elapsed.as_secs_f64();
    eprintln!(
        "idle server, 1,000 watched agents: {:.1}% of a core ({used:?} in {elapsed:?})",
        share * 100.0
    );
    assert!(share < 0.20, "{:.1}% of a core while idle", share * 100.0);
}

/// A change committed by another program (the command line, a third process: neither the
/// server nor this test) reaches the stream, and so does a deletion and the agent's new
/// history after it.
#[each_backend]
fn changes_committed_by_another_process_reach_the_stream() {
    let dir = TempDir::new("serve_other_process");
    let place = dir.store("other.db").agent("elsewhere");
    let writer = open(&place, &opts(json!({"change_log": {"keep_last": 100}}))).unwrap();
    writer.set_state(br#"{"a":1}"#).unwrap();
    drop(writer);
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let mut stream = server.watch(&format!("/v1/agents/{}/watch", escaped(&id)));
    stream.until(1);

    // `agent-state COMMAND STORE [DOCUMENT] --agent ID`.
    let cli = |command: &str, document: Option<&str>| {
        let out = Command::new(crate::BIN)
            .args([command, store.as_str()])
            .args(document)
            .args(["--agent", id.as_str()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{command} {document:?}: {out:?}");
    };
    cli("set", Some(r#"{"b":2}"#));
    stream.until(2);
    assert_eq!(stream.kinds, ["snapshot", "patch"]);
    assert_eq!(stream.state, json!({"a": 1, "b": 2}));
    cli("replace", Some(r#"{"c":3}"#));
    stream.until(3);
    assert_eq!(stream.kinds.last().map(String::as_str), Some("replace"));

    // A deletion: the stream's copy becomes what is stored (nothing: the initial state at
    // version 0). The first write after it takes a version above the deleted ones, which
    // does not follow 0: it comes as the whole state.
    cli("rm", None);
    stream.until(0);
    assert_eq!(
        (stream.kinds.last().map(String::as_str), &stream.state),
        (Some("snapshot"), &json!({}))
    );
    cli("set", Some(r#"{"d":4}"#));
    let message: Value = stream.next().unwrap();
    assert_eq!(message["type"], "snapshot", "{message}");
    assert!(message["version"].as_u64().unwrap() > 3, "{message}");
    assert_eq!(stream.state, json!({"d": 4}));
}
