//! Figures 6b and 8: writers and readers on several threads (group commit, read scaling).

use std::path::Path;

use super::*;

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

/// Figure 6b, group commit: 8 threads, each with its own handle on one store, writing at
/// synchronous full, against one thread alone on the same store: total commits per second
/// (a write-cost target: at least 4×, a target now, no longer a stretch goal).
pub(crate) fn bench_group_commit(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
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
        write_cost_target: "writers".into(),
        note: format!(
            "commits/s: {:.0} with 1 thread, {:.0} with {THREADS}",
            r[0], r[1]
        ),
        ..Row::default()
    };
    rows.push(row);
}

/// Figure 8, reads scale with threads: two threads reading ONE handle (get_state, 1 KiB,
/// cached) against one thread, in total reads per second (a write-cost target: at least 1.8×); two
/// threads on two handles of the same store as information.
pub(crate) fn bench_read_scaling(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
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
        target: Some(1.8),
        write_cost_target: "threads".into(),
        note: format!(
            "reads/s: {:.0} with 1 thread, {:.0} with 2 on one handle, {:.0} with 2 on two handles",
            r[0], r[1], r[2]
        ),
        ..Row::default()
    });
}
