//! Figure 4: what the change log costs a write.

use std::path::Path;

use super::*;

/// Figure 4, the write-path cost of the change log: set_state with the log on (retention of
/// 1000 changes) against the same with it off, same size, same directory. The write-cost
/// target: the log costs at most 1.1× (on time / off time), on disk its "change log cost
/// factor" row.
pub(crate) fn bench_log(
    cfg: &Config,
    dir: &Path,
    dir_name: &str,
    size: usize,
    rows: &mut Vec<Row>,
) {
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
        target: Some(1.1),
        goal: Goal::CostAtMost,
        write_cost_target: if dir_name == "disk" {
            "log".into()
        } else {
            String::new()
        },
        ..Row::default()
    };
    // Where this layout's floor is (docs/src/performance.md, "The change log's floor"): a small
    // state's entry is a second page in every commit; a large state's full copies sit in the
    // entries' own table, and an insert that compares with one reads it whole.
    let floor = if size <= 1024 {
        "; floor of this layout: a second page per commit"
    } else if size >= 256 * 1024 {
        "; floor of this layout: inserts read the log's full copies"
    } else {
        ""
    };
    let note = format!(
        "the log costs {:.2}× (at most 1.1×){floor}",
        1.0 / row.ratio()
    );
    rows.push(Row { note, ..row });
}
