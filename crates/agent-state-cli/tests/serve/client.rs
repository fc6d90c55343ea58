//! The test's side of the wire: the real server as a child process, a plain HTTP/1.1 GET over
//! a socket, and WebSocket streams (tungstenite), with an RFC 7396 merge and an RFC 6902
//! JSON Patch to keep a copy.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_state::value::json_patch::JsonPatch;
use serde_json::{Map, Value};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

use test_support::{Place, TempDir};

pub const TOKEN: &str = "serve-test-token-0123456789";

/// A running `agent-state serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Serves `store` on a free port of 127.0.0.1 with [`TOKEN`].
    pub fn start(dir: &TempDir, store: &str) -> Server {
        Server::start_with(dir, store, &[])
    }

    /// [`Server::start`] with more `serve` arguments (its limits' flags). Through a
    /// transaction pooler (tests/pg/pooler-suites.sh), which cannot carry LISTEN, the server
    /// polls (`--watch-poll`), as such a deployment is told to.
    pub fn start_with(dir: &TempDir, store: &str, args: &[&str]) -> Server {
        let pooled = std::env::var("AGENT_STATE_TEST_PG_POOLER").is_ok_and(|p| p == "transaction")
            && store.starts_with("postgres");
        let poll: &[&str] = if pooled {
            &["--watch-poll", "50ms"]
        } else {
            &[]
        };
        let token_file = dir.file("token");
        std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
        // Private, as the server requires of a token file.
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&token_file, private).unwrap();
        let mut child = Command::new(crate::BIN)
            .args(["serve", store, "--listen", "127.0.0.1:0", "--token-file"])
            .arg(&token_file)
            .args(args)
            .args(poll)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("agent-state serve: listening on http://")
            .unwrap_or_else(|| panic!("the server's first line: {line:?}"))
            .parse()
            .unwrap();
        Server { child, addr }
    }

    /// `GET path` with the token: (status, body as JSON).
    pub fn get(&self, path: &str) -> (u16, Value) {
        let (status, _, body) = request(self.addr, "GET", path, Some(TOKEN));
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// A watch stream of `path` (`/v1/agents/ID/watch?…`), with the token in the query.
    pub fn watch(&self, path: &str) -> Stream {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = format!("ws://{}{path}{separator}access_token={TOKEN}", self.addr);
        let (socket, _) =
            tungstenite::connect(url.as_str()).unwrap_or_else(|e| panic!("{url}: {e}"));
        Stream {
            socket,
            state: Value::Null,
            version: None,
            kinds: Vec::new(),
        }
    }

    /// The status the watch upgrade of `path` is refused with.
    pub fn watch_refused(&self, path: &str) -> u16 {
        let url = format!("ws://{}{path}", self.addr);
        match tungstenite::connect(url.as_str()) {
            Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
            other => panic!(
                "{url}: expected an HTTP refusal, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on its own connection: (status, head, body).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> (u16, String, Vec<u8>) {
    let mut socket = TcpStream::connect(addr).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        socket,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    socket.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

/// A watch stream and the copy it keeps.
pub struct Stream {
    pub socket: WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    pub state: Value,
    pub version: Option<u64>,
    /// The type of each message received, in order (pings left out).
    pub kinds: Vec<String>,
}

impl Stream {
    /// The copy the client already has when it passes `since`.
    pub fn from(mut self, version: u64, state: Value) -> Stream {
        self.version = Some(version);
        self.state = state;
        self
    }

    /// Reads one message and applies it; `Err` with the close code when the server closed.
    pub fn next(&mut self) -> Result<Value, Option<CloseCode>> {
        loop {
            match self.socket.read() {
                Ok(Message::Text(text)) => {
                    let message: Value = serde_json::from_str(&text).unwrap();
                    self.apply(&message);
                    return Ok(message);
                }
                Ok(Message::Close(frame)) => return Err(frame.map(|f| f.code)),
                Ok(_) => {}
                Err(_) => return Err(None),
            }
        }
    }

    fn apply(&mut self, message: &Value) {
        let version = message["version"].as_u64().unwrap();
        let kind = message["type"].as_str().unwrap().to_string();
        match kind.as_str() {
            "ping" => return,
            "snapshot" => self.state = message["state"].clone(),
            "patch" | "json_patch" | "replace" => {
                let last = self.version.expect("a change after a start");
                assert_eq!(version, last + 1, "versions follow each other: {message}");
                self.state = match kind.as_str() {
                    "patch" => merge(&self.state, &message["patch"]),
                    "json_patch" => json_patch(&self.state, &message["ops"]),
                    _ => message["state"].clone(),
                };
            }
            other => panic!("unknown message type {other}"),
        }
        self.version = Some(version);
        self.kinds.push(kind);
    }

    /// Reads until the copy is at `version` (a generous deadline: a loaded machine).
    pub fn until(&mut self, version: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        self.socket
            .get_mut()
            .get_mut_tcp()
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        while self.version != Some(version) {
            assert!(Instant::now() < deadline, "never reached version {version}");
            self.next()
                .unwrap_or_else(|code| panic!("closed ({code:?}) before version {version}"));
        }
    }
}

trait TcpOf {
    fn get_mut_tcp(&mut self) -> &mut TcpStream;
}

impl TcpOf for tungstenite::stream::MaybeTlsStream<TcpStream> {
    fn get_mut_tcp(&mut self) -> &mut TcpStream {
        match self {
            tungstenite::stream::MaybeTlsStream::Plain(s) => s,
            _ => unreachable!("no TLS in these tests"),
        }
    }
}

/// RFC 7396: objects merge, `null` deletes, anything else replaces; members keep their place
/// and new ones are appended.
pub fn merge(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut out = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch {
        if value.is_null() {
            out.shift_remove(key);
        } else {
            let merged = merge(out.get(key).unwrap_or(&Value::Null), value);
            out.insert(key.clone(), merged);
        }
    }
    Value::Object(out)
}

/// RFC 6902: `ops` applied to `target` by the library's reference implementation (the one
/// the public RFC 6902 suite checks), which a test's copy must follow exactly.
pub fn json_patch(target: &Value, ops: &Value) -> Value {
    JsonPatch::from_value(ops)
        .and_then(|patch| patch.apply(target))
        .unwrap_or_else(|e| panic!("the operations {ops} do not apply to {target}: {e}"))
}

/// The store argument of a place, and the id the server knows its agent by.
pub fn store_and_id(place: &Place) -> (String, String) {
    match place {
        Place::Sqlite { path, agent } => (
            path.to_str().unwrap().to_string(),
            agent.clone().unwrap_or_default(),
        ),
        Place::Postgres { uri, agent } => (uri.clone(), agent.clone()),
    }
}

/// `id` as one path segment.
pub fn escaped(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
