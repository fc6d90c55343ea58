//! `make bench`: agent_state through its C ABI against the code a user would write instead,
//! measured side by side in one run, on the same directories, with ratios as the result.
//!
//! Method: for every case the contenders run in alternating rounds (A, B, C, A, B, C, ...,
//! the starting contender rotating each round), so that noise from this shared machine hits
//! all of them alike; each contender's figure is the median of its rounds' time per operation.
//! Ratios are `alternative time / our time` (above 1: we are faster).
//!
//! Our side calls only the exported `agent_*` functions (declared below, as C would), never the
//! Rust API. The alternatives use the same bundled SQLite through rusqlite, with the same
//! pragmas (WAL, the same `synchronous`), each on its own file in the same directory.
//!
//! Usage: `cargo bench --bench abi -- [--smoke] [--out FILE] [--only CASE]`, CASE one of
//! `nested`, `append`, `hot` (the reads at 1 KiB on disk, with the hot handle's row), `floor`
//! (the writes at 1 KiB on disk) or `log` (the change log's cost at every size, on disk).

mod support;

// The cases, by figure (a bench target's root names its modules' paths itself).
#[path = "abi/append.rs"]
mod append;
#[path = "abi/growing.rs"]
mod growing;
#[path = "abi/log.rs"]
mod log;
#[path = "abi/memory.rs"]
mod memory;
#[path = "abi/nested.rs"]
mod nested;
#[path = "abi/reads.rs"]
mod reads;
#[path = "abi/store.rs"]
mod store;
#[path = "abi/threads.rs"]
mod threads;
#[path = "abi/writes.rs"]
mod writes;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;
use support::{
    hand_merge, human, make_patches, make_state, median, print_table, race, states_after,
    write_json, Abi, Args, Goal, Row, NESTED_PATH,
};

/// A plain SQLite table holding the state as one blob, as a user would set it up.
pub(crate) fn raw_store(path: &Path, sync: &str, value: &[u8]) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync};
         CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL);"
    ))
    .unwrap();
    c.execute(
        "INSERT INTO kv VALUES ('state', ?1) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
        [value],
    )
    .unwrap();
    c
}

type Config = Args;

impl Config {
    /// Operations per round, aiming at a few milliseconds per round at least.
    pub(crate) fn ops(&self, size: usize, sync: &str, dir_is_disk: bool) -> usize {
        if self.smoke {
            return 20;
        }
        let per_op_us = if sync == "FULL" && dir_is_disk {
            1000.0
        } else {
            8.0 + size as f64 / 4096.0
        };
        ((20_000.0 / per_op_us) as usize).clamp(10, 400)
    }
}

/// `race`, with fewer operations per round where the slowest contender would make a round
/// longer than about 50 ms (at least 5): a 256 KiB replace_state takes milliseconds, and full
/// mode must stay within minutes. Each contender runs once, timed, first (a warm-up too).
pub(crate) fn race_capped(
    contenders: &mut [&mut dyn FnMut(usize)],
    rounds: usize,
    ops: usize,
) -> Vec<f64> {
    let mut worst = 0f64;
    for (k, f) in contenders.iter_mut().enumerate() {
        let t = Instant::now();
        f(usize::MAX / 2 + k);
        worst = worst.max(t.elapsed().as_secs_f64());
    }
    let cap = ((0.05 / worst.max(1e-9)) as usize).max(5);
    race(contenders, rounds, ops.min(cap))
}

/// Every top-level member of the state sent again with a few changed (the status and one
/// member's score): what a user of the peer writes as `setState({...this.state, status})`.
pub(crate) fn make_big_patches(state: &[u8], n: usize) -> Vec<Vec<u8>> {
    let base: Value = serde_json::from_slice(state).unwrap();
    (0..n)
        .map(|i| {
            let mut v = base.clone();
            let o = v.as_object_mut().unwrap();
            o.insert("status".into(), Value::String(format!("b{i}")));
            o["m1"]["score"] = serde_json::json!((i % 7) as f64 + 0.75);
            serde_json::to_vec(&v).unwrap()
        })
        .collect()
}

fn main() {
    let cfg = Config::parse("target/bench/abi.json");
    let smoke = cfg.smoke;
    let sizes = [1024usize, 16 * 1024, 256 * 1024];
    let base_disk = std::env::temp_dir().join(format!("agent_state_bench_{}", std::process::id()));
    let base_shm = PathBuf::from(format!("/dev/shm/agent_state_bench_{}", std::process::id()));
    let mut dirs = vec![("disk", base_disk)];
    if Path::new("/dev/shm").is_dir() {
        dirs.push(("tmpfs", base_shm));
    }
    let mut rows = Vec::new();
    // Everything, or (with `--only CASE`) that group of rows alone.
    let all = cfg.only.is_none();
    for (name, dir) in &dirs {
        std::fs::create_dir_all(dir).unwrap();
        let disk = *name == "disk";
        for size in sizes {
            let small_disk = disk && size == 1024;
            let (reads, writes, log) = if all {
                (disk, true, true)
            } else {
                (
                    small_disk && cfg.runs("hot"),
                    small_disk && cfg.runs("floor"),
                    disk && cfg.runs("log"),
                )
            };
            if !(reads || writes || log) {
                continue;
            }
            eprintln!("bench: {name} {size} B ...");
            if reads {
                reads::bench_reads(&cfg, dir, name, size, &mut rows);
                if all && size <= 16 * 1024 {
                    reads::bench_many_agents(&cfg, dir, size, &mut rows);
                }
            }
            if writes {
                writes::bench_writes(&cfg, dir, name, size, &mut rows);
            }
            if log {
                log::bench_log(&cfg, dir, name, size, &mut rows);
            }
        }
    }
    if all {
        eprintln!("bench: growing state ...");
        growing::bench_growing(&cfg, &dirs[0].1, &mut rows);
    }
    if cfg.runs("nested") {
        eprintln!("bench: a member added 1, 2 and 4 levels down ...");
        nested::bench_nested(&cfg, &dirs[0].1, &mut rows);
    }
    if cfg.runs("append") {
        eprintln!("bench: appending to a list, by JSON Patch and by RFC 7396 ...");
        append::bench_append(&cfg, &dirs[0].1, &mut rows);
    }
    if !all {
        for (_, dir) in &dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
        let misses = print_table(&rows, true);
        println!("{misses} target(s) missed (stretch goals not counted)");
        write_json(&cfg.out, smoke, &rows, true, "");
        return;
    }
    reads::bench_open(&cfg, &dirs[0].1, &mut rows);
    eprintln!("bench: a store's agents ...");
    store::bench_store_agents(&cfg, &dirs[0].1, &mut rows);
    eprintln!("bench: group commit, read scaling ...");
    threads::bench_group_commit(&cfg, &dirs[0].1, &mut rows);
    threads::bench_read_scaling(&cfg, &dirs[0].1, &mut rows);
    eprintln!("bench: resident memory ...");
    let (rss_first, rss_end, first, total) = memory::bench_memory(&cfg, &dirs[dirs.len() - 1].1);
    for (_, dir) in &dirs {
        let _ = std::fs::remove_dir_all(dir);
    }

    let mut misses = print_table(&rows, true);
    let rss_limit = rss_first + rss_first / 10 + 1024;
    let rss_ok = rss_end <= rss_limit;
    if !rss_ok {
        misses += 1;
    }
    println!(
        "\nfig. 9, resident memory over {total} get+set pairs (16 KiB state): {rss_first} KiB after the first {first}, {rss_end} KiB after {total}; target ≤ {rss_limit} KiB (+10% + 1 MiB): {}",
        if rss_ok { "PASS" } else { "MISS" }
    );
    println!("{misses} target(s) missed (stretch goals not counted)");
    write_json(
        &cfg.out,
        smoke,
        &rows,
        true,
        &format!(
            r#","rss_kib_after_first":{rss_first},"rss_first_ops":{first},"rss_kib_after_total":{rss_end},"rss_total_ops":{total},"rss_kib_limit":{rss_limit},"rss_verdict":"{}""#,
            if rss_ok { "PASS" } else { "MISS" }
        ),
    );
}
