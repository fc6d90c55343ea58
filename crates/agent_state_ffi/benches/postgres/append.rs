//! Appending to a list that grows, on PostgreSQL (as abi/append.rs on SQLite): 400 appends of
//! one ~200-byte message to a conversation's list from ~1 KiB and from 256 KiB, by JSON Patch
//! (`[{"op":"add","path":"/messages/-",...}]`) and by RFC 7396 (the whole list again); and the
//! bytes our client sends the server per append, counted by postgres/bytes.rs's proxy: with
//! delta storage (the change log off) an append should send its operation and a constant,
//! whatever the list has grown to.

use std::path::Path;
use std::time::Instant;

#[path = "../support/conversation.rs"]
mod conversation;

use conversation::{append_rows, Conversation, APPENDS, STARTS};

use super::bytes::{param, with_host, Proxy};
use super::support::{median, Args, Row};
use super::{ours, prefix};

/// How much more than at ~1 KiB an append from 256 KiB may send beyond its operation: what a
/// write sends beside the operation (the statements' framing and SQL, the agent's key, the
/// version check, and each append's share of the full states sent as new bases) at most 10%
/// more than the same at ~1 KiB.
pub(crate) const CONSTANT_SLACK: f64 = 1.1;

/// The bytes sent per append of one run: from the state size `size`, to `end`.
pub(crate) struct Sent {
    pub size: usize,
    pub end: usize,
    /// Mean, median and largest bytes sent per append by JSON Patch, and the mean by RFC 7396.
    pub mean: f64,
    pub median: f64,
    pub max: u64,
    pub merge_mean: f64,
}

/// The bytes-per-append figures: the operation's mean size and a run from each start.
pub(crate) struct BytesPerAppend {
    pub operation: f64,
    pub appends: usize,
    pub runs: Vec<Sent>,
}

impl BytesPerAppend {
    /// The target: the bytes an append from 256 KiB sends beyond its operation at most
    /// [`CONSTANT_SLACK`] times what one from ~1 KiB sends beyond it.
    pub(crate) fn limit(&self) -> f64 {
        self.operation + CONSTANT_SLACK * (self.runs[0].mean - self.operation)
    }
    pub(crate) fn verdict(&self) -> &'static str {
        if self.runs[self.runs.len() - 1].mean <= self.limit() {
            "PASS"
        } else {
            "MISS"
        }
    }
    /// Lines of the printed output, and the JSON member postgres.json carries.
    pub(crate) fn report(&self) -> (String, String) {
        let mut line = String::new();
        let mut json = String::from(r#","bytes_per_append":{"runs":["#);
        for (i, s) in self.runs.iter().enumerate() {
            line.push_str(&format!(
                "bytes sent per append of one {} B message (operation {:.0} B) to a list from {} KiB to {} KiB: JSON Patch {:.0} B mean (median {:.0} B, largest {} B), RFC 7396 {:.0} B mean\n",
                conversation::MESSAGE_BYTES,
                self.operation,
                s.size / 1024,
                s.end / 1024,
                s.mean,
                s.median,
                s.max,
                s.merge_mean
            ));
            if i > 0 {
                json.push(',');
            }
            json.push_str(&format!(
                r#"{{"state_bytes":{},"end_bytes":{},"mean":{:.1},"median":{:.1},"max":{},"merge_mean":{:.1}}}"#,
                s.size, s.end, s.mean, s.median, s.max, s.merge_mean
            ));
        }
        line.push_str(&format!(
            "bytes sent per append from 256 KiB: {:.0} B; target ≤ the operation + {CONSTANT_SLACK} × (what one from 1 KiB sends beyond it) = {:.0} B: {}",
            self.runs[self.runs.len() - 1].mean,
            self.limit(),
            self.verdict()
        ));
        json.push_str(&format!(
            r#"],"operation_bytes":{:.1},"appends":{},"slack":{CONSTANT_SLACK},"limit":{:.1},"verdict":"{}"}}"#,
            self.operation,
            self.appends,
            self.limit(),
            self.verdict()
        ));
        (line, json)
    }
}

/// The bytes sent per append, through a proxy in front of the server at `uri` (a Unix socket,
/// as bench/run.sh's server has; `None`, said on stderr, otherwise): each run on an agent of
/// its own set to its initial state, every append counted (the full states sent as new bases
/// included, each in the append that sent it).
fn bytes_per_append(uri: &str, runs: &[Conversation]) -> Option<BytesPerAppend> {
    let (Some(host), Some(port)) = (param(uri, "host"), param(uri, "port")) else {
        eprintln!("bench: bytes per append skipped: no host and port in the server's URI");
        return None;
    };
    if !host.starts_with('/') {
        eprintln!("bench: bytes per append skipped: the server is not on a Unix socket");
        return None;
    }
    let proxy = Proxy::start(Path::new(&host).join(format!(".s.PGSQL.{port}")), &port);
    let through = with_host(uri, &proxy.dir);
    let mut sent = Vec::new();
    for (k, c) in runs.iter().enumerate() {
        let mut counts = [Vec::new(), Vec::new()];
        for (j, json_patch) in [true, false].into_iter().enumerate() {
            let agent = format!("{}-append-bytes-{}-{j}", prefix(), STARTS[k]);
            let handle = ours(&through, &agent, "normal");
            handle.replace(&c.initial);
            for i in 0..c.operations.len() {
                let before = proxy.sent();
                if json_patch {
                    handle.patch(&c.operations[i]);
                } else {
                    handle.set(&c.merges[i]);
                }
                counts[j].push(proxy.sent() - before);
            }
        }
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        sent.push(Sent {
            size: STARTS[k],
            end: c.last.len(),
            mean: mean(&counts[0]),
            median: median(counts[0].iter().map(|&b| b as f64).collect()),
            max: counts[0].iter().copied().max().unwrap_or(0),
            merge_mean: mean(&counts[1]),
        });
    }
    Some(BytesPerAppend {
        operation: runs[runs.len() - 1].operation_bytes(),
        appends: runs[0].operations.len(),
        runs: sent,
    })
}

/// Every run (JSON Patch and RFC 7396 from each start) in alternating rounds (the starting one
/// rotating), each on an agent of its own set back to its initial state before it (not timed);
/// the median of the rounds' mean cost per append, at synchronous normal
/// (`synchronous_commit = off`). Then the bytes sent per append.
pub(crate) fn bench_append(cfg: &Args, uri: &str, rows: &mut Vec<Row>) -> Option<BytesPerAppend> {
    let appends = if cfg.smoke { 20 } else { APPENDS };
    let runs: Vec<Conversation> = STARTS
        .iter()
        .map(|&s| Conversation::new(s, appends))
        .collect();
    // Contender 2k is JSON Patch from STARTS[k], 2k + 1 RFC 7396 from it.
    let handles: Vec<_> = (0..2 * runs.len())
        .map(|c| {
            let agent = format!("{}-append-{}-{}", prefix(), STARTS[c / 2], c % 2);
            ours(uri, &agent, "normal")
        })
        .collect();
    let run = |c: usize| {
        let (handle, conv) = (&handles[c], &runs[c / 2]);
        handle.replace(&conv.initial);
        let t = Instant::now();
        if c.is_multiple_of(2) {
            for op in &conv.operations {
                handle.patch(op);
            }
        } else {
            for m in &conv.merges {
                handle.set(m);
            }
        }
        t.elapsed().as_nanos() as f64 / conv.operations.len() as f64
    };
    // A warm-up of each, which also checks that both ways store the same state, the one the
    // appends make.
    for (k, conv) in runs.iter().enumerate() {
        run(2 * k);
        run(2 * k + 1);
        let (by_patch, by_merge) = (handles[2 * k].state(), handles[2 * k + 1].state());
        assert!(
            by_patch == by_merge,
            "appends from {} B: JSON Patch and RFC 7396 stored different states",
            STARTS[k]
        );
        assert!(
            by_patch == conv.last,
            "appends from {} B: the stored state is not the conversation's",
            STARTS[k]
        );
    }
    let n = handles.len();
    let mut samples = vec![Vec::new(); n];
    for r in 0..cfg.rounds() {
        for i in 0..n {
            let c = (r + i) % n;
            samples[c].push(run(c));
        }
    }
    let t: Vec<f64> = samples.into_iter().map(median).collect();
    append_rows(&t, &runs, "", rows);
    bytes_per_append(uri, &runs)
}
