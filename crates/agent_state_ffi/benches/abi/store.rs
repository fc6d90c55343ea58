//! A store's agents (listing and expiry): one page of `agent_store_list`, and one batch of
//! `agent_store_expire` (a dry run), in a store of 100,000 agents against the same in a store
//! of 1,000: a page costs what it holds, not what the store holds.

use std::ffi::CString;
use std::path::Path;

use rusqlite::Connection;

use super::support::{race, store_expire_dry, store_list, Abi, Row};
use super::Config;

/// A store of `n` agents (`agent-000000`, ...), each with a 1 KiB state last written between
/// 60 and 40 days ago: made by the library (its schema), filled in bulk with SQL (writing
/// 100,000 agents one by one through the library would take minutes).
fn store_of(dir: &Path, n: usize) -> CString {
    let path = dir.join(format!("agents_{n}.db"));
    let _ = std::fs::remove_file(&path);
    drop(Abi::open(
        &path,
        r#"{"synchronous":"normal","agent_id":"seed"}"#,
    ));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let c = Connection::open(&path).unwrap();
    c.execute_batch("DELETE FROM agent_state").unwrap();
    c.execute(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
         INSERT INTO agent_state (agent, value, version, written_ms, written_grain)
         SELECT printf('agent-%06d', i), zeroblob(1024), 1 + i % 7, w, w - w % 60000
         FROM (SELECT i, ?2 - 5184000000 + (i * 7919 % ?1) * (1728000000 / ?1) AS w FROM n)",
        rusqlite::params![n as i64, now],
    )
    .unwrap();
    CString::new(path.to_str().unwrap()).unwrap()
}

pub(crate) fn bench_store_agents(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    let (small_n, large_n) = if cfg.smoke {
        (100, 1000)
    } else {
        (1000, 100_000)
    };
    let small = store_of(dir, small_n);
    let large = store_of(dir, large_n);
    let page = 100u32;
    // A page from the middle of each store.
    let mid = |n: usize| CString::new(format!("agent-{:06}", n / 2)).unwrap();
    let (after_small, after_large) = (mid(small_n), mid(large_n));
    let mut sink = 0usize;
    let mut list_large =
        |_: usize| sink = sink.wrapping_add(store_list(&large, &after_large, page));
    let mut sink2 = 0usize;
    let mut list_small =
        |_: usize| sink2 = sink2.wrapping_add(store_list(&small, &after_small, page));
    let ops = if cfg.smoke { 5 } else { 50 };
    let t = race(&mut [&mut list_large, &mut list_small], cfg.rounds(), ops);
    rows.push(Row {
        op: format!("agent_store_list, a page of {page} of {large_n} agents"),
        size: 1024,
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: format!("the same page of {small_n} agents"),
        alt_ns: t[1],
        target: Some(0.5),
        note: "listing: a page costs what it holds (each call opens the store)".into(),
        ..Row::default()
    });
    // A dry run of expiry: the 100 longest idle of those idle for 30 days (all of them are).
    let idle = 30 * 86_400_000;
    let mut e1 = 0usize;
    let mut expire_large = |_: usize| e1 = e1.wrapping_add(store_expire_dry(&large, idle, page));
    let mut e2 = 0usize;
    let mut expire_small = |_: usize| e2 = e2.wrapping_add(store_expire_dry(&small, idle, page));
    let t = race(
        &mut [&mut expire_large, &mut expire_small],
        cfg.rounds(),
        ops,
    );
    std::hint::black_box((sink, sink2, e1, e2));
    rows.push(Row {
        op: format!("agent_store_expire (dry run), a batch of {page} of {large_n} idle agents"),
        size: 1024,
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[0],
        alternative: format!("the same batch of {small_n} agents"),
        alt_ns: t[1],
        target: Some(0.5),
        note: "expiry: a batch costs what it holds".into(),
        ..Row::default()
    });
}
