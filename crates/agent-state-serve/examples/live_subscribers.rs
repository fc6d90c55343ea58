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
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;
use common::{
    cpu_seconds, follow, latency, now_ms, parse, ramp, settle, start_threads, tally, wait_final,
    write_whole, Args, Crowd, End, Follower, Frame, Http, Replica,
};

const OPTIONS: &str = "url agent token-file subscribers ready-file threads";
const RAMP: usize = 100;
const CONNECT: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(30);

/// What every subscriber reads to know when to stop.
#[derive(Default)]
struct Shared {
    crowd: Crowd,
    /// The version to stop at (0: not known yet; a watched agent is at 1 or more).
    target: AtomicU64,
}

/// One subscriber's copy and counts, returned by its task.
struct Sub {
    id: usize,
    copy: Replica,
    end: End,
    shared: Arc<Shared>,
}

/// One frame, parsed, and its text (to tell the same frame again).
struct Parsed {
    text: String,
    frame: Frame,
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

impl Follower for Sub {
    /// One text frame: parsed (or found parsed), checked and merged into the copy.
    fn on_text(&mut self, text: &str, crowd: &Crowd) -> Result<(), String> {
        let received = now_ms();
        let next = self.copy.version.map_or(0, |v| v + 1);
        let slot = next as usize % RING;
        let hit = PARSED.with(|ring| ring.borrow()[slot].clone());
        let p = match hit.filter(|p| p.frame.version == next && p.text == text) {
            Some(p) => p,
            None => Rc::new(Parsed {
                text: text.to_string(),
                frame: parse(text)?,
            }),
        };
        if p.frame.kind == "patch" || p.frame.kind == "replace" {
            let slot = p.frame.version as usize % RING;
            PARSED.with(|ring| ring.borrow_mut()[slot] = Some(p.clone()));
        }
        self.copy.apply(&p.frame, received, crowd)
    }

    fn done(&self) -> bool {
        let target = self.shared.target.load(Relaxed);
        target > 0 && self.copy.version.is_some_and(|v| v >= target)
    }
}

/// One subscriber, from its connection until the target version (or stop).
async fn subscribe(id: usize, url: Arc<str>, shared: Arc<Shared>) -> Sub {
    let mut s = Sub {
        id,
        copy: Replica::default(),
        end: End::default(),
        shared: shared.clone(),
    };
    s.end = follow(&url, &shared.crowd, &mut s).await;
    if s.copy.first_version.is_none() {
        shared.crowd.failed.fetch_add(1, Relaxed);
    }
    s
}

fn main() {
    common::exit_on_error("live_subscribers", run());
}

fn run() -> Result<(), String> {
    let args = Args::parse(OPTIONS)?;
    let (agent, ready_file) = (args.id("agent")?, args.get("ready-file")?);
    let n = args.num("subscribers")?;
    let (host, token, threads) = (&args.host, &args.token, args.threads);
    let ws_url = format!("ws://{host}/v1/agents/{agent}/watch?access_token={token}");
    let ws_url: Arc<str> = ws_url.into();
    let stored = || Http::connect(host, token, SETTLE)?.get(&format!("/v1/agents/{agent}"));
    let t0 = Instant::now();
    let cpu0 = cpu_seconds();

    let shared = Arc::<Shared>::default();
    let task = {
        let shared = shared.clone();
        move |id| subscribe(id, ws_url.clone(), shared.clone())
    };
    let (feeds, workers) = start_threads(threads, task)?;
    let connected = ramp(n, RAMP, feeds, &shared.crowd, Instant::now() + CONNECT);
    let connect_seconds = t0.elapsed().as_secs_f64();
    let ok = connected == n;
    let ready_state = ok.then(stored).transpose()?;
    let ready_version = ready_state.and_then(|s| s["version"].as_u64());
    let ready = json!({"ok": ok, "connected": connected, "n": n, "version": ready_version,
                       "connect_seconds": connect_seconds});
    write_whole(&ready_file, &ready)?;
    eprintln!("live_subscribers: {connected}/{n} have their snapshot after {connect_seconds:.2} s");

    // The writing phase: this thread waits for run.sh's `final` line; the client threads work.
    let (busy0, wall0) = (cpu_seconds(), Instant::now());
    let wanted = if ok { wait_final() } else { None };
    let busy = cpu_seconds() - busy0;
    // The client threads' mean busy fraction while the writer ran (this thread only waited).
    let utilization = busy / wall0.elapsed().as_secs_f64().max(1e-9) / threads as f64;

    let target = match wanted {
        Some(v) => v,
        None => stored()?["version"].as_u64().ok_or("GET: no version")?,
    };
    let settle0 = Instant::now();
    shared.target.store(target, Relaxed);
    let until = Instant::now() + if ok { SETTLE } else { Duration::from_secs(1) };
    let mut subs = settle(workers, &shared.crowd, until)?;
    subs.sort_by_key(|s| s.id);
    let settle_seconds = settle0.elapsed().as_secs_f64();
    let stored = stored()?;
    let stored_version = stored["version"].as_u64();
    let cpu = cpu_seconds() - cpu0;

    let sum = |f: fn(&Replica) -> u64| subs.iter().map(|s| f(&s.copy)).sum::<u64>();
    let count = |f: &dyn Fn(&Replica) -> bool| subs.iter().filter(|s| f(&s.copy)).count();
    let behind = |s: &Sub| Some(stored_version?.saturating_sub(s.copy.first_version?));
    let is_bad = |s: &&Sub| !(s.copy.equal(&stored) && s.copy.consecutive());
    let bad = subs.iter().filter(is_bad).take(5);
    let bad = bad.map(|s| json!({"id": s.id, "copy": s.copy.brief(&stored, &s.end)}));
    let bad: Vec<Value> = bad.collect();
    let never = (0..n).filter(|&i| subs.get(i).is_none_or(|s| s.copy.first_version.is_none()));
    let mut report = json!({
        "client": "rust", "subscribers": n, "workers": threads, "connected": connected,
        "connect_seconds": connect_seconds, "ready_version": ready_version,
        "target_version": target, "stored_version": stored_version,
        "settle_seconds": settle_seconds, "deliveries": sum(|c| c.patches + c.replaces),
        "expected_deliveries": subs.iter().filter_map(behind).sum::<u64>(),
        "latency_samples": sum(|c| c.lat.len() as u64),
        "copies_equal": count(&|c| c.equal(&stored)),
        "versions_consecutive": count(&|c| c.consecutive()),
        "at_stored_version": count(&|c| c.version.is_some() && c.version == stored_version),
        "gaps": sum(|c| c.gaps), "skipped_versions": sum(|c| c.skipped),
        "extra_snapshots": sum(|c| c.snapshots.saturating_sub(1)), "reconnects": 0,
        "never_connected": never.take(20).collect::<Vec<_>>(),
        // Near 1.0, this process, not the server, bounds the figures.
        "event_loop_utilization": [utilization], "client_cpu_seconds": cpu,
        "client_seconds": t0.elapsed().as_secs_f64(), "bad": bad,
    });
    report["latency_ms"] = latency(subs.iter_mut().flat_map(|s| s.copy.lat.drain(..)).collect());
    if let Value::Object(fields) = &mut report {
        fields.extend(tally(subs.iter().map(|s| &s.end)));
    }
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}
