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
//! Usage: `cargo bench --bench abi -- [--smoke] [--out FILE]`.

mod support;

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;
use support::{
    hand_merge, make_patches, make_state, print_table, race, states_after, write_json, Abi, Args,
    Row,
};

/// A plain SQLite table holding the state as one blob, as a user would set it up.
fn raw_store(path: &Path, sync: &str, value: &[u8]) -> Connection {
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
    fn ops(&self, size: usize, sync: &str, dir_is_disk: bool) -> usize {
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

fn bench_writes(cfg: &Config, dir: &Path, dir_name: &str, size: usize, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let patches = make_patches(64);
    let merged = states_after(&state, &patches);
    for (sync, sync_opt) in [("FULL", "full"), ("NORMAL", "normal")] {
        let tag = format!("{size}_{sync_opt}");
        let ours = Abi::open(
            &dir.join(format!("ours_{tag}.db")),
            &format!(r#"{{"synchronous":"{sync_opt}","max_value_bytes":4194304}}"#),
        );
        ours.replace(&state);
        let floor = raw_store(&dir.join(format!("floor_{tag}.db")), sync, &state);
        let jp = raw_store(&dir.join(format!("json_patch_{tag}.db")), sync, &state);
        let hand = raw_store(&dir.join(format!("serde_{tag}.db")), sync, &state);
        let ops = cfg.ops(size, sync, dir_name == "disk");

        let mut set_ours = |i: usize| ours.set(&patches[i % patches.len()]);
        let mut set_floor = |i: usize| {
            floor.execute_batch("BEGIN IMMEDIATE").unwrap();
            floor
                .prepare_cached("UPDATE kv SET v = ?1 WHERE k = 'state'")
                .unwrap()
                .execute([&merged[i % merged.len()]])
                .unwrap();
            floor.execute_batch("COMMIT").unwrap();
        };
        let mut set_json_patch = |i: usize| {
            jp.prepare_cached("UPDATE kv SET v = json_patch(v, ?1) WHERE k = 'state'")
                .unwrap()
                .execute([&patches[i % patches.len()]])
                .unwrap();
        };
        let mut set_serde = |i: usize| {
            hand.execute_batch("BEGIN IMMEDIATE").unwrap();
            let bytes: Vec<u8> = hand
                .prepare_cached("SELECT v FROM kv WHERE k = 'state'")
                .unwrap()
                .query_row([], |r| r.get(0))
                .unwrap();
            let mut v: Value = serde_json::from_slice(&bytes).unwrap();
            let p: Value = serde_json::from_slice(&patches[i % patches.len()]).unwrap();
            hand_merge(&mut v, &p);
            let out = serde_json::to_vec(&v).unwrap();
            hand.prepare_cached("UPDATE kv SET v = ?1 WHERE k = 'state'")
                .unwrap()
                .execute([&out])
                .unwrap();
            hand.execute_batch("COMMIT").unwrap();
        };
        let t = race(
            &mut [
                &mut set_ours,
                &mut set_floor,
                &mut set_json_patch,
                &mut set_serde,
            ],
            cfg.rounds(),
            ops,
        );
        let floor_target = match (sync, size) {
            ("FULL", _) => 0.95,
            (_, s) if s <= 1024 => 0.85,
            _ => 0.7,
        };
        for (alt, ns, target) in [
            ("raw write floor", t[1], Some(floor_target)),
            ("UPDATE json_patch", t[2], Some(1.0)),
            ("serde_json read-merge-write", t[3], Some(1.0)),
        ] {
            rows.push(Row {
                op: "set_state".into(),
                size,
                dir: dir_name.into(),
                sync: sync_opt.into(),
                ours_ns: t[0],
                alternative: alt.into(),
                alt_ns: ns,
                target,
            });
        }

        let mut replace_ours = |i: usize| ours.replace(&merged[i % merged.len()]);
        let t = race(&mut [&mut replace_ours, &mut set_floor], cfg.rounds(), ops);
        rows.push(Row {
            op: "replace_state".into(),
            size,
            dir: dir_name.into(),
            sync: sync_opt.into(),
            ours_ns: t[0],
            alternative: "raw write floor".into(),
            alt_ns: t[1],
            target: None,
        });
    }
}

fn bench_reads(cfg: &Config, dir: &Path, dir_name: &str, size: usize, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let ours = Abi::open(
        &dir.join(format!("read_ours_{size}.db")),
        "{\"max_value_bytes\":4194304}",
    );
    ours.replace(&state);
    let raw = raw_store(&dir.join(format!("read_raw_{size}.db")), "FULL", &state);
    let mut copy = vec![0u8; state.len()];
    let ops = if cfg.smoke {
        100
    } else {
        (2_000_000 / (size + 1000)).clamp(200, 20_000)
    };
    let mut sink = 0usize;
    let mut get_ours = |_: usize| sink = sink.wrapping_add(ours.get());
    let mut select = |_: usize| {
        let v: Vec<u8> = raw
            .prepare_cached("SELECT v FROM kv WHERE k = 'state'")
            .unwrap()
            .query_row([], |r| r.get(0))
            .unwrap();
        std::hint::black_box(&v);
    };
    let mut memcpy = |_: usize| {
        copy.copy_from_slice(std::hint::black_box(&state));
        std::hint::black_box(&copy);
    };
    let t = race(
        &mut [&mut get_ours, &mut select, &mut memcpy],
        cfg.rounds(),
        ops,
    );
    std::hint::black_box(sink);
    let target = match size {
        s if s <= 1024 => 3.0,
        s if s <= 16384 => 5.0,
        _ => 10.0,
    };
    for (alt, ns, target) in [
        ("prepared SELECT", t[1], Some(target)),
        ("memcpy (floor)", t[2], None),
    ] {
        rows.push(Row {
            op: "get_state".into(),
            size,
            dir: dir_name.into(),
            sync: "full".into(),
            ours_ns: t[0],
            alternative: alt.into(),
            alt_ns: ns,
            target,
        });
    }
}

fn bench_open(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    let path = dir.join("open_ours.db");
    drop(Abi::open(&path, "{}"));
    let raw_path = dir.join("open_raw.db");
    drop(raw_store(&raw_path, "FULL", b"{}"));
    let mut open_ours = |_: usize| {
        let a = Abi::open(&path, "{}");
        std::hint::black_box(a.get());
    };
    let mut open_raw = |_: usize| {
        let c = Connection::open(&raw_path).unwrap();
        c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;")
            .unwrap();
        let v: Vec<u8> = c
            .query_row("SELECT v FROM kv WHERE k = 'state'", [], |r| r.get(0))
            .unwrap();
        std::hint::black_box(v);
    };
    let ops = if cfg.smoke { 10 } else { 50 };
    let t = race(&mut [&mut open_ours, &mut open_raw], cfg.rounds(), ops);
    rows.push(Row {
        op: "open+get+close".into(),
        size: 2,
        dir: "disk".into(),
        sync: "full".into(),
        ours_ns: t[0],
        alternative: "rusqlite open+pragmas+SELECT".into(),
        alt_ns: t[1],
        target: None,
    });
}

/// Many agents in one file against one agent per file: the same get_state and set_state on
/// agent 1 of 1,000 stored agents of one file (`agent_id`, on the connection the 1,000 handles
/// share) and on a file's single agent. Target: no slower than one agent per file, within 10%.
fn bench_many_agents(cfg: &Config, dir: &Path, size: usize, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let patches = make_patches(64);
    let options = r#""synchronous":"normal","max_value_bytes":4194304"#;
    let single = Abi::open(
        &dir.join(format!("single_{size}.db")),
        &format!("{{{options}}}"),
    );
    single.replace(&state);
    let many_path = dir.join(format!("many_{size}.db"));
    let agents = if cfg.smoke { 20 } else { 1000 };
    let many: Vec<Abi> = (0..agents)
        .map(|i| {
            let a = Abi::open(
                &many_path,
                &format!(r#"{{{options},"agent_id":"agent-{i}"}}"#),
            );
            a.replace(&state);
            a
        })
        .collect();
    let ours = &many[agents / 2];
    let ops = cfg.ops(size, "NORMAL", true);
    let mut set_many = |i: usize| ours.set(&patches[i % patches.len()]);
    let mut set_single = |i: usize| single.set(&patches[i % patches.len()]);
    let t = race(&mut [&mut set_many, &mut set_single], cfg.rounds(), ops);
    rows.push(Row {
        op: format!("set_state, 1 of {agents} agents in a file"),
        size,
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: "set_state, one agent per file".into(),
        alt_ns: t[1],
        target: Some(0.9),
    });
    let (mut sink_many, mut sink_single) = (0usize, 0usize);
    let mut get_many = |_: usize| sink_many = sink_many.wrapping_add(ours.get());
    let mut get_single = |_: usize| sink_single = sink_single.wrapping_add(single.get());
    let reads = if cfg.smoke {
        100
    } else {
        (2_000_000 / (size + 1000)).clamp(200, 20_000)
    };
    let t = race(&mut [&mut get_many, &mut get_single], cfg.rounds(), reads);
    std::hint::black_box((sink_many, sink_single));
    rows.push(Row {
        op: format!("get_state, 1 of {agents} agents in a file"),
        size,
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: "get_state, one agent per file".into(),
        alt_ns: t[1],
        target: Some(0.9),
    });
}

/// The write-path cost of the change log: set_state with the log off against the same with it
/// on (retention of 1000 changes), same size, same directory.
fn bench_log(cfg: &Config, dir: &Path, dir_name: &str, size: usize, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let patches = make_patches(64);
    let off = Abi::open(
        &dir.join(format!("log_off_{size}.db")),
        r#"{"synchronous":"normal","max_value_bytes":4194304}"#,
    );
    off.replace(&state);
    let on = Abi::open(
        &dir.join(format!("log_on_{size}.db")),
        r#"{"synchronous":"normal","max_value_bytes":4194304,"change_log":{"keep_last":1000}}"#,
    );
    on.replace(&state);
    let mut set_off = |i: usize| off.set(&patches[i % patches.len()]);
    let mut set_on = |i: usize| on.set(&patches[i % patches.len()]);
    let t = race(
        &mut [&mut set_off, &mut set_on],
        cfg.rounds(),
        cfg.ops(size, "NORMAL", dir_name == "disk"),
    );
    rows.push(Row {
        op: "set_state, change log off".into(),
        size,
        dir: dir_name.into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: "set_state, change log on".into(),
        alt_ns: t[1],
        target: None,
    });
}

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4
}

/// Resident memory after 10k and after many more get/set operations: must stay flat.
fn bench_memory(cfg: &Config, dir: &Path) -> (u64, u64, usize) {
    let a = Abi::open(&dir.join("rss.db"), r#"{"synchronous":"normal"}"#);
    a.replace(&make_state(16384));
    let patches = make_patches(64);
    let run = |n: usize| {
        for i in 0..n {
            a.set(&patches[i % 64]);
            std::hint::black_box(a.get());
        }
    };
    run(10_000);
    let after_10k = rss_kib();
    let total = if cfg.smoke { 20_000 } else { 1_000_000 };
    run(total - 10_000);
    (after_10k, rss_kib(), total)
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
    for (name, dir) in &dirs {
        std::fs::create_dir_all(dir).unwrap();
        for size in sizes {
            eprintln!("bench: {name} {size} B ...");
            if *name == "disk" {
                bench_reads(&cfg, dir, name, size, &mut rows);
                if size <= 16 * 1024 {
                    bench_many_agents(&cfg, dir, size, &mut rows);
                }
            }
            bench_writes(&cfg, dir, name, size, &mut rows);
            bench_log(&cfg, dir, name, size, &mut rows);
        }
    }
    bench_open(&cfg, &dirs[0].1, &mut rows);
    let (rss_10k, rss_end, total) = bench_memory(&cfg, &dirs[dirs.len() - 1].1);
    for (_, dir) in &dirs {
        let _ = std::fs::remove_dir_all(dir);
    }

    let misses = print_table(&rows, true);
    let rss_ok = rss_end <= rss_10k + rss_10k / 10 + 1024;
    println!(
        "\nresident memory: {rss_10k} KiB after 10k get+set pairs, {rss_end} KiB after {total}: {}",
        if rss_ok { "flat (PASS)" } else { "grew (MISS)" }
    );
    println!("{misses} target(s) missed");
    write_json(
        &cfg.out,
        smoke,
        &rows,
        true,
        &format!(
            r#","rss_kib_after_10k":{rss_10k},"rss_kib_after_total":{rss_end},"rss_total_ops":{total}"#
        ),
    );
}
