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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;
use support::{
    hand_merge, make_patches, make_state, median, print_table, race, states_after, write_json, Abi,
    Args, Row,
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

/// `race`, with fewer operations per round where the slowest contender would make a round
/// longer than about 50 ms (at least 5): a 256 KiB replace_state takes milliseconds, and full
/// mode must stay within minutes. Each contender runs once, timed, first (a warm-up too).
fn race_capped(contenders: &mut [&mut dyn FnMut(usize)], rounds: usize, ops: usize) -> Vec<f64> {
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
fn make_big_patches(state: &[u8], n: usize) -> Vec<Vec<u8>> {
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

/// set_state against the raw write floor, `UPDATE json_patch` and a serde_json
/// read-merge-write (figures 1, 2, 6a); replace_state against `UPDATE v = json(?)` and the floor
/// (figure 3); a patch as large as the state against replace_state of the result (figure 5).
fn bench_writes(cfg: &Config, dir: &Path, dir_name: &str, size: usize, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let patches = make_patches(64);
    let merged = states_after(&state, &patches);
    let merged_text: Vec<String> = merged
        .iter()
        .map(|m| String::from_utf8(m.clone()).unwrap())
        .collect();
    let patch_text: Vec<String> = patches
        .iter()
        .map(|m| String::from_utf8(m.clone()).unwrap())
        .collect();
    let big = make_big_patches(&state, 64);
    let big_merged = states_after(&state, &big);
    for (sync, sync_opt) in [("FULL", "full"), ("NORMAL", "normal")] {
        let normal = sync == "NORMAL";
        let tag = format!("{size}_{sync_opt}");
        let options = format!(r#"{{"synchronous":"{sync_opt}","max_value_bytes":4194304}}"#);
        let ours = Abi::open(&dir.join(format!("ours_{tag}.db")), &options);
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
                .execute([&patch_text[i % patch_text.len()]])
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
        let t = race_capped(
            &mut [
                &mut set_ours,
                &mut set_floor,
                &mut set_json_patch,
                &mut set_serde,
            ],
            cfg.rounds(),
            ops,
        );
        // The issue's targets: the floor at normal 0.7 (1 KiB) / 0.6 (16, 256 KiB), stretch
        // 0.85; at full 0.95 (one fsync per commit is the floor). json_patch 1.5 / 3 / 10 at
        // normal; at full both sides wait for the same fsync, so the row is information.
        // On tmpfs an fsync costs nothing, so the full target, premised on one fsync per
        // commit, does not apply there: those rows are information.
        let (floor_fig, floor_target, floor_note) = match (normal, size) {
            (false, _) if dir_name == "disk" => ("1, 6a", Some(0.95), String::new()),
            (false, _) => (
                "1",
                None,
                "full on tmpfs (no fsync cost): information".to_string(),
            ),
            (true, s) if s <= 1024 => ("1", Some(0.7), "stretch".to_string()),
            (true, _) => ("1", Some(0.6), "stretch".to_string()),
        };
        let at_full = if dir_name == "disk" {
            "here fsync-bound"
        } else {
            "full on tmpfs: information"
        };
        let jp_target = match size {
            s if s <= 1024 => 1.5,
            s if s <= 16384 => 3.0,
            _ => 10.0,
        };
        let floor_row = Row {
            fig: floor_fig.into(),
            alternative: "raw write floor (BEGIN IMMEDIATE; UPDATE v=?; COMMIT)".into(),
            alt_ns: t[1],
            target: floor_target,
            note: floor_note,
            ..Row::default()
        };
        let mut jp_row = Row {
            fig: "2".into(),
            alternative: "UPDATE v = json_patch(v, ?)".into(),
            alt_ns: t[2],
            target: normal.then_some(jp_target),
            ..Row::default()
        };
        if !normal {
            jp_row.note = format!("target ≥ {jp_target}× at normal; {at_full}");
        }
        let serde_row = Row {
            alternative: "serde_json read-merge-write".into(),
            alt_ns: t[3],
            target: Some(1.0),
            note: "not in the issue".into(),
            ..Row::default()
        };
        for r in [floor_row, jp_row, serde_row] {
            let mut row = Row {
                op: "set_state".into(),
                size,
                dir: dir_name.into(),
                sync: sync_opt.into(),
                ours_ns: t[0],
                ..r
            };
            if row.note == "stretch" {
                row.note = row.stretch_note(0.85);
            }
            rows.push(row);
        }

        // Figure 3: replace_state against SQLite parsing, validating and minifying the same
        // document; the floor row stays as information.
        let js = raw_store(&dir.join(format!("json_{tag}.db")), sync, &state);
        let mut replace_ours = |i: usize| ours.replace(&merged[i % merged.len()]);
        let mut replace_json = |i: usize| {
            js.prepare_cached("UPDATE kv SET v = json(?1) WHERE k = 'state'")
                .unwrap()
                .execute([&merged_text[i % merged_text.len()]])
                .unwrap();
        };
        let t = race_capped(
            &mut [&mut replace_ours, &mut replace_json, &mut set_floor],
            cfg.rounds(),
            ops,
        );
        let mut json_row = Row {
            fig: "3".into(),
            op: "replace_state".into(),
            size,
            dir: dir_name.into(),
            sync: sync_opt.into(),
            ours_ns: t[0],
            alternative: "UPDATE v = json(?) (parse, validate, minify)".into(),
            alt_ns: t[1],
            target: normal.then_some(1.0),
            ..Row::default()
        };
        json_row.note = if normal {
            json_row.stretch_note(2.0)
        } else {
            format!("target ≥ 1× at normal; {at_full}")
        };
        rows.push(json_row);
        rows.push(Row {
            op: "replace_state".into(),
            size,
            dir: dir_name.into(),
            sync: sync_opt.into(),
            ours_ns: t[0],
            alternative: "raw write floor".into(),
            alt_ns: t[2],
            target: None,
            note: "information, no target".into(),
            ..Row::default()
        });

        // Figure 5: a patch as large as the state against replace_state of the same result.
        let big_ours = Abi::open(&dir.join(format!("big_patch_{tag}.db")), &options);
        big_ours.replace(&state);
        let big_rep = Abi::open(&dir.join(format!("big_replace_{tag}.db")), &options);
        big_rep.replace(&state);
        let mut set_big = |i: usize| big_ours.set(&big[i % big.len()]);
        let mut replace_big = |i: usize| big_rep.replace(&big_merged[i % big_merged.len()]);
        let t = race_capped(&mut [&mut set_big, &mut replace_big], cfg.rounds(), ops);
        rows.push(Row {
            fig: "5".into(),
            op: "set_state, patch = whole state, 2 changed".into(),
            size,
            dir: dir_name.into(),
            sync: sync_opt.into(),
            ours_ns: t[0],
            alternative: "replace_state of the resulting state".into(),
            alt_ns: t[1],
            target: normal.then_some(1.0),
            note: if normal {
                String::new()
            } else {
                format!("target ≥ 1× at normal; {at_full}")
            },
            ..Row::default()
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
            note: "not in the issue".into(),
            ..Row::default()
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
        alternative: "rusqlite open + same pragmas + SELECT".into(),
        alt_ns: t[1],
        target: Some(0.8),
        fig: "7".into(),
        ..Row::default()
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
        note: "not in the issue".into(),
        ..Row::default()
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
        note: "not in the issue".into(),
        ..Row::default()
    });
}

/// Figure 4, the write-path cost of the change log: set_state with the log on (retention of
/// 1000 changes) against the same with it off, same size, same directory. The log may cost at
/// most 1.3×: ratio (off time / on time) ≥ 1/1.3.
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
    let mut set_on = |i: usize| on.set(&patches[i % patches.len()]);
    let mut set_off = |i: usize| off.set(&patches[i % patches.len()]);
    let t = race(
        &mut [&mut set_on, &mut set_off],
        cfg.rounds(),
        cfg.ops(size, "NORMAL", dir_name == "disk"),
    );
    let row = Row {
        fig: "4".into(),
        op: "set_state, change log on (keep_last 1000)".into(),
        size,
        dir: dir_name.into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: "set_state, change log off".into(),
        alt_ns: t[1],
        target: Some(1.0 / 1.3),
        ..Row::default()
    };
    let note = format!("the log costs {:.2}× (at most 1.3×)", 1.0 / row.ratio());
    rows.push(Row { note, ..row });
}

/// A step of a throughput setup: called with the thread's number and its operation count.
type Step<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Runs setup `c` on `threads[c]` threads for about `secs` seconds a round, alternating the
/// setups round by round as `race` does; returns each setup's median operations per second
/// (all its threads together).
fn throughput(setups: &[Step], threads: &[usize], rounds: usize, secs: f64) -> Vec<f64> {
    let n = setups.len();
    let mut samples = vec![Vec::new(); n];
    for r in 0..rounds {
        for k in 0..n {
            let c = (r + k) % n;
            let stop = AtomicBool::new(false);
            let count = AtomicUsize::new(0);
            let start = Instant::now();
            std::thread::scope(|s| {
                for t in 0..threads[c] {
                    let (stop, count, f) = (&stop, &count, setups[c]);
                    s.spawn(move || {
                        let mut done = 0usize;
                        while !stop.load(Ordering::Relaxed) {
                            f(t, done);
                            done += 1;
                        }
                        count.fetch_add(done, Ordering::Relaxed);
                    });
                }
                std::thread::sleep(Duration::from_secs_f64(secs));
                stop.store(true, Ordering::Relaxed);
            });
            let elapsed = start.elapsed().as_secs_f64();
            samples[c].push(count.load(Ordering::Relaxed) as f64 / elapsed);
        }
    }
    samples.into_iter().map(median).collect()
}

/// Figure 6b (stretch), group commit: 8 threads, each with its own handle on one store, writing
/// at synchronous full, against one thread alone on the same store: total commits per second.
fn bench_group_commit(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    const THREADS: usize = 8;
    let size = 1024;
    let path = dir.join("group_commit.db");
    let options = r#"{"synchronous":"full","max_value_bytes":4194304}"#;
    let handles: Vec<Abi> = (0..THREADS).map(|_| Abi::open(&path, options)).collect();
    handles[0].replace(&make_state(size));
    let patches = make_patches(64);
    let one = |_: usize, i: usize| handles[0].set(&patches[i % patches.len()]);
    let many = |t: usize, i: usize| handles[t].set(&patches[(t + i) % patches.len()]);
    let (rounds, secs) = if cfg.smoke { (1, 0.1) } else { (5, 1.0) };
    let r = throughput(&[&one, &many], &[1, THREADS], rounds, secs);
    let row = Row {
        fig: "6b".into(),
        op: format!("set_state, {THREADS} threads x own handle, one store"),
        size,
        dir: "disk".into(),
        sync: "full".into(),
        ours_ns: 1e9 / r[1],
        alternative: "set_state, one thread".into(),
        alt_ns: 1e9 / r[0],
        target: Some(4.0),
        stretch: true,
        note: format!(
            "commits/s: {:.0} with 1 thread, {:.0} with {THREADS}",
            r[0], r[1]
        ),
    };
    rows.push(row);
}

/// Figure 8, reads scale with threads: two threads reading ONE handle (get_state, 1 KiB,
/// cached) against one thread, in total reads per second; two threads on two handles of the
/// same store as information.
fn bench_read_scaling(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    let size = 1024;
    let path = dir.join("read_scaling.db");
    let a = Abi::open(&path, r#"{"max_value_bytes":4194304}"#);
    a.replace(&make_state(size));
    let b = Abi::open(&path, r#"{"max_value_bytes":4194304}"#);
    std::hint::black_box(b.get());
    // No shared sink: the threads would fight over its cache line.
    let read_a = |_: usize, _: usize| {
        std::hint::black_box(a.get());
    };
    let read_ab = |t: usize, _: usize| {
        std::hint::black_box(if t == 0 { &a } else { &b }.get());
    };
    let (rounds, secs) = if cfg.smoke { (1, 0.05) } else { (7, 0.5) };
    let r = throughput(&[&read_a, &read_a, &read_ab], &[1, 2, 2], rounds, secs);
    rows.push(Row {
        fig: "8".into(),
        op: "get_state, 2 threads on one handle".into(),
        size,
        dir: "disk".into(),
        sync: "full".into(),
        ours_ns: 1e9 / r[1],
        alternative: "get_state, 1 thread".into(),
        alt_ns: 1e9 / r[0],
        target: Some(1.6),
        note: format!(
            "reads/s: {:.0} with 1 thread, {:.0} with 2 on one handle, {:.0} with 2 on two handles",
            r[0], r[1], r[2]
        ),
        ..Row::default()
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

/// Figure 9: resident memory after 10k (smoke: 1k) and after 1,000,000 (smoke: 4k) get+set
/// pairs: must stay flat.
fn bench_memory(cfg: &Config, dir: &Path) -> (u64, u64, usize, usize) {
    let a = Abi::open(&dir.join("rss.db"), r#"{"synchronous":"normal"}"#);
    a.replace(&make_state(16384));
    let patches = make_patches(64);
    let run = |n: usize| {
        for i in 0..n {
            a.set(&patches[i % 64]);
            std::hint::black_box(a.get());
        }
    };
    let (first, total) = if cfg.smoke {
        (1_000, 4_000)
    } else {
        (10_000, 1_000_000)
    };
    run(first);
    let after_first = rss_kib();
    run(total - first);
    (after_first, rss_kib(), first, total)
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
    eprintln!("bench: group commit, read scaling ...");
    bench_group_commit(&cfg, &dirs[0].1, &mut rows);
    bench_read_scaling(&cfg, &dirs[0].1, &mut rows);
    eprintln!("bench: resident memory ...");
    let (rss_first, rss_end, first, total) = bench_memory(&cfg, &dirs[dirs.len() - 1].1);
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
