//! The subscribers of bench/live/run.sh in Rust: one process holding N watch streams on one
//! agent, each a tokio task keeping its own copy (spread over T threads), cheaper per message
//! than the JS client's ~40 µs, which saturated a 2-CPU machine by itself at 1,000 subscribers
//! and 200 writes/s: the load generator, not the server, was measured.
//!
//!   live_subscribers --url http://HOST:PORT --token-file F --agent ID --subscribers N
//!                    --ready-file PATH [--threads T (default: one per CPU)]
//!
//! 1. Connects the N subscribers in batches of 100, each batch waited for (every subscriber
//!    has its first snapshot, or failed; 60 s at most in all): an accept burst of 1,000 is not
//!    what is measured. Then writes the ready file, whole: {"ok":true,"connected":N,...}.
//! 2. Reads standard input until a line `final [VERSION]` (run.sh sends it when the writer is
//!    done; without VERSION, or at the end of input: the stored version), waits (30 s at most)
//!    until every subscriber is at that version, reads `GET /v1/agents/{id}`, deep-compares
//!    every copy and version with it and prints one JSON object on standard output, the shape
//!    of subscribers.mjs's (run.sh's report.py judges it).
//!
//! No reconnects: a healthy run has none, so a close or an error ends that subscriber and is
//! counted, not repaired. Exit 0 when the figures were printed, 3 when the harness failed.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc::UnboundedReceiver, Notify};
use tokio_tungstenite::tungstenite::{protocol::WebSocketConfig, Message};

const OPTIONS: &str = "url agent token-file subscribers ready-file threads";
const RAMP: usize = 100;
const CONNECT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(30);

/// What every subscriber reads to know when to stop, and counts the coordinator waits on.
#[derive(Default)]
struct Shared {
    /// Subscribers with their first snapshot, and those that ended before one.
    ready: AtomicUsize,
    failed: AtomicUsize,
    /// The version to stop at (0: not known yet; a watched agent is at 1 or more).
    target: AtomicU64,
    /// Stop now, whatever the version (the settle deadline passed).
    stop: AtomicBool,
    /// Wakes the subscribers waiting for no message (already at the target, or stalled).
    wake: Notify,
}

/// One subscriber's copy and counts, returned by its task.
#[derive(Default)]
struct Sub {
    id: usize,
    state: Value,
    version: Option<u64>,
    first_version: Option<u64>,
    snapshots: u64,
    patches: u64,
    replaces: u64,
    gaps: u64,
    skipped: u64,
    close: Option<u16>,
    /// What ended it otherwise: ("connect" | "read" | "bad_message", the text).
    error: Option<(&'static str, String)>,
    lat: Vec<f64>,
}

/// RFC 7396 on `target` in place: only the members the patch names are touched (a patch of one
/// item costs that item, not a copy of the state), and only what is stored is cloned.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else { return };
    for (key, value) in patch {
        if value.is_null() {
            // shift_remove: the other members keep their order (preserve_order).
            map.shift_remove(key);
        } else if let Some(slot) = map.get_mut(key) {
            merge(slot, value);
        } else {
            // A new member is merged into nothing: nulls inside it are dropped, as RFC 7396 says.
            let mut slot = Value::Null;
            merge(&mut slot, value);
            map.insert(key.clone(), slot);
        }
    }
}

/// One frame, parsed: its text (to tell the same frame again), type, version and payload (the
/// patch or the state).
struct Parsed {
    text: String,
    kind: String,
    version: u64,
    body: Value,
}

fn parse(text: &str) -> Result<Parsed, String> {
    let bad = |what: &str| format!("{what}: {text:.80}");
    let Ok(Value::Object(mut msg)) = serde_json::from_str::<Value>(text) else {
        return Err(bad("not a JSON object"));
    };
    let Some(Value::String(kind)) = msg.shift_remove("type") else {
        return Err(bad("no type"));
    };
    let version = msg.get("version").and_then(Value::as_u64);
    let version = version.ok_or(bad("no version"))?;
    let body = msg.shift_remove(if kind == "patch" { "patch" } else { "state" });
    let (text, body) = (text.to_string(), body.unwrap_or(Value::Null));
    Ok(Parsed {
        text,
        kind,
        version,
        body,
    })
}

/// The patches and replacements this thread has parsed, by version (a ring). Every subscriber
/// gets the same frames, and parsing one into a Value (arbitrary_precision, preserve_order) was
/// most of a frame's cost: once per thread, not per subscriber. A subscriber takes the parsed
/// frame only when its own frame is the same text, byte for byte, and merges it into its own
/// copy, so the copy is still made of what it received. A miss costs one parse.
const RING: usize = 4096;
thread_local! {
    static PARSED: RefCell<Vec<Option<Rc<Parsed>>>> = RefCell::new(vec![None; RING]);
}

impl Sub {
    /// One text frame: parsed (or found parsed), checked and merged into the copy.
    fn on_text(&mut self, text: &str, shared: &Shared) -> Result<(), String> {
        let received = SystemTime::now().duration_since(UNIX_EPOCH);
        let received = received.unwrap_or_default().as_secs_f64() * 1000.0;
        let next = self.version.map_or(0, |v| v + 1);
        let slot = next as usize % RING;
        let hit = PARSED.with(|ring| ring.borrow()[slot].clone());
        let p = match hit.filter(|p| p.version == next && p.text == text) {
            Some(p) => p,
            None => Rc::new(parse(text)?),
        };
        if p.kind == "patch" || p.kind == "replace" {
            let slot = p.version as usize % RING;
            PARSED.with(|ring| ring.borrow_mut()[slot] = Some(p.clone()));
        }
        match (p.kind.as_str(), self.version) {
            ("ping", _) => return Ok(()),
            ("snapshot", None) => {
                self.first_version = Some(p.version);
                shared.ready.fetch_add(1, Relaxed);
            }
            ("snapshot", Some(v)) => self.skipped += p.version.saturating_sub(v + 1),
            ("patch" | "replace", v) if v.map(|v| v + 1) != Some(p.version) => self.gaps += 1,
            ("patch" | "replace", _) => {}
            (kind, _) => return Err(format!("unknown type {kind}")),
        }
        if p.kind == "patch" {
            if let Some(sent) = p.body.get("t").and_then(Value::as_f64) {
                self.lat.push(received - sent);
            }
            self.patches += 1;
            merge(&mut self.state, &p.body);
        } else {
            self.snapshots += u64::from(p.kind == "snapshot");
            self.replaces += u64::from(p.kind == "replace");
            self.state = p.body.clone();
        }
        self.version = Some(p.version);
        Ok(())
    }

    fn equal(&self, stored: &Value) -> bool {
        self.version.is_some()
            && self.version == stored["version"].as_u64()
            && self.state == stored["state"]
    }

    /// Every version from the first snapshot's on, each once.
    fn consecutive(&self) -> bool {
        let span = self.version.zip(self.first_version);
        let span = span.map(|(v, first)| v - first);
        self.gaps == 0 && self.skipped == 0 && span == Some(self.patches + self.replaces)
    }

    /// What the report shows of a subscriber that failed a check.
    fn brief(&self, stored: &Value) -> Value {
        json!({"id": self.id, "first_version": self.first_version, "version": self.version,
               "equal": self.equal(stored), "snapshots": self.snapshots,
               "patches": self.patches, "replaces": self.replaces, "gaps": self.gaps,
               "skipped": self.skipped, "close": self.close, "error": self.error})
    }
}

/// One subscriber, from its connection until the target version (or stop).
async fn subscribe(id: usize, url: Arc<str>, shared: Arc<Shared>) -> Sub {
    let mut s = Sub {
        id,
        ..Default::default()
    };
    // The server writes; this side only reads. 4 KiB as the server does: tungstenite zero-fills
    // its read buffer, and the default 128 KiB one costs more than the frames in it.
    let config = WebSocketConfig::default().read_buffer_size(4096);
    let connecting = tokio_tungstenite::connect_async_with_config(&*url, Some(config), true);
    let mut ws = match connecting.await {
        Ok((ws, _)) => ws,
        Err(e) => {
            s.error = Some(("connect", e.to_string()));
            shared.failed.fetch_add(1, Relaxed);
            return s;
        }
    };
    // Created before the loop and polled in place: registering a waiter once, not per message.
    let wake = shared.wake.notified();
    tokio::pin!(wake);
    loop {
        let target = shared.target.load(Relaxed);
        if shared.stop.load(Relaxed) || (target > 0 && s.version.is_some_and(|v| v >= target)) {
            break;
        }
        tokio::select! {
            biased;
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(text))) => {
                    if let Err(e) = s.on_text(text.as_str(), &shared) {
                        s.error = Some(("bad_message", e));
                        break;
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    s.close = Some(frame.map_or(1005, |f| f.code.into()));
                    break;
                }
                Some(Ok(_)) => {} // WebSocket pings: tungstenite answers them itself
                Some(Err(e)) => {
                    s.error = Some(("read", e.to_string()));
                    break;
                }
                None => {
                    s.close = Some(1006); // the socket ended without a close frame
                    break;
                }
            },
            () = &mut wake => wake.set(shared.wake.notified()),
        }
    }
    if s.first_version.is_none() {
        shared.failed.fetch_add(1, Relaxed);
    }
    if s.close.is_none() && s.error.is_none() {
        // A close frame, so the server sees a goodbye, not a broken socket.
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
    }
    s
}

/// `GET /v1/agents/{id}` over a plain HTTP/1.1 connection: {"version":V,"state":STATE}.
fn get_state(host: &str, agent: &str, token: &str) -> Result<Value, String> {
    let path = format!("/v1/agents/{agent}");
    let err = |e: std::io::Error| format!("GET {path}: {e}");
    let mut tcp = std::net::TcpStream::connect(host).map_err(err)?;
    tcp.set_read_timeout(Some(SETTLE)).map_err(err)?;
    let head = format!("Host: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close");
    let request = format!("GET {path} HTTP/1.1\r\n{head}\r\n\r\n");
    tcp.write_all(request.as_bytes()).map_err(err)?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).map_err(err)?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n");
    let split = split.ok_or(format!("GET {path}: no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let body = &raw[split + 4..];
    if !head.starts_with("http/1.1 200") || head.contains("transfer-encoding: chunked") {
        // The server's JSON bodies have a length: a chunked one is not what PROTOCOL.md says.
        let line = head.lines().next().unwrap_or("");
        let body = String::from_utf8_lossy(body);
        return Err(format!("GET {path}: {line} {body:.200}"));
    }
    serde_json::from_slice(body).map_err(|e| format!("GET {path}: {e}"))
}

/// This process's CPU ticks (utime + stime). USER_HZ is 100 on every Linux ABI, and reading
/// sysconf would take the unsafe code this workspace denies.
const HZ: f64 = 100.0;
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The name (field 2) may hold spaces: fields 14 and 15 counted after its ')'.
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    tick(11) + tick(12)
}

fn latency(mut lat: Vec<f64>) -> Value {
    lat.sort_unstable_by(f64::total_cmp);
    let at = |p: f64| {
        let last = lat.len().checked_sub(1)?;
        let i = ((p / 100.0 * last as f64).round() as usize).min(last);
        lat.get(i).copied()
    };
    json!({"p50": at(50.0), "p90": at(90.0), "p99": at(99.0), "max": lat.last(),
           "min": lat.first()})
}

/// `--key value` pairs, each key one of OPTIONS.
fn parse_args() -> Result<HashMap<String, String>, String> {
    let mut kv = HashMap::new();
    let mut argv = std::env::args().skip(1);
    while let Some(k) = argv.next() {
        let known = |key: &&str| OPTIONS.split(' ').any(|o| o == *key);
        let key = k.strip_prefix("--").filter(known);
        let key = key.ok_or(format!("unknown argument '{k}'"))?.to_string();
        let value = argv.next().ok_or(format!("{k} needs a value"))?;
        kv.insert(key, value);
    }
    Ok(kv)
}

/// One client thread: a current-thread runtime running the subscribers whose ids it is sent,
/// until the ids end and all of those have ended. Not one work-stealing runtime: allocations
/// are freed by the thread that made them, and PARSED needs no lock.
fn client_thread(mut ids: UnboundedReceiver<usize>, url: Arc<str>, shared: Arc<Shared>) -> Subs {
    let mut rt = tokio::runtime::Builder::new_current_thread();
    let rt = rt.enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let mut tasks = Vec::new();
        while let Some(id) = ids.recv().await {
            tasks.push(tokio::spawn(subscribe(id, url.clone(), shared.clone())));
        }
        let mut out = Vec::with_capacity(tasks.len());
        for task in tasks {
            out.push(task.await.map_err(|e| e.to_string())?);
        }
        Ok(out)
    })
}
type Subs = Result<Vec<Sub>, String>;

/// Blocks until standard input says `final [VERSION]` (None: no version, or the end of input).
fn wait_final() -> Option<u64> {
    let lines = std::io::stdin().lock().lines().map_while(Result::ok);
    let mut finals = lines.filter_map(|l| Some(l.trim().strip_prefix("final")?.trim().to_string()));
    finals.next()?.parse().ok()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("live_subscribers: {e}");
        std::process::exit(3);
    }
}

fn run() -> Result<(), String> {
    let opts = parse_args()?;
    let arg = |k: &str| opts.get(k).cloned().ok_or(format!("missing --{k}"));
    let (agent, ready_file, token_file) = (arg("agent")?, arg("ready-file")?, arg("token-file")?);
    // The id goes into a path unencoded: the bench's ids need no percent-encoding.
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_~".contains(c);
    if agent.is_empty() || !agent.chars().all(plain) {
        return Err(format!("--agent '{agent}': not [A-Za-z0-9_~-]+"));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let num = |k: &str, v: &str| v.parse::<usize>().map_err(|e| format!("--{k} {v}: {e}"));
    let n = num("subscribers", &arg("subscribers")?)?;
    let threads = opts.get("threads").map(|v| num("threads", v));
    let threads = threads.unwrap_or(Ok(cpus))?.max(1);
    let token = std::fs::read_to_string(&token_file).map_err(|e| format!("{token_file}: {e}"))?;
    let token = token.trim().to_string();
    let url = arg("url")?;
    let host = url.strip_prefix("http://").ok_or("--url: not http://...")?;
    let host = host.trim_end_matches('/').to_string();
    let ws_url = format!("ws://{host}/v1/agents/{agent}/watch?access_token={token}");
    let ws_url: Arc<str> = ws_url.into();
    let stored = || get_state(&host, &agent, &token);
    let t0 = Instant::now();
    let cpu0 = cpu_ticks();

    let shared = Arc::<Shared>::default();
    let (mut feeds, mut workers) = (Vec::new(), Vec::new());
    for _ in 0..threads {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (url, shared) = (ws_url.clone(), shared.clone());
        let worker = std::thread::Builder::new().name("live-sub".into());
        let worker = worker.spawn(move || client_thread(rx, url, shared));
        workers.push(worker.map_err(|e| e.to_string())?);
        feeds.push(tx);
    }
    let (deadline, mut opened) = (Instant::now() + CONNECT, 0);
    while opened < n && shared.failed.load(Relaxed) == 0 {
        let batch = opened..(opened + RAMP).min(n);
        opened = batch.end;
        for id in batch {
            // A thread that failed to start drops its ids: they never connect, and are reported.
            let _ = feeds[id % threads].send(id);
        }
        let settled = || shared.ready.load(Relaxed) + shared.failed.load(Relaxed) >= opened;
        while !settled() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if shared.ready.load(Relaxed) < opened {
            break; // a failure or the deadline: the report says which
        }
    }
    drop(feeds); // no more subscribers: each thread ends when its own have
    let connected = shared.ready.load(Relaxed);
    let connect_seconds = t0.elapsed().as_secs_f64();
    let ok = connected == n;
    let ready_state = ok.then(stored).transpose()?;
    let ready_version = ready_state.and_then(|s| s["version"].as_u64());
    let ready = json!({"ok": ok, "connected": connected, "n": n, "version": ready_version,
                       "connect_seconds": connect_seconds});
    // Written whole, then renamed: run.sh never reads half of it.
    let tmp = format!("{ready_file}.tmp");
    std::fs::write(&tmp, format!("{ready}\n")).map_err(|e| format!("{tmp}: {e}"))?;
    std::fs::rename(&tmp, &ready_file).map_err(|e| format!("{ready_file}: {e}"))?;
    eprintln!("live_subscribers: {connected}/{n} have their snapshot after {connect_seconds:.2} s");

    // The writing phase: this thread waits for run.sh's `final` line; the client threads work.
    let (busy0, wall0) = (cpu_ticks(), Instant::now());
    let wanted = if ok { wait_final() } else { None };
    let busy = cpu_ticks().saturating_sub(busy0) as f64 / HZ;
    // The client threads' mean busy fraction while the writer ran (this thread only waited).
    let utilization = busy / wall0.elapsed().as_secs_f64().max(1e-9) / threads as f64;

    let target = match wanted {
        Some(v) => v,
        None => stored()?["version"].as_u64().ok_or("GET: no version")?,
    };
    let settle0 = Instant::now();
    shared.target.store(target, Relaxed);
    shared.wake.notify_waiters();
    let until = Instant::now() + if ok { SETTLE } else { Duration::from_secs(1) };
    while workers.iter().any(|w| !w.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The deadline (or all done): the stragglers report where they are.
    shared.stop.store(true, Relaxed);
    shared.wake.notify_waiters();
    let mut subs = Vec::with_capacity(n);
    for worker in workers {
        subs.extend(worker.join().map_err(|_| "a client thread panicked")??);
    }
    subs.sort_by_key(|s| s.id);
    let settle_seconds = settle0.elapsed().as_secs_f64();
    let stored = stored()?;
    let stored_version = stored["version"].as_u64();
    let cpu = cpu_ticks().saturating_sub(cpu0) as f64 / HZ;

    let sum = |f: fn(&Sub) -> u64| subs.iter().map(f).sum::<u64>();
    let count = |f: &dyn Fn(&Sub) -> bool| subs.iter().filter(|s| f(s)).count();
    let mut closes = BTreeMap::<u16, u64>::new();
    let mut error_codes = BTreeMap::<&str, u64>::new();
    let mut samples: Vec<&str> = Vec::new();
    for s in &subs {
        if let Some(code) = s.close {
            *closes.entry(code).or_default() += 1;
        }
        if let Some((kind, text)) = &s.error {
            *error_codes.entry(kind).or_default() += 1;
            if samples.len() < 5 && !samples.contains(&text.as_str()) {
                samples.push(text);
            }
        }
    }
    let behind = |s: &Sub| Some(stored_version?.saturating_sub(s.first_version?));
    let is_bad = |s: &&Sub| !(s.equal(&stored) && s.consecutive());
    let bad = subs.iter().filter(is_bad).take(5);
    let bad: Vec<Value> = bad.map(|s| s.brief(&stored)).collect();
    let never = (0..n).filter(|&i| subs.get(i).is_none_or(|s| s.first_version.is_none()));
    let report = json!({
        "client": "rust", "subscribers": n, "workers": threads, "connected": connected,
        "connect_seconds": connect_seconds, "ready_version": ready_version,
        "target_version": target, "stored_version": stored_version,
        "settle_seconds": settle_seconds, "deliveries": sum(|s| s.patches + s.replaces),
        "expected_deliveries": subs.iter().filter_map(behind).sum::<u64>(),
        "latency_samples": sum(|s| s.lat.len() as u64),
        "copies_equal": count(&|s| s.equal(&stored)),
        "versions_consecutive": count(&|s| s.consecutive()),
        "at_stored_version": count(&|s| s.version.is_some() && s.version == stored_version),
        "gaps": sum(|s| s.gaps), "skipped_versions": sum(|s| s.skipped),
        "extra_snapshots": sum(|s| s.snapshots.saturating_sub(1)), "reconnects": 0,
        "close_codes": closes, "errors": count(&|s| s.error.is_some()),
        "error_codes": error_codes, "error_samples": samples,
        "never_connected": never.take(20).collect::<Vec<_>>(),
        // Near 1.0, this process, not the server, bounds the figures.
        "event_loop_utilization": [utilization], "client_cpu_seconds": cpu,
        "client_seconds": t0.elapsed().as_secs_f64(), "bad": bad,
        "latency_ms": latency(subs.iter_mut().flat_map(|s| std::mem::take(&mut s.lat)).collect()),
    });
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}
