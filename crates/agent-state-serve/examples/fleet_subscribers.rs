//! The subscribers of the fleet bench (bench/live/fleet.sh, `bench/live/run.sh --fleet`): one
//! process holding one watch stream on each of many agents (ten thousand), each a tokio task
//! keeping its own copy (spread over T threads). The protocol has one agent per stream, so each
//! stream is its own connection.
//!
//!   fleet_subscribers --url http://HOST:PORT --token-file F --prefix P --expect N
//!                     --ready-file PATH [--threads T (default: one per CPU)]
//!
//! 1. Lists the agents whose id starts with P (`GET /v1/agents?prefix=P`, page by page): there
//!    must be N.
//! 2. Opens their streams in batches of 250, each batch waited for (every stream has its first
//!    snapshot, or failed; 60 s and 50 ms a stream at most in all): an accept burst is not what
//!    is measured. Then writes the ready file, whole: {"ok":true,"connected":N,...}.
//! 3. Reads standard input: a line `mark NAME` records the changes delivered, the pings and this
//!    process's CPU time so far under NAME (fleet.sh marks the idle phase's ends: no change is
//!    delivered while nothing is written); a line `final` (or the end of input) says the writer
//!    is done. Then reads every agent's stored state (`GET /v1/agents/{id}` over T kept-alive
//!    connections), waits (60 s at most) until each stream's copy is at its agent's stored
//!    version, deep-compares every copy and version with the stored ones and prints one JSON
//!    object on standard output (fleet_report.py judges it).
//!
//! A copy is made only of the frames its stream received: the first snapshot, then each patch
//! merged (RFC 7396) or replacement taken, each version checked to be the previous one's plus
//! one. No reconnects: a healthy run has none. Exit 0 when the figures were printed, 3 when the
//! harness failed.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;
use common::{
    cpu_seconds, follow, latency, now_ms, parse, plain_id, ramp, settle, start_threads, tally,
    write_whole, Args, Crowd, End, Follower, Http, Replica,
};

const OPTIONS: &str = "url token-file prefix expect ready-file threads";
const RAMP: usize = 250;
const CONNECT: Duration = Duration::from_secs(60);
const CONNECT_PER_STREAM: Duration = Duration::from_millis(50);
const SETTLE: Duration = Duration::from_secs(60);
/// The server's largest page of the listing.
const PAGE: usize = 10_000;

/// What every subscriber reads to know when to stop, and counts of what was received.
struct Shared {
    crowd: Crowd,
    /// Each stream's agent's stored version once the writer is done (0: not known yet).
    targets: Vec<AtomicU64>,
    /// Changes (patches, JSON Patches, replacements, later snapshots) and pings received.
    changes: AtomicU64,
    pings: AtomicU64,
}

/// One stream's copy and counts, returned by its task.
struct Sub {
    i: usize,
    copy: Replica,
    end: End,
    shared: Arc<Shared>,
}

impl Follower for Sub {
    fn on_text(&mut self, text: &str, crowd: &Crowd) -> Result<(), String> {
        let received = now_ms();
        let frame = parse(text)?;
        let counter = match (frame.kind.as_str(), self.copy.version) {
            ("ping", _) => Some(&self.shared.pings),
            ("snapshot", None) => None, // the first: not a change
            _ => Some(&self.shared.changes),
        };
        counter.map(|c| c.fetch_add(1, Relaxed));
        self.copy.apply(&frame, received, crowd)
    }

    fn done(&self) -> bool {
        let target = self.shared.targets[self.i].load(Relaxed);
        target > 0 && self.copy.version.is_some_and(|v| v >= target)
    }
}

/// One stream, from its connection until its agent's stored version (or stop).
async fn subscribe(i: usize, url: Arc<str>, shared: Arc<Shared>) -> Sub {
    let mut s = Sub {
        i,
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

/// The ids of the agents whose id starts with `prefix`, in order.
fn list(http: &mut Http, prefix: &str) -> Result<Vec<String>, String> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut path = format!("/v1/agents?prefix={prefix}&limit={PAGE}");
        if let Some(a) = &after {
            path.push_str(&format!("&after={a}"));
        }
        let page = http.get(&path)?;
        let agents = page["agents"]
            .as_array()
            .ok_or("the listing has no agents array")?;
        for agent in agents {
            let id = agent["id"].as_str().ok_or("a listed agent has no id")?;
            if !plain_id(id) {
                return Err(format!("agent id '{id}': not [A-Za-z0-9_~-]+"));
            }
            ids.push(id.to_string());
        }
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => return Ok(ids),
        }
    }
}

/// Every agent's stored {"version":V,"state":STATE}, read over `threads` connections at once.
fn read_all(host: &str, token: &str, ids: &[String], threads: usize) -> Result<Vec<Value>, String> {
    let chunk = ids.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let parts: Vec<_> = ids
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut http = Http::connect(host, token, SETTLE)?;
                    let read = |id: &String| http.get(&format!("/v1/agents/{id}"));
                    part.iter()
                        .map(read)
                        .collect::<Result<Vec<Value>, String>>()
                })
            })
            .collect();
        let mut all = Vec::with_capacity(ids.len());
        for part in parts {
            all.extend(part.join().map_err(|_| "a reading thread panicked")??);
        }
        Ok(all)
    })
}

/// Reads standard input until `final` or its end, recording each `mark NAME` line's counts.
fn wait_final(shared: &Shared) -> BTreeMap<String, Value> {
    let mut marks = BTreeMap::new();
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let line = line.trim();
        if line.starts_with("final") {
            break;
        }
        if let Some(name) = line.strip_prefix("mark ") {
            let at = json!({"changes": shared.changes.load(Relaxed),
                            "pings": shared.pings.load(Relaxed),
                            "client_cpu_seconds": cpu_seconds(), "at_ms": now_ms()});
            marks.insert(name.trim().to_string(), at);
        }
    }
    marks
}

fn main() {
    common::exit_on_error("fleet_subscribers", run());
}

fn run() -> Result<(), String> {
    let args = Args::parse(OPTIONS)?;
    let (prefix, ready_file) = (args.id("prefix")?, args.get("ready-file")?);
    let expect = args.num("expect")?;
    let (host, token, threads) = (&args.host, &args.token, args.threads);
    let t0 = Instant::now();
    let cpu0 = cpu_seconds();

    let ids = list(&mut Http::connect(host, token, SETTLE)?, &prefix)?;
    if ids.len() != expect {
        return Err(format!(
            "{} agents start with '{prefix}', not {expect}",
            ids.len()
        ));
    }
    let n = ids.len();
    let urls: Arc<Vec<Arc<str>>> = Arc::new(
        ids.iter()
            .map(|id| format!("ws://{host}/v1/agents/{id}/watch?access_token={token}").into())
            .collect(),
    );
    let shared = Arc::new(Shared {
        crowd: Crowd::default(),
        targets: (0..n).map(|_| AtomicU64::new(0)).collect(),
        changes: AtomicU64::new(0),
        pings: AtomicU64::new(0),
    });
    let task = {
        let shared = shared.clone();
        move |i: usize| subscribe(i, urls[i].clone(), shared.clone())
    };
    let (feeds, workers) = start_threads(threads, task)?;
    let deadline = Instant::now() + CONNECT + CONNECT_PER_STREAM * n as u32;
    let connected = ramp(n, RAMP, feeds, &shared.crowd, deadline);
    let connect_seconds = t0.elapsed().as_secs_f64();
    let ok = connected == n;
    let ready = json!({"ok": ok, "connected": connected, "n": n,
                       "connect_seconds": connect_seconds});
    write_whole(&ready_file, &ready)?;
    eprintln!(
        "fleet_subscribers: {connected}/{n} have their snapshot after {connect_seconds:.2} s"
    );

    // The idle and writing phases: this thread reads fleet.sh's lines; the client threads work.
    let (busy0, wall0) = (cpu_seconds(), Instant::now());
    let marks = if ok {
        wait_final(&shared)
    } else {
        BTreeMap::new()
    };
    let busy = cpu_seconds() - busy0;
    // The client threads' mean busy fraction meanwhile (this thread only waited).
    let utilization = busy / wall0.elapsed().as_secs_f64().max(1e-9) / threads as f64;

    let read0 = Instant::now();
    let stored = read_all(host, token, &ids, threads)?;
    let read_seconds = read0.elapsed().as_secs_f64();
    for (target, s) in shared.targets.iter().zip(&stored) {
        target.store(s["version"].as_u64().ok_or("GET: no version")?, Relaxed);
    }
    let settle0 = Instant::now();
    let until = Instant::now() + if ok { SETTLE } else { Duration::from_secs(1) };
    let mut subs = settle(workers, &shared.crowd, until)?;
    subs.sort_by_key(|s| s.i);
    let settle_seconds = settle0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;

    // A stream that never connected has no result: it counts as unequal.
    let pairs = || subs.iter().map(|s| (s, &stored[s.i]));
    let sum = |f: fn(&Replica) -> u64| subs.iter().map(|s| f(&s.copy)).sum::<u64>();
    let equal = pairs().filter(|(s, st)| s.copy.equal(st)).count();
    let at_stored = pairs().filter(|(s, st)| s.copy.version == st["version"].as_u64());
    let at_stored = at_stored.count();
    let consecutive = subs.iter().filter(|s| s.copy.consecutive()).count();
    let bad = pairs().filter(|(s, st)| !(s.copy.equal(st) && s.copy.consecutive()));
    let bad = bad.take(5);
    let bad = bad.map(|(s, st)| json!({"agent": ids[s.i], "copy": s.copy.brief(st, &s.end)}));
    let bad: Vec<Value> = bad.collect();
    let never = (0..n).filter(|&i| subs.get(i).is_none_or(|s| s.copy.first_version.is_none()));
    let never: Vec<&String> = never.take(20).map(|i| &ids[i]).collect();
    let behind = |(s, st): (&Sub, &Value)| {
        Some(
            st["version"]
                .as_u64()?
                .saturating_sub(s.copy.first_version?),
        )
    };
    let mut report = json!({
        "client": "rust", "agents": n, "subscribers": n, "workers": threads,
        "connected": connected, "connect_seconds": connect_seconds,
        "deliveries": sum(|c| c.patches + c.replaces),
        "expected_deliveries": pairs().filter_map(behind).sum::<u64>(),
        "changes_received": shared.changes.load(Relaxed),
        "pings_received": shared.pings.load(Relaxed),
        "latency_samples": sum(|c| c.lat.len() as u64),
        "copies_equal": equal, "versions_consecutive": consecutive,
        "at_stored_version": at_stored, "gaps": sum(|c| c.gaps),
        "skipped_versions": sum(|c| c.skipped),
        "extra_snapshots": sum(|c| c.snapshots.saturating_sub(1)),
        "never_connected": never, "marks": marks, "read_seconds": read_seconds,
        "settle_seconds": settle_seconds, "busy_fraction": utilization,
        "client_cpu_seconds": cpu, "client_seconds": t0.elapsed().as_secs_f64(), "bad": bad,
    });
    report["latency_ms"] = latency(subs.iter_mut().flat_map(|s| s.copy.lat.drain(..)).collect());
    if let Value::Object(fields) = &mut report {
        fields.extend(tally(subs.iter().map(|s| &s.end)));
    }
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}
