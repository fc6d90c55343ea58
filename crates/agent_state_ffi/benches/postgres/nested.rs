//! A member added deep in the state, on PostgreSQL (as abi/nested.rs on SQLite): 300 writes
//! each adding one ~200-byte member at the top level, or 1, 2 or 4 levels down, from 1 KiB and
//! from 256 KiB; each depth's cost against the top level's (target: at most 1.3×).

use std::time::Instant;

use super::support::{
    make_nested_patch, make_nested_state, median, nested_rows, Args, Row, NESTED_DEPTHS,
    NESTED_SIZES, NESTED_WRITES,
};
use super::{ours, prefix};

/// Every run, in alternating rounds (the starting one rotating), each on an agent of its own
/// set back to its initial state before it (not timed); the median of the rounds' mean cost
/// per write, at synchronous normal (`synchronous_commit = off`).
pub(crate) fn bench_nested(cfg: &Args, uri: &str, rows: &mut Vec<Row>) {
    let writes = if cfg.smoke { 20 } else { NESTED_WRITES };
    let mut runs = Vec::new();
    for &size in &NESTED_SIZES {
        for &depth in &NESTED_DEPTHS {
            let agent = format!("{}-nested-{size}-{depth}", prefix());
            let initial = make_nested_state(size, depth);
            let patches: Vec<Vec<u8>> = (0..writes).map(|i| make_nested_patch(depth, i)).collect();
            runs.push((ours(uri, &agent, "normal"), initial, patches));
        }
    }
    let run = |k: usize| {
        let (handle, initial, patches) = &runs[k];
        handle.replace(initial);
        let t = Instant::now();
        for p in patches {
            handle.set(p);
        }
        t.elapsed().as_nanos() as f64 / patches.len() as f64
    };
    for k in 0..runs.len() {
        run(k); // warm-up
    }
    let n = runs.len();
    let mut samples = vec![Vec::new(); n];
    for r in 0..cfg.rounds() {
        for i in 0..n {
            let k = (r + i) % n;
            samples[k].push(run(k));
        }
    }
    let t: Vec<f64> = samples.into_iter().map(median).collect();
    let t: Vec<Vec<f64>> = t.chunks(NESTED_DEPTHS.len()).map(<[f64]>::to_vec).collect();
    nested_rows(&t, writes, "", rows);
}
