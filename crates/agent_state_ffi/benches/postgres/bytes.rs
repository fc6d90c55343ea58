//! The write-cost target on PostgreSQL for what a write sends. A 2-member patch on a 256 KiB
//! state should cost the wire the patch, not the state: the bytes our client sends the server
//! per `set_state`, counted by a proxy between them, against the patch's size.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{make_patches, make_state, ours, prefix, Args};

/// What a write may send beyond the patch itself: the protocol's framing of the statements a
/// write takes (Parse/Bind/Execute/Sync messages, their SQL text, the agent's key, the version
/// check, BEGIN/COMMIT) is a few hundred bytes; 4 KiB leaves room for that and for whatever a
/// storage format stores beside the patch, and is still a small fraction of the 256 KiB state
/// a whole-value write would send.
pub(crate) const PER_WRITE_ALLOWANCE: usize = 4096;

/// The state's size, and the writes counted (after a few of warm-up).
const STATE_BYTES: usize = 256 * 1024;

/// A forwarding proxy on a Unix socket in a directory of its own, in front of the server's
/// socket; counts the bytes clients send to the server (postgres/append.rs counts through it
/// too).
pub(crate) struct Proxy {
    pub(crate) dir: PathBuf,
    sent: Arc<AtomicU64>,
}

/// Copies `from` into `to` until either ends, adding what it copied to `count` if given.
fn pump(mut from: UnixStream, mut to: UnixStream, count: Option<Arc<AtomicU64>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(c) = &count {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

impl Proxy {
    /// Listens as `.s.PGSQL.<port>` (libpq's name for a server's socket) in a new directory,
    /// forwarding every connection to `server_socket`.
    pub(crate) fn start(server_socket: PathBuf, port: &str) -> Proxy {
        let dir = std::env::temp_dir().join(format!("{}-bytes-proxy", prefix()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let listener = UnixListener::bind(dir.join(format!(".s.PGSQL.{port}"))).unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let server = UnixStream::connect(&server_socket).unwrap();
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let counter = counter.clone();
                std::thread::spawn(move || pump(client, server, Some(counter)));
                std::thread::spawn(move || pump(s2, c2, None));
            }
        });
        Proxy { dir, sent }
    }
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `uri`'s query parameter `key` (percent-decoded as far as a socket directory needs).
pub(crate) fn param(uri: &str, key: &str) -> Option<String> {
    let query = uri.split_once('?')?.1;
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.replace("%2F", "/").replace("%2f", "/"))
}

/// `uri` with its query parameter `host` set to `host`.
pub(crate) fn with_host(uri: &str, host: &Path) -> String {
    let (base, query) = uri.split_once('?').unwrap();
    let params: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some(("host", _)) => format!("host={}", host.display()),
            _ => kv.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// The figures: bytes sent per write, the mean patch size, the state's size and the writes.
pub(crate) struct BytesPerWrite {
    pub per_write: f64,
    pub patch: f64,
    pub state: usize,
    pub writes: usize,
}

impl BytesPerWrite {
    pub(crate) fn verdict(&self) -> &'static str {
        if self.per_write < self.patch + PER_WRITE_ALLOWANCE as f64 {
            "PASS"
        } else {
            "MISS"
        }
    }
    /// A line of the printed output, and the JSON member postgres.json carries.
    pub(crate) fn report(&self) -> (String, String) {
        let line = format!(
            "bytes sent per write, 2-member patch on a {} KiB state: {:.0} B per set_state (patch {:.0} B); target < patch + {PER_WRITE_ALLOWANCE} B: {}",
            self.state / 1024,
            self.per_write,
            self.patch,
            self.verdict()
        );
        let json = format!(
            r#","bytes_per_write":{{"state_bytes":{},"patch_bytes":{:.1},"bytes_per_write":{:.1},"allowance":{PER_WRITE_ALLOWANCE},"writes":{},"verdict":"{}"}}"#,
            self.state,
            self.patch,
            self.per_write,
            self.writes,
            self.verdict()
        );
        (line, json)
    }
}

/// Counts the bytes our client sends per `set_state` of a 2-member patch on a 256 KiB state,
/// through a proxy in front of the server at `uri` (a Unix socket directory, as bench/run.sh's
/// server has); `None`, said on stderr, for a server over TCP.
pub(crate) fn bench_bytes_per_write(cfg: &Args, uri: &str) -> Option<BytesPerWrite> {
    let (Some(host), Some(port)) = (param(uri, "host"), param(uri, "port")) else {
        eprintln!("bench: bytes per write skipped: no host and port in the server's URI");
        return None;
    };
    if !host.starts_with('/') {
        eprintln!("bench: bytes per write skipped: the server is not on a Unix socket");
        return None;
    }
    let proxy = Proxy::start(Path::new(&host).join(format!(".s.PGSQL.{port}")), &port);
    let through = with_host(uri, &proxy.dir);
    let agent = format!("{}-bytes", prefix());
    let handle = ours(&through, &agent, "normal");
    handle.replace(&make_state(STATE_BYTES));
    let writes = if cfg.smoke { 5 } else { 50 };
    let patches = make_patches(writes + 3);
    for p in &patches[..3] {
        handle.set(p); // warm-up: statements prepared, caches filled
    }
    let before = proxy.sent();
    for p in &patches[3..] {
        handle.set(p);
    }
    let sent = proxy.sent() - before;
    drop(handle);
    let patch = patches[3..].iter().map(|p| p.len()).sum::<usize>() as f64 / writes as f64;
    Some(BytesPerWrite {
        per_write: sent as f64 / writes as f64,
        patch,
        state: STATE_BYTES,
        writes,
    })
}
