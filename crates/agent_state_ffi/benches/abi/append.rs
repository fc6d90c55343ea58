//! Appending to a list that grows: users keep a conversation as a list of messages
//! (`{"status":..,"messages":[...]}`), and each turn appends one. With JSON Patch (RFC 6902)
//! the write names the one message (`[{"op":"add","path":"/messages/-","value":{...}}]`); with
//! RFC 7396 alone a user must send the whole list again with the new message at its end. Does
//! an append cost what it adds, or what the list has grown to?

use std::path::Path;

#[path = "../support/conversation.rs"]
mod conversation;

use conversation::{append_rows, Conversation, APPENDS, STARTS};

use super::*;

/// Removes a SQLite file with its WAL and shared-memory index.
fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// One run: a new store holding the conversation's initial state, then its appends (as JSON
/// Patch operations, or as merge patches of the whole list), timed; returns the mean time per
/// append (ns) and the state stored at the end.
fn run(path: &Path, c: &Conversation, json_patch: bool) -> (f64, Vec<u8>) {
    remove_db(path);
    let ours = Abi::open(
        path,
        r#"{"synchronous":"normal","max_value_bytes":4194304}"#,
    );
    ours.replace(&c.initial);
    let t = Instant::now();
    if json_patch {
        for op in &c.operations {
            ours.patch(op);
        }
    } else {
        for m in &c.merges {
            ours.set(m);
        }
    }
    let mean = t.elapsed().as_nanos() as f64 / c.operations.len() as f64;
    (mean, ours.state())
}

/// From ~1 KiB and from 256 KiB, `APPENDS` appends of one ~200-byte message at synchronous
/// normal on disk, by JSON Patch and by RFC 7396; every run in alternating rounds (a round runs
/// each once, the starting one rotating), the median of the rounds' mean cost per append.
pub(crate) fn bench_append(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    let appends = if cfg.smoke { 20 } else { APPENDS };
    let runs: Vec<Conversation> = STARTS
        .iter()
        .map(|&s| Conversation::new(s, appends))
        .collect();
    // Contender 2k is JSON Patch from STARTS[k], 2k + 1 RFC 7396 from it.
    let path = |c: usize| dir.join(format!("append_{}_{}.db", STARTS[c / 2], c % 2));
    // A warm-up of each, which also checks that both ways store the same state, the one the
    // appends make.
    for (k, c) in runs.iter().enumerate() {
        let (_, by_patch) = run(&path(2 * k), c, true);
        let (_, by_merge) = run(&path(2 * k + 1), c, false);
        assert!(
            by_patch == by_merge,
            "appends from {} B: JSON Patch and RFC 7396 stored different states",
            STARTS[k]
        );
        assert!(
            by_patch == c.last,
            "appends from {} B: the stored state is not the conversation's",
            STARTS[k]
        );
    }
    let n = 2 * runs.len();
    let mut samples = vec![Vec::new(); n];
    for r in 0..cfg.rounds() {
        for i in 0..n {
            let c = (r + i) % n;
            samples[c].push(run(&path(c), &runs[c / 2], c.is_multiple_of(2)).0);
        }
    }
    for c in 0..n {
        remove_db(&path(c));
    }
    let t: Vec<f64> = samples.into_iter().map(median).collect();
    append_rows(&t, &runs, "disk", rows);
}
