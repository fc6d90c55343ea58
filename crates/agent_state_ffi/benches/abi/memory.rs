//! Figure 9: resident memory stays flat over a million get+set pairs.

use std::path::Path;

use super::*;

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
pub(crate) fn bench_memory(cfg: &Config, dir: &Path) -> (u64, u64, usize, usize) {
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
