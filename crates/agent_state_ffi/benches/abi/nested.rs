//! A member added deep in the state: users keep their state nested (`{"status":..,"msgs":{..}}`),
//! so most of a large state sits one level down or deeper, and a write that adds a message
//! adds it there. Does it cost what adding it at the top level costs, or what the member it
//! lands in has grown to?

use std::path::Path;

use super::growing::remove_db;
use super::support::{
    make_nested_patch, make_nested_state, nested_rows, NESTED_DEPTHS, NESTED_SIZES, NESTED_WRITES,
};
use super::*;

/// One run: a new store holding the nested state of `size` at `depth`, then the writes (each
/// adding one member at that depth), timed; returns the mean time per write (ns).
fn run(path: &Path, initial: &[u8], patches: &[Vec<u8>]) -> f64 {
    remove_db(path);
    let ours = Abi::open(
        path,
        r#"{"synchronous":"normal","max_value_bytes":4194304}"#,
    );
    ours.replace(initial);
    let t = Instant::now();
    for p in patches {
        ours.set(p);
    }
    t.elapsed().as_nanos() as f64 / patches.len() as f64
}

/// From 1 KiB and from 256 KiB, `NESTED_WRITES` set_state calls at synchronous normal on disk,
/// each adding one ~200-byte member at the top level, or 1, 2 or 4 levels down; every run in
/// alternating rounds (the starting one rotating), the median of the rounds' mean cost per
/// write. Rows: each depth against the top level at the same size (target: at most 1.3×).
pub(crate) fn bench_nested(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    let writes = if cfg.smoke { 20 } else { NESTED_WRITES };
    let mut runs = Vec::new();
    for &size in &NESTED_SIZES {
        for &depth in &NESTED_DEPTHS {
            let initial = make_nested_state(size, depth);
            let patches: Vec<Vec<u8>> = (0..writes).map(|i| make_nested_patch(depth, i)).collect();
            runs.push((size, depth, initial, patches));
        }
    }
    let path = |k: usize| dir.join(format!("nested_{}_{}.db", runs[k].0, runs[k].1));
    // A warm-up of each, which also checks that the writes land where they should.
    for (k, (size, depth, initial, patches)) in runs.iter().enumerate() {
        run(&path(k), initial, patches);
        let ours = Abi::open(&path(k), r#"{"max_value_bytes":4194304}"#);
        let state: Value = serde_json::from_slice(&ours.state()).unwrap();
        let mut at = &state;
        for name in &NESTED_PATH[..*depth] {
            at = &at[name];
        }
        assert!(
            at.get(format!("note{:05}", patches.len() - 1)).is_some(),
            "nested writes at {size} B, depth {depth}: the last member is not there"
        );
    }
    let n = runs.len();
    let mut samples = vec![Vec::new(); n];
    for r in 0..cfg.rounds() {
        for i in 0..n {
            let k = (r + i) % n;
            samples[k].push(run(&path(k), &runs[k].2, &runs[k].3));
        }
    }
    for k in 0..n {
        remove_db(&path(k));
    }
    let t: Vec<f64> = samples.into_iter().map(median).collect();
    let t: Vec<Vec<f64>> = t.chunks(NESTED_DEPTHS.len()).map(<[f64]>::to_vec).collect();
    nested_rows(&t, writes, "disk", rows);
}
