//! Figures 1, 2, 3, 5 and 6a: the write paths against the SQL a user would write instead.

use std::path::Path;

use super::*;

/// Cloudflare Agents' durable `setState` of a 1 KiB state (`setState` + `storage.sync()`, local
/// workerd, 4 interleaved rounds), measured once on this project's VM when the write-cost
/// targets were set: 125 µs.
const CLOUDFLARE_DURABLE_SET_NS: f64 = 125_000.0;

/// set_state against the raw write floor, `UPDATE json_patch` and a serde_json
/// read-merge-write (figures 1, 2, 6a); replace_state against `UPDATE v = json(?)` and the floor
/// (figure 3); a patch as large as the state against replace_state of the result (figure 5).
pub(crate) fn bench_writes(
    cfg: &Config,
    dir: &Path,
    dir_name: &str,
    size: usize,
    rows: &mut Vec<Row>,
) {
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
        // The write-cost targets at normal: the floor 0.9 / 1.5 / 3 (1 / 16 / 256 KiB), json_patch
        // 1.5 / 3 / 20. At full, the floor at 0.95 (one fsync per commit is the floor; the
        // issue "Writes at the floor"); json_patch there is information, both sides waiting
        // for the same fsync. On tmpfs an fsync costs nothing, so the full target, premised on
        // one fsync per commit, does not apply there: those rows are information.
        let (floor_fig, floor_target, floor_note) = match (normal, size) {
            (false, _) if dir_name == "disk" => ("1, 6a", Some(0.95), String::new()),
            (false, _) => (
                "1",
                None,
                "full on tmpfs (no fsync cost): information".to_string(),
            ),
            // Profiled (docs/src/performance.md, "Where the SQLite rows' floors are"): the merge
            // alone is near a third of the raw write's instructions at 1 KiB.
            (true, s) if s <= 1024 => (
                "1",
                Some(0.9),
                "profiled: a write that merges stays near 0.77× here at best".to_string(),
            ),
            (true, s) if s <= 16384 => ("1", Some(1.5), String::new()),
            (true, _) => ("1", Some(3.0), String::new()),
        };
        let at_full = if dir_name == "disk" {
            "here fsync-bound"
        } else {
            "full on tmpfs: information"
        };
        let jp_target = match size {
            s if s <= 1024 => 1.5,
            s if s <= 16384 => 3.0,
            _ => 20.0,
        };
        // The write-cost targets' rows "two members changed, vs the floor" and "vs json_patch": on
        // disk, at normal.
        let label = |name: &str| {
            if normal && dir_name == "disk" {
                name.to_string()
            } else {
                String::new()
            }
        };
        let floor_row = Row {
            fig: floor_fig.into(),
            alternative: "raw write floor (BEGIN IMMEDIATE; UPDATE v=?; COMMIT)".into(),
            alt_ns: t[1],
            target: floor_target,
            write_cost_target: label("floor"),
            note: floor_note,
            ..Row::default()
        };
        let mut jp_row = Row {
            fig: "2".into(),
            alternative: "UPDATE v = json_patch(v, ?)".into(),
            alt_ns: t[2],
            target: normal.then_some(jp_target),
            write_cost_target: label("json_patch"),
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
        // The write-cost target for a durable write at 1 KiB, against Cloudflare Agents' durable
        // setState (setState + storage.sync() in local workerd): their harness is not part of
        // this bench, so the contender is the figure measured when the targets were set, a
        // constant.
        let cloudflare_row = (!normal && dir_name == "disk" && size == 1024).then(|| Row {
            alternative: "Cloudflare Agents durable setState (figure measured once)".into(),
            alt_ns: CLOUDFLARE_DURABLE_SET_NS,
            target: Some(1.2),
            write_cost_target: "cloudflare".into(),
            note: "Cloudflare figure measured once, not re-measured".into(),
            ..Row::default()
        });
        for r in [floor_row, jp_row, serde_row]
            .into_iter()
            .chain(cloudflare_row)
        {
            rows.push(Row {
                op: "set_state".into(),
                size,
                dir: dir_name.into(),
                sync: sync_opt.into(),
                ours_ns: t[0],
                ..r
            });
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
