//! What a server on a machine with other users and a browser must refuse (PROTOCOL.md,
//! "Security"): a Host it does not answer for, a watch upgrade from another origin, a token
//! file others can read or guess, guessing fast, telling the store's path, a WebSocket client
//! that breaks the protocol without a close code, and ids the library would refuse.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::frame::coding::CloseCode;

use crate::client::{request, store_and_id, Server, TOKEN};
use test_support::{open, opts, TempDir};

/// A server on a SQLite store with one agent at `{"n":1}`.
fn served(dir: &TempDir) -> Server {
    served_with(dir, &[])
}

/// [`served`] with more `serve` arguments.
fn served_with(dir: &TempDir, args: &[&str]) -> Server {
    let place = dir.store("hygiene.db");
    open(&place, &opts(json!({})))
        .unwrap()
        .set_state(br#"{"n":1}"#)
        .unwrap();
    Server::start_with(dir, &store_and_id(&place).0, args)
}

/// One request written as given (`head` without the final blank line): (status, head, body).
fn raw(addr: SocketAddr, head: &str) -> (u16, String, Vec<u8>) {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket
        .write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    socket.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let text = String::from_utf8(out[..split].to_vec()).unwrap();
    (
        text[9..12].parse().unwrap(),
        text,
        out[split + 4..].to_vec(),
    )
}

#[test]
fn a_host_the_server_does_not_answer_for_is_refused_before_the_token() {
    let dir = TempDir::new("serve_host");
    let server = served(&dir);
    let port = server.addr.port();
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("LOCALHOST:{port}"),
        "localhost".to_string(),
    ] {
        let (status, _, body) = raw(
            server.addr,
            &format!("GET /v1/agents HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}"),
        );
        assert_eq!(status, 200, "{host}: {}", String::from_utf8_lossy(&body));
    }
    for host in [
        format!("rebound.example:{port}"),
        "rebound.example".to_string(),
        format!("localhost:{}", port.wrapping_add(1)),
        format!("localhost.rebound.example:{port}"),
    ] {
        for token in [Some(TOKEN), None] {
            let auth = token
                .map(|t| format!("\r\nAuthorization: Bearer {t}"))
                .unwrap_or_default();
            let (status, _, body) = raw(
                server.addr,
                &format!("GET /v1/agents HTTP/1.1\r\nHost: {host}{auth}"),
            );
            assert_eq!(status, 421, "{host}");
            let body = String::from_utf8(body).unwrap();
            assert!(body.contains(r#""code":"wrong_host""#), "{body}");
            assert!(!body.contains("rebound"), "the Host is not echoed: {body}");
        }
    }
}

#[test]
fn an_allowed_host_is_answered_beside_the_loopback_names() {
    let dir = TempDir::new("serve_allowed_host");
    let server = served_with(&dir, &["--allowed-host", "dash.example"]);
    let port = server.addr.port();
    let get = |host: &str| {
        raw(
            server.addr,
            &format!("GET /v1/agents HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}"),
        )
        .0
    };
    assert_eq!(get(&format!("dash.example:{port}")), 200);
    assert_eq!(get("dash.example"), 200);
    assert_eq!(get(&format!("localhost:{port}")), 200);
    assert_eq!(get(&format!("other.example:{port}")), 421);
}

/// The status of a watch upgrade of the agent with `origin`, or 101 when it is accepted.
fn upgrade_with_origin(server: &Server, origin: Option<&str>) -> u16 {
    let url = format!("ws://{}/v1/agents//watch?access_token={TOKEN}", server.addr);
    let mut request = url.as_str().into_client_request().unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("Origin", origin.parse().unwrap());
    }
    match tungstenite::connect(request) {
        Ok((mut socket, response)) => {
            let _ = socket.close(None);
            response.status().as_u16()
        }
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("{origin:?}: {e}"),
    }
}

#[test]
fn a_watch_upgrade_from_another_origin_is_refused() {
    let dir = TempDir::new("serve_origin");
    let server = served(&dir);
    let own = format!("http://{}", server.addr);
    assert_eq!(upgrade_with_origin(&server, Some(&own)), 101);
    // Not a browser: no Origin at all.
    assert_eq!(upgrade_with_origin(&server, None), 101);
    for other in [
        "http://rebound.example",
        "null",
        &format!("https://{}", server.addr),
        &format!("http://127.0.0.1:{}", server.addr.port().wrapping_add(1)),
    ] {
        assert_eq!(upgrade_with_origin(&server, Some(other)), 403, "{other}");
    }
}

#[test]
fn an_allowed_origin_may_open_streams() {
    let dir = TempDir::new("serve_allowed_origin");
    let server = served_with(&dir, &["--allowed-origin", "https://dash.example"]);
    assert_eq!(
        upgrade_with_origin(&server, Some("https://dash.example")),
        101
    );
    assert_eq!(
        upgrade_with_origin(&server, Some("https://other.example")),
        403
    );
}

#[test]
fn a_token_file_others_can_read_or_guess_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("serve_token_file");
    let store = dir.file("token.db");
    let refused = |content: &str, mode: u32| {
        let file = dir.file("token");
        std::fs::write(&file, content).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = std::process::Command::new(crate::BIN)
            .args(["serve", store.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .arg("--token-file")
            .arg(&file)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(65), "{content} {mode:o}: {out:?}");
        assert!(out.stdout.is_empty());
        String::from_utf8(out.stderr).unwrap()
    };
    let strong = "0123456789abcdef".repeat(2);
    for mode in [0o644, 0o640, 0o604] {
        let message = refused(&strong, mode);
        assert!(
            message.contains("readable by its group or by others"),
            "{message}"
        );
        assert!(message.contains("chmod 600"), "{message}");
    }
    for weak in [
        "aaaaaaaaaaaaaaaa",
        &"a".repeat(64),
        "0123456789abcdef",
        "tooshort",
    ] {
        let message = refused(weak, 0o600);
        assert!(message.contains("too weak"), "{weak}: {message}");
        assert!(
            !message.contains(weak),
            "the token is not printed: {message}"
        );
    }
}

#[test]
fn the_bearer_scheme_is_read_in_any_case() {
    let dir = TempDir::new("serve_bearer_case");
    let server = served(&dir);
    for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"] {
        let (status, _, body) = raw(
            server.addr,
            // The file's single agent: the empty id.
            &format!(
                "GET /v1/agents/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {scheme} {TOKEN}",
                server.addr
            ),
        );
        assert_eq!(status, 200, "{scheme}: {}", String::from_utf8_lossy(&body));
        assert_eq!(body, br#"{"version":1,"state":{"n":1}}"#);
    }
}

#[test]
fn wrong_tokens_in_a_row_are_answered_ever_later() {
    let dir = TempDir::new("serve_guesses");
    let server = served(&dir);
    let mut last = Duration::ZERO;
    // Ten free (agent_state_serve's FREE_FAILURES), then 50 ms doubling: the sixteenth waits
    // 1.6 s; no bound above, a loaded machine only makes it later.
    for _ in 0..16 {
        let began = Instant::now();
        let (status, _, _) = request(
            server.addr,
            "GET",
            "/v1/agents",
            Some("wrong-token-0123456789"),
        );
        assert_eq!(status, 401);
        last = began.elapsed();
    }
    assert!(
        last >= Duration::from_millis(800),
        "the 16th wrong token took {last:?}"
    );
    // The right token is still answered (it never waits its turn: auth.rs).
    assert_eq!(server.get("/v1/agents").0, 200);
}

#[test]
fn a_store_that_fails_is_reported_without_its_path() {
    let dir = TempDir::new("serve_store_failed");
    let path = dir.file("failing.db");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let server = Server::start(&dir, path.to_str().unwrap());
    let (status, body) = server.get("/v1/agents");
    assert!(status == 500 || status == 503, "{status} {body}");
    let text = body.to_string();
    assert!(
        !text.contains("failing.db") && !text.contains(dir.file("").to_str().unwrap()),
        "{text}"
    );
    assert!(
        matches!(
            body["error"]["code"].as_str(),
            Some("internal" | "unavailable")
        ),
        "{text}"
    );
}

/// A watch stream of the agent, with the raw frames in `frame` then written by the client;
/// the close code the server answered with.
fn closed_after(server: &Server, frame: &[u8]) -> Option<CloseCode> {
    let mut stream = server.watch("/v1/agents//watch");
    let tungstenite::stream::MaybeTlsStream::Plain(tcp) = stream.socket.get_mut() else {
        unreachable!("no TLS in these tests")
    };
    tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    tcp.write_all(frame).unwrap();
    loop {
        match stream.next() {
            Ok(_) => {}
            Err(code) => return code,
        }
    }
}

#[test]
fn a_client_that_breaks_the_websocket_protocol_gets_its_close_code() {
    let dir = TempDir::new("serve_close_codes");
    let server = served(&dir);
    // Masked (key 0) client frames: reserved bits set; a text frame that is not UTF-8; a text
    // frame over the 64 KiB a client message may have.
    let reserved = [0xF1, 0x80, 0, 0, 0, 0];
    let not_utf8 = [0x81, 0x82, 0, 0, 0, 0, 0xFF, 0xFE];
    let size: u64 = 64 * 1024 + 1;
    let mut too_big = vec![0x81, 0xFF];
    too_big.extend_from_slice(&size.to_be_bytes());
    too_big.extend_from_slice(&[0, 0, 0, 0]);
    too_big.resize(too_big.len() + size as usize, b'a');
    assert_eq!(closed_after(&server, &reserved), Some(CloseCode::Protocol));
    assert_eq!(closed_after(&server, &not_utf8), Some(CloseCode::Invalid));
    assert_eq!(closed_after(&server, &too_big), Some(CloseCode::Size));
}

#[test]
fn ids_the_library_would_refuse_are_refused_without_echo() {
    let dir = TempDir::new("serve_bad_ids");
    let server = served(&dir);
    let (long, huge) = ("q".repeat(256), "q".repeat(64 * 1024));
    for (id, what) in [
        ("a%00b", "a NUL"),
        (&*long, "256 bytes"),
        (&*huge, "64 KiB"),
    ] {
        for tail in ["", "/changes", "/state?version=1"] {
            let (status, head, body) = request(
                server.addr,
                "GET",
                &format!("/v1/agents/{id}{tail}"),
                Some(TOKEN),
            );
            let body = String::from_utf8(body).unwrap();
            assert!(
                !body.contains("qqqq") && !body.contains("a\\u0000b"),
                "{what}: {body}"
            );
            if status == 414 {
                // The HTTP layer's own limit on a request line, before any of ours.
                assert_eq!(what, "64 KiB");
                continue;
            }
            assert_eq!(status, 400, "{what}{tail}: {head}");
            assert!(body.contains("at most 255 bytes"), "{body}");
        }
    }
    let url = format!("/v1/agents/{long}/watch?access_token={TOKEN}");
    assert_eq!(server.watch_refused(&url), 400);
    // 255 bytes is an id (of no agent here).
    let (status, _) = server.get(&format!("/v1/agents/{}", "q".repeat(255)));
    assert_eq!(status, 404);
}
