//! The bounds on what a client can make the server hold (PROTOCOL.md, "Limits"): `/changes`
//! paged, the header-read and write timeouts, the caps on connections and streams, the
//! shutdown deadline and the second signal.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::{escaped, store_and_id, Server, TOKEN};
use test_support::{each_backend, open, opts, TempDir};

#[each_backend]
fn changes_come_in_pages_within_the_byte_budget_and_next_leads_through_each_once() {
    let dir = TempDir::new("serve_pages");
    let place = dir.store("pages.db");
    let writer = open(&place, &opts(json!({"change_log": {"keep_last": 1000}}))).unwrap();
    // 40 changes of some 6 KB each (the patch and the state after it): about 12 KB of JSON.
    let changes = 40u64;
    for n in 1..=changes {
        let state = json!({"n": n, "blob": "x".repeat(6000 + n as usize)});
        writer.set_state(state.to_string().as_bytes()).unwrap();
    }
    let (store, id) = store_and_id(&place);
    let budget = 40_000;
    let server = Server::start_with(&dir, &store, &["--page-bytes", &budget.to_string()]);
    let path = format!("/v1/agents/{}/changes", escaped(&id));

    let mut seen = Vec::new();
    let mut since = Some(0u64);
    let mut pages = 0;
    while let Some(after) = since {
        let (status, page) = server.get(&format!("{path}?since={after}"));
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["version"], changes);
        let list = page["changes"].as_array().unwrap();
        assert!(!list.is_empty(), "a page after {after} is empty: {page}");
        let bytes: usize = list.iter().map(|c| c.to_string().len() + 1).sum();
        assert!(bytes <= budget, "a page of {bytes} bytes, over {budget}");
        seen.extend(list.iter().map(|c| c["version"].as_u64().unwrap()));
        since = page["next"].as_u64();
        if since.is_none() {
            assert_eq!(page["next"], Value::Null);
        }
        pages += 1;
    }
    assert_eq!(seen, (1..=changes).collect::<Vec<_>>());
    assert!(
        pages > 10,
        "{pages} pages for some 480 KB in pages of 40 KB"
    );

    // `limit` bounds the count; a page beyond every change is empty, its `next` null.
    let (_, page) = server.get(&format!("{path}?since=0&limit=7"));
    let versions: Vec<_> = page["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["version"].clone())
        .collect();
    assert!(versions.len() <= 7 && !versions.is_empty(), "{versions:?}");
    assert_eq!(page["next"], versions.last().unwrap().clone());
    let (_, page) = server.get(&format!("{path}?since={changes}"));
    assert_eq!(page["changes"], json!([]));
    assert_eq!(page["next"], Value::Null);
    for limit in ["0", "1001", "x", "-1"] {
        let (status, body) = server.get(&format!("{path}?since=0&limit={limit}"));
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!("bad_request")),
            "limit={limit}"
        );
    }
}

#[each_backend]
fn a_change_larger_than_the_byte_budget_comes_alone_on_its_page() {
    let dir = TempDir::new("serve_big_page");
    let place = dir.store("big.db");
    let writer = open(&place, &opts(json!({"change_log": {"keep_last": 10}}))).unwrap();
    for n in 1..=3 {
        let state = json!({"n": n, "blob": "y".repeat(5000)});
        writer.set_state(state.to_string().as_bytes()).unwrap();
    }
    let (store, id) = store_and_id(&place);
    let server = Server::start_with(&dir, &store, &["--page-bytes", "1000"]);
    let path = format!("/v1/agents/{}/changes", escaped(&id));
    let mut since = json!(0);
    for version in 1..=3u64 {
        let (_, page) = server.get(&format!("{path}?since={since}"));
        let list = page["changes"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{page}");
        assert_eq!(list[0]["version"], version);
        since = page["next"].clone();
    }
    assert_eq!(since, Value::Null);
}

/// How long a test waits for what must happen (a connection closed, the process gone): far
/// beyond the limits the tests set, so only a server that never does it fails.
const WAIT: Duration = Duration::from_secs(60);

/// A connection to the server whose reads give up after [`WAIT`].
fn connect(addr: SocketAddr) -> TcpStream {
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(WAIT)).unwrap();
    socket
}

/// Whether the server closed `socket` (end of file or reset) before [`WAIT`] passed; what it
/// sent before closing is read and dropped.
fn closed(socket: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64 * 1024];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// A whole keep-alive request on `socket` and its answer: (status, body).
fn exchange(socket: &mut TcpStream, path: &str) -> (u16, Vec<u8>) {
    write!(
        socket,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(socket.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    assert!(reader.buffer().is_empty(), "nothing after the answer");
    (status, body)
}

/// Calls `attempt` until it says yes; panics after [`WAIT`].
fn eventually(what: &str, mut attempt: impl FnMut() -> bool) {
    let end = Instant::now() + WAIT;
    while !attempt() {
        assert!(Instant::now() < end, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a new connection is served: a request on it answered.
fn served(addr: SocketAddr) -> bool {
    let Ok(mut socket) = TcpStream::connect(addr) else {
        return false;
    };
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let request = format!(
        "GET /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    let mut answer = Vec::new();
    socket.write_all(request.as_bytes()).is_ok()
        && socket.read_to_end(&mut answer).is_ok()
        && answer.starts_with(b"HTTP/1.1 200")
}

fn empty_store(dir: &TempDir) -> String {
    let place = dir.store("limits.db");
    open(&place, &opts(json!({})))
        .unwrap()
        .set_state(br#"{"n":1}"#)
        .unwrap();
    store_and_id(&place).0
}

#[test]
fn silent_and_slow_header_connections_are_closed_after_the_header_timeout() {
    let dir = TempDir::new("serve_header_timeout");
    let store = empty_store(&dir);
    let server = Server::start_with(&dir, &store, &["--header-timeout", "1s"]);
    let mut silent = connect(server.addr);
    // Slow: a header line now and then, never the blank line that ends them.
    let mut slow = connect(server.addr);
    slow.write_all(b"GET /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut dribble = slow.try_clone().unwrap();
    let dribbler = std::thread::spawn(move || {
        let end = Instant::now() + WAIT;
        while Instant::now() < end && dribble.write_all(b"X-Slow: 1\r\n").is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    assert!(closed(&mut silent), "a silent connection is closed");
    assert!(closed(&mut slow), "a slow-header connection is closed");
    drop(slow);
    dribbler.join().unwrap();
    // A request in time is served as ever.
    assert_eq!(server.get("/v1/agents").0, 200);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let dir = TempDir::new("serve_idle");
    let store = empty_store(&dir);
    let server = Server::start_with(&dir, &store, &["--header-timeout", "1s"]);
    let mut socket = connect(server.addr);
    assert_eq!(exchange(&mut socket, "/v1/agents").0, 200);
    // Kept alive: the next request on it is served.
    assert_eq!(exchange(&mut socket, "/v1/agents").0, 200);
    assert!(
        closed(&mut socket),
        "the idle keep-alive connection is closed"
    );
}

#[test]
fn connections_beyond_the_cap_are_closed_at_once_until_one_of_the_cap_closes() {
    let dir = TempDir::new("serve_connection_cap");
    let store = empty_store(&dir);
    let server = Server::start_with(
        &dir,
        &store,
        &["--max-http-connections", "3", "--header-timeout", "10m"],
    );
    // Three kept-alive connections hold the cap (each one served once: accepted for sure).
    let mut held: Vec<TcpStream> = (0..3).map(|_| connect(server.addr)).collect();
    for socket in &mut held {
        assert_eq!(exchange(socket, "/v1/agents").0, 200);
    }
    for _ in 0..5 {
        let mut beyond = connect(server.addr);
        assert!(closed(&mut beyond), "a connection beyond the cap is closed");
    }
    assert!(!served(server.addr));
    // The held ones are still served; once one closes, new connections are again.
    assert_eq!(exchange(&mut held[1], "/v1/agents").0, 200);
    drop(held.remove(0));
    eventually(
        "a new connection served after one of the cap closed",
        || served(server.addr),
    );
}

#[test]
fn a_watch_stream_beyond_the_stream_cap_is_refused_with_503() {
    let dir = TempDir::new("serve_stream_cap");
    let place = dir.store("streams.db");
    open(&place, &opts(json!({})))
        .unwrap()
        .set_state(br#"{"n":1}"#)
        .unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start_with(&dir, &store, &["--max-streams", "1"]);
    let path = format!("/v1/agents/{}/watch", escaped(&id));
    let url = format!("ws://{}{path}?access_token={TOKEN}", server.addr);
    let first = server.watch(&path);
    match tungstenite::connect(url.as_str()) {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 503);
            let body: Value = serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
            assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
        }
        other => panic!("a second stream: {:?}", other.map(|_| ())),
    }
    drop(first);
    eventually("a stream opened after the first closed", || {
        tungstenite::connect(url.as_str()).is_ok()
    });
}

/// A store whose agent has some 30 MB of changes, far more than the sockets' buffers hold:
/// (store, the agent's `/changes` path).
fn large_history(dir: &TempDir) -> (String, String) {
    let place = dir.store("big.db");
    let writer = open(&place, &opts(json!({"change_log": {"keep_last": 100}}))).unwrap();
    for n in 0..50 {
        let state = json!({"n": n, "blob": "z".repeat(600_000)});
        writer.set_state(state.to_string().as_bytes()).unwrap();
    }
    let (store, id) = store_and_id(&place);
    (store, format!("/v1/agents/{}/changes", escaped(&id)))
}

/// A connection that asked for the whole of `changes` in one page and reads none of it.
fn not_reading(addr: SocketAddr, changes: &str) -> TcpStream {
    let mut socket = connect(addr);
    write!(
        socket,
        "GET {changes}?since=0&limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .unwrap();
    socket
}

/// [`not_reading`], once the first bytes of its answer have arrived: the answer is under way.
fn answer_under_way(addr: SocketAddr, changes: &str) -> TcpStream {
    let mut socket = not_reading(addr, changes);
    let mut first = [0u8; 12];
    socket.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    socket
}

/// Reads what is left of `socket`'s answer; asserts it was cut short of the 30 MB.
fn assert_cut_short(mut socket: TcpStream) {
    let mut got = Vec::new();
    let _ = socket.read_to_end(&mut got);
    assert!(
        got.len() < 30_000_000,
        "the answer was cut short: {} bytes",
        got.len()
    );
}

#[test]
fn a_client_that_does_not_read_its_answer_is_dropped_after_the_write_timeout() {
    let dir = TempDir::new("serve_write_timeout");
    let (store, changes) = large_history(&dir);
    let server = Server::start_with(
        &dir,
        &store,
        &[
            "--write-timeout",
            "1s",
            "--max-http-connections",
            "1",
            "--page-bytes",
            "100000000",
        ],
    );
    let reader = not_reading(server.addr, &changes);
    // It holds the only connection the server serves, until the server drops it: then a new
    // connection is served.
    eventually(
        "a new connection served once the non-reader was dropped",
        || served(server.addr),
    );
    assert_cut_short(reader);
}

/// SIGTERM to the server.
fn terminate(server: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The server's exit status, which must come within [`WAIT`].
fn exit_status(server: &mut Server) -> std::process::ExitStatus {
    let end = Instant::now() + WAIT;
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < end,
            "the server did not exit within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection that was served once, then sent half of a request.
fn half_sent(addr: SocketAddr) -> TcpStream {
    let mut socket = connect(addr);
    assert_eq!(exchange(&mut socket, "/v1/agents").0, 200);
    socket
        .write_all(b"GET /v1/agents HTTP/1.1\r\nHost: 127.")
        .unwrap();
    socket
}

#[test]
fn sigterm_closes_a_half_sent_request_and_exits() {
    let dir = TempDir::new("serve_shutdown_half");
    let store = empty_store(&dir);
    let mut server = Server::start_with(
        &dir,
        &store,
        &["--shutdown-timeout", "10m", "--header-timeout", "10m"],
    );
    let mut half = half_sent(server.addr);
    terminate(&server);
    assert!(closed(&mut half), "the half-sent request is closed");
    assert_eq!(exit_status(&mut server).code(), Some(0));
}

#[test]
fn sigterm_exits_after_the_shutdown_deadline_whatever_is_still_open() {
    let dir = TempDir::new("serve_shutdown_deadline");
    let (store, changes) = large_history(&dir);
    let mut server = Server::start_with(
        &dir,
        &store,
        &[
            "--shutdown-timeout",
            "1s",
            "--write-timeout",
            "10m",
            "--page-bytes",
            "100000000",
        ],
    );
    let mut half = half_sent(server.addr);
    let stuck = answer_under_way(server.addr, &changes);
    terminate(&server);
    assert!(closed(&mut half));
    assert_eq!(exit_status(&mut server).code(), Some(0));
    assert_cut_short(stuck);
}

#[test]
fn a_second_sigterm_exits_at_once_with_143() {
    let dir = TempDir::new("serve_second_signal");
    let (store, changes) = large_history(&dir);
    let mut server = Server::start_with(
        &dir,
        &store,
        &[
            "--shutdown-timeout",
            "10m",
            "--write-timeout",
            "10m",
            "--page-bytes",
            "100000000",
        ],
    );
    let stuck = answer_under_way(server.addr, &changes);
    terminate(&server);
    // The first signal is taken once the listener is closed.
    eventually("the listener closed", || {
        TcpStream::connect(server.addr).is_err()
    });
    terminate(&server);
    assert_eq!(exit_status(&mut server).code(), Some(143));
    assert_cut_short(stuck);
}
