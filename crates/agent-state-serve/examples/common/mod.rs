//! What the load bench's two clients share (examples/live_subscribers.rs: many streams on one
//! agent; examples/fleet_subscribers.rs: one stream on each of many agents): the client
//! threads and the connection ramp, a watch stream's read loop, the merge of a patch into a
//! copy, plain HTTP GETs to read the stored state, the process's CPU time, percentiles, the
//! command line and the `final` line run.sh sends.
//!
//! Each example uses most of it, not all: what one does not use is not dead code.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::{protocol::WebSocketConfig, Message};

/// What every subscriber reads to know when to stop, and the counts the ramp waits on.
#[derive(Default)]
pub struct Crowd {
    /// Subscribers with their first snapshot, and those that ended before one.
    pub ready: AtomicUsize,
    pub failed: AtomicUsize,
    /// Stop now, wherever the copy is (the settle deadline passed).
    pub stop: AtomicBool,
    /// Wakes the subscribers waiting for no message (to look at their target, or stop).
    pub wake: Notify,
}

/// One subscriber's side of a stream: what it does with a text frame, and when it is done.
pub trait Follower {
    fn on_text(&mut self, text: &str, crowd: &Crowd) -> Result<(), String>;
    /// Checked before each frame and whenever the crowd is woken.
    fn done(&self) -> bool;
}

/// How a stream ended, when not by its subscriber being done.
#[derive(Default)]
pub struct End {
    /// The close code the server sent (1005: none in the frame, 1006: no close frame).
    pub close: Option<u16>,
    /// ("connect" | "read" | "bad_message", the text).
    pub error: Option<(&'static str, String)>,
}

/// Follows the stream at `url` until `f` is done, the crowd stops or the stream ends. No
/// reconnects: a healthy run has none, so a close or an error ends the stream and is counted,
/// not repaired.
pub async fn follow(url: &str, crowd: &Crowd, f: &mut impl Follower) -> End {
    let mut end = End::default();
    // The server writes; this side only reads. 4 KiB as the server does: tungstenite zero-fills
    // its read buffer, and the default 128 KiB one costs more than the frames in it.
    let config = WebSocketConfig::default().read_buffer_size(4096);
    let connecting = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
    let mut ws = match connecting.await {
        Ok((ws, _)) => ws,
        Err(e) => {
            end.error = Some(("connect", e.to_string()));
            return end;
        }
    };
    // Created before the loop and polled in place: registering a waiter once, not per message.
    let wake = crowd.wake.notified();
    tokio::pin!(wake);
    while !crowd.stop.load(Relaxed) && !f.done() {
        tokio::select! {
            biased;
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(text))) => {
                    if let Err(e) = f.on_text(text.as_str(), crowd) {
                        end.error = Some(("bad_message", e));
                        break;
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    end.close = Some(frame.map_or(1005, |f| f.code.into()));
                    break;
                }
                Some(Ok(_)) => {} // WebSocket pings: tungstenite answers them itself
                Some(Err(e)) => {
                    end.error = Some(("read", e.to_string()));
                    break;
                }
                None => {
                    end.close = Some(1006); // the socket ended without a close frame
                    break;
                }
            },
            () = &mut wake => wake.set(crowd.wake.notified()),
        }
    }
    if end.close.is_none() && end.error.is_none() {
        // A close frame, so the server sees a goodbye, not a broken socket.
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
    }
    end
}

/// The close codes, error kinds and a few error texts of the streams that ended early, as the
/// reports name them: {"close_codes", "errors", "error_codes", "error_samples"}.
pub fn tally<'a>(ends: impl Iterator<Item = &'a End>) -> Map<String, Value> {
    let mut closes = BTreeMap::<u16, u64>::new();
    let mut error_codes = BTreeMap::<&str, u64>::new();
    let mut samples: Vec<&str> = Vec::new();
    let mut errors = 0;
    for end in ends {
        if let Some(code) = end.close {
            *closes.entry(code).or_default() += 1;
        }
        if let Some((kind, text)) = &end.error {
            errors += 1;
            *error_codes.entry(kind).or_default() += 1;
            if samples.len() < 5 && !samples.contains(&text.as_str()) {
                samples.push(text);
            }
        }
    }
    let out = json!({"close_codes": closes, "errors": errors, "error_codes": error_codes,
                     "error_samples": samples});
    let Value::Object(out) = out else {
        unreachable!()
    };
    out
}

/// The client threads' results: each thread's subscribers, or why the thread failed.
pub type Workers<T> = Vec<JoinHandle<Result<Vec<T>, String>>>;

/// Starts `threads` client threads, each a current-thread runtime running `task(i)` for every
/// subscriber number `i` it is sent, until its sender is dropped and those tasks have ended.
/// Not one work-stealing runtime: allocations are freed by the thread that made them, and a
/// thread's caches need no lock.
pub fn start_threads<T, F, Fut>(
    threads: usize,
    task: F,
) -> Result<(Vec<UnboundedSender<usize>>, Workers<T>), String>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let (mut feeds, mut workers) = (Vec::new(), Vec::new());
    for _ in 0..threads {
        let (tx, mut ids) = unbounded_channel::<usize>();
        let task = task.clone();
        let run = move || {
            let mut rt = tokio::runtime::Builder::new_current_thread();
            let rt = rt.enable_all().build().map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let mut tasks = Vec::new();
                while let Some(i) = ids.recv().await {
                    tasks.push(tokio::spawn(task(i)));
                }
                let mut out = Vec::with_capacity(tasks.len());
                for t in tasks {
                    out.push(t.await.map_err(|e| e.to_string())?);
                }
                Ok(out)
            })
        };
        let worker = std::thread::Builder::new().name("bench-sub".into());
        workers.push(worker.spawn(run).map_err(|e| e.to_string())?);
        feeds.push(tx);
    }
    Ok((feeds, workers))
}

/// Connects subscribers 0..n over the threads in batches of `batch`, each batch waited for
/// (every subscriber has its first snapshot, or failed) until `deadline`: an accept burst is
/// not what is measured. Stops at the first failure. Drops the feeds (each thread then ends
/// when its subscribers have) and returns how many have their snapshot.
pub fn ramp(
    n: usize,
    batch: usize,
    feeds: Vec<UnboundedSender<usize>>,
    crowd: &Crowd,
    deadline: Instant,
) -> usize {
    let mut opened = 0;
    while opened < n && crowd.failed.load(Relaxed) == 0 {
        let ids = opened..(opened + batch).min(n);
        opened = ids.end;
        for i in ids {
            // A thread that failed to start drops its ids: they never connect, and are reported.
            let _ = feeds[i % feeds.len()].send(i);
        }
        let settled = || crowd.ready.load(Relaxed) + crowd.failed.load(Relaxed) >= opened;
        while !settled() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if crowd.ready.load(Relaxed) < opened {
            break; // a failure or the deadline: the report says which
        }
    }
    crowd.ready.load(Relaxed)
}

/// Wakes the subscribers (their targets are set), waits until every thread has ended or
/// `until`, then stops the stragglers (they report where they are) and gathers every
/// subscriber's result.
pub fn settle<T>(workers: Workers<T>, crowd: &Crowd, until: Instant) -> Result<Vec<T>, String> {
    crowd.wake.notify_waiters();
    while workers.iter().any(|w| !w.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    crowd.stop.store(true, Relaxed);
    crowd.wake.notify_waiters();
    let mut out = Vec::new();
    for worker in workers {
        out.extend(worker.join().map_err(|_| "a client thread panicked")??);
    }
    Ok(out)
}

/// One frame of a watch stream: its type, version and payload (the patch or the state).
pub struct Frame {
    pub kind: String,
    pub version: u64,
    pub body: Value,
}

pub fn parse(text: &str) -> Result<Frame, String> {
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
    let body = body.unwrap_or(Value::Null);
    Ok(Frame {
        kind,
        version,
        body,
    })
}

/// The wall-clock time in ms since the epoch (the writers stamp their patches with it).
pub fn now_ms() -> f64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH);
    now.unwrap_or_default().as_secs_f64() * 1000.0
}

/// A subscriber's copy of one agent, made of the frames it received, and their counts.
#[derive(Default)]
pub struct Replica {
    pub state: Value,
    pub version: Option<u64>,
    pub first_version: Option<u64>,
    pub snapshots: u64,
    pub patches: u64,
    pub replaces: u64,
    /// Changes whose version is not the previous one's plus one.
    pub gaps: u64,
    /// Versions a later snapshot jumped over.
    pub skipped: u64,
    /// Each patch's delivery latency (received minus its `t`), ms.
    pub lat: Vec<f64>,
}

impl Replica {
    /// One frame, `received` at that wall-clock time: checked and applied to the copy. The
    /// first snapshot counts the subscriber ready.
    pub fn apply(&mut self, f: &Frame, received: f64, crowd: &Crowd) -> Result<(), String> {
        match (f.kind.as_str(), self.version) {
            ("ping", _) => return Ok(()),
            ("snapshot", None) => {
                self.first_version = Some(f.version);
                crowd.ready.fetch_add(1, Relaxed);
            }
            ("snapshot", Some(v)) => self.skipped += f.version.saturating_sub(v + 1),
            ("patch" | "replace", v) if v.map(|v| v + 1) != Some(f.version) => self.gaps += 1,
            ("patch" | "replace", _) => {}
            (kind, _) => return Err(format!("unexpected type {kind}")),
        }
        if f.kind == "patch" {
            if let Some(sent) = f.body.get("t").and_then(Value::as_f64) {
                self.lat.push(received - sent);
            }
            self.patches += 1;
            merge(&mut self.state, &f.body);
        } else {
            self.snapshots += u64::from(f.kind == "snapshot");
            self.replaces += u64::from(f.kind == "replace");
            self.state = f.body.clone();
        }
        self.version = Some(f.version);
        Ok(())
    }

    /// The copy and its version are `stored`'s ({"version":V,"state":STATE}).
    pub fn equal(&self, stored: &Value) -> bool {
        self.version.is_some()
            && self.version == stored["version"].as_u64()
            && self.state == stored["state"]
    }

    /// Every version from the first snapshot's on, each once.
    pub fn consecutive(&self) -> bool {
        let span = self.version.zip(self.first_version);
        let span = span.map(|(v, first)| v - first);
        self.gaps == 0 && self.skipped == 0 && span == Some(self.patches + self.replaces)
    }

    /// What the report shows of a subscriber that failed a check.
    pub fn brief(&self, stored: &Value, end: &End) -> Value {
        json!({"first_version": self.first_version, "version": self.version,
               "stored_version": stored["version"], "equal": self.equal(stored),
               "snapshots": self.snapshots, "patches": self.patches, "replaces": self.replaces,
               "gaps": self.gaps, "skipped": self.skipped, "close": end.close,
               "error": end.error})
    }
}

/// RFC 7396 on `target` in place: only the members the patch names are touched (a patch of one
/// item costs that item, not a copy of the state), and only what is stored is cloned.
pub fn merge(target: &mut Value, patch: &Value) {
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

/// One HTTP/1.1 connection to the server, kept alive across GETs (ten thousand reads of the
/// stored states would otherwise be ten thousand sockets left in TIME_WAIT beside the streams).
pub struct Http {
    host: String,
    token: String,
    conn: BufReader<TcpStream>,
}

impl Http {
    pub fn connect(host: &str, token: &str, timeout: Duration) -> Result<Http, String> {
        let err = |e: std::io::Error| format!("connect {host}: {e}");
        let tcp = TcpStream::connect(host).map_err(err)?;
        tcp.set_read_timeout(Some(timeout)).map_err(err)?;
        Ok(Http {
            host: host.to_string(),
            token: token.to_string(),
            conn: BufReader::new(tcp),
        })
    }

    /// `GET path`: the JSON body of a 200 answer, else an error naming the status and the body.
    pub fn get(&mut self, path: &str) -> Result<Value, String> {
        let err = |e: std::io::Error| format!("GET {path}: {e}");
        let (host, token) = (&self.host, &self.token);
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n");
        self.conn
            .get_mut()
            .write_all(request.as_bytes())
            .map_err(err)?;
        let mut status = String::new();
        self.conn.read_line(&mut status).map_err(err)?;
        let mut length = None;
        loop {
            let mut line = String::new();
            if self.conn.read_line(&mut line).map_err(err)? == 0 {
                return Err(format!("GET {path}: the connection ended in the headers"));
            }
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("content-length:") {
                length = n.trim().parse::<usize>().ok();
            }
        }
        // The server's JSON bodies have a length: a chunked one is not what PROTOCOL.md says.
        let length = length.ok_or(format!("GET {path}: {} without a length", status.trim()))?;
        let mut body = vec![0; length];
        self.conn.read_exact(&mut body).map_err(err)?;
        if !status.starts_with("HTTP/1.1 200") {
            let body = String::from_utf8_lossy(&body);
            return Err(format!("GET {path}: {} {body:.200}", status.trim()));
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))
    }
}

/// This process's CPU time in seconds (utime + stime). USER_HZ is 100 on every Linux ABI, and
/// reading sysconf would take the unsafe code this workspace denies.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The name (field 2) may hold spaces: fields 14 and 15 counted after its ')'.
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 / 100.0
}

/// p50, p90, p99, min and max of the samples (null when there are none).
pub fn latency(mut lat: Vec<f64>) -> Value {
    lat.sort_unstable_by(f64::total_cmp);
    let at = |p: f64| {
        let last = lat.len().checked_sub(1)?;
        let i = ((p / 100.0 * last as f64).round() as usize).min(last);
        lat.get(i).copied()
    };
    json!({"p50": at(50.0), "p90": at(90.0), "p99": at(99.0), "max": lat.last(),
           "min": lat.first()})
}

/// The command line both clients share: `--url http://HOST:PORT --token-file F
/// [--threads T]` and their own `--key value` options (each key one of `options`,
/// space-separated, which must name url, token-file and threads).
pub struct Args {
    opts: HashMap<String, String>,
    /// HOST:PORT of the server.
    pub host: String,
    pub token: String,
    /// The client threads (default: one per CPU).
    pub threads: usize,
}

impl Args {
    pub fn parse(options: &str) -> Result<Args, String> {
        let mut opts = HashMap::new();
        let mut argv = std::env::args().skip(1);
        while let Some(k) = argv.next() {
            let known = |key: &&str| options.split(' ').any(|o| o == *key);
            let key = k.strip_prefix("--").filter(known);
            let key = key.ok_or(format!("unknown argument '{k}'"))?.to_string();
            let value = argv.next().ok_or(format!("{k} needs a value"))?;
            opts.insert(key, value);
        }
        let mut args = Args {
            opts,
            host: String::new(),
            token: String::new(),
            threads: 1,
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        args.threads = match args.opts.contains_key("threads") {
            true => args.num("threads")?.max(1),
            false => cpus,
        };
        let token_file = args.get("token-file")?;
        let token = std::fs::read_to_string(&token_file);
        args.token = token
            .map_err(|e| format!("{token_file}: {e}"))?
            .trim()
            .to_string();
        let url = args.get("url")?;
        let host = url.strip_prefix("http://").ok_or("--url: not http://...")?;
        args.host = host.trim_end_matches('/').to_string();
        Ok(args)
    }

    /// Option `key`'s value (an error when it was not given).
    pub fn get(&self, key: &str) -> Result<String, String> {
        self.opts
            .get(key)
            .cloned()
            .ok_or(format!("missing --{key}"))
    }

    pub fn num(&self, key: &str) -> Result<usize, String> {
        let v = self.get(key)?;
        v.parse::<usize>().map_err(|e| format!("--{key} {v}: {e}"))
    }

    /// Option `key`'s value, an agent id or prefix that goes into a path unencoded: the
    /// bench's ids need no percent-encoding.
    pub fn id(&self, key: &str) -> Result<String, String> {
        let id = self.get(key)?;
        match plain_id(&id) {
            true => Ok(id),
            false => Err(format!("--{key} '{id}': not [A-Za-z0-9_~-]+")),
        }
    }
}

/// Blocks until standard input says `final [VERSION]` (None: no version, or the end of input).
pub fn wait_final() -> Option<u64> {
    let lines = std::io::stdin().lock().lines().map_while(Result::ok);
    let mut finals = lines.filter_map(|l| Some(l.trim().strip_prefix("final")?.trim().to_string()));
    finals.next()?.parse().ok()
}

/// An id that goes into a path as it is: the bench's ids need no percent-encoding.
pub fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_~".contains(c))
}

/// Exits with status 3 and the error on standard error, prefixed with the program's name, when
/// the program failed.
pub fn exit_on_error(name: &str, result: Result<(), String>) {
    if let Err(e) = result {
        eprintln!("{name}: {e}");
        std::process::exit(3);
    }
}

/// Writes `value` and a newline to `path` whole (written, then renamed: run.sh never reads
/// half of it).
pub fn write_whole(path: &str, value: &Value) -> Result<(), String> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, format!("{value}\n")).map_err(|e| format!("{tmp}: {e}"))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{path}: {e}"))
}
