//! The growing state of the write-cost targets: the common shape of agent state is a map that
//! gains a member per write (messages, tool results, notes keyed by id). Does a write cost what
//! it adds, or what the state has grown to?

use std::path::Path;

use super::*;

/// Writes per run (each adds one member), and the size each member adds.
const WRITES: usize = 300;
const MEMBER_BYTES: usize = 200;
/// The starting states' sizes: the rows compare the runs from 256 KiB (ending near 300 KiB)
/// with the run from 1 KiB.
const STARTS: [usize; 3] = [1024, 16 * 1024, 256 * 1024];

/// The patch that adds member `step` (a new, unique key), and that member as it lands at the
/// end of the stored object (`,"key":{...}`, exactly `MEMBER_BYTES` bytes).
fn member(step: usize) -> (Vec<u8>, Vec<u8>) {
    let head = format!(r#","note{step:05}":{{"id":{step},"kind":"tool_result","text":""#);
    let text = "y".repeat(MEMBER_BYTES - head.len() - 2);
    let entry = format!("{head}{text}\"}}");
    debug_assert_eq!(entry.len(), MEMBER_BYTES);
    (
        format!("{{{}}}", &entry[1..]).into_bytes(),
        entry.into_bytes(),
    )
}

/// One starting size's run: the initial state, the patches, and the state each write leaves
/// (the floor writes exactly these bytes).
struct Run {
    initial: Vec<u8>,
    patches: Vec<Vec<u8>>,
    states: Vec<Vec<u8>>,
}

impl Run {
    fn new(size: usize, writes: usize) -> Run {
        let initial = make_state(size);
        let mut body = initial[..initial.len() - 1].to_vec(); // without the closing brace
        let (mut patches, mut states) = (Vec::new(), Vec::new());
        for step in 0..writes {
            let (patch, entry) = member(step);
            body.extend_from_slice(&entry);
            let mut state = body.clone();
            state.push(b'}');
            patches.push(patch);
            states.push(state);
        }
        Run {
            initial,
            patches,
            states,
        }
    }
}

/// Removes a SQLite file with its WAL and shared-memory index.
pub(crate) fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// Our run: a new store holding the initial state, then the writes, timed; returns the mean
/// time per write (ns). With `check`, also that the state stored is the floor's last one.
fn run_ours(path: &Path, run: &Run, check: bool) -> f64 {
    remove_db(path);
    let ours = Abi::open(
        path,
        r#"{"synchronous":"normal","max_value_bytes":4194304}"#,
    );
    ours.replace(&run.initial);
    let t = Instant::now();
    for p in &run.patches {
        ours.set(p);
    }
    let mean = t.elapsed().as_nanos() as f64 / run.patches.len() as f64;
    if check {
        // Otherwise the floor would not be writing what our merges produce.
        assert!(
            ours.state() == *run.states.last().unwrap(),
            "growing state: the stored state is not the floor's"
        );
    }
    mean
}

/// The floor's run: a new plain table holding the initial state, then one whole-value
/// `BEGIN IMMEDIATE; UPDATE kv SET v = ?; COMMIT` per write, of the state our merge produces.
fn run_floor(path: &Path, run: &Run) -> f64 {
    remove_db(path);
    let floor = raw_store(path, "NORMAL", &run.initial);
    let t = Instant::now();
    for s in &run.states {
        floor.execute_batch("BEGIN IMMEDIATE").unwrap();
        floor
            .prepare_cached("UPDATE kv SET v = ?1 WHERE k = 'state'")
            .unwrap()
            .execute([s])
            .unwrap();
        floor.execute_batch("COMMIT").unwrap();
    }
    t.elapsed().as_nanos() as f64 / run.states.len() as f64
}

/// From each starting size, `WRITES` set_state calls at synchronous normal on disk, each adding
/// one new ~200-byte member, against the whole-value floor; ours and the floor from every size
/// in alternating rounds (a round runs each once, the starting one rotating), the median of
/// the rounds' mean cost per write. Rows: the cost from 256 KiB against the cost from 1 KiB
/// (target: at most 1.5×), and against the floor at each size (at 256 KiB at least 10×).
pub(crate) fn bench_growing(cfg: &Config, dir: &Path, rows: &mut Vec<Row>) {
    let writes = if cfg.smoke { 20 } else { WRITES };
    let runs: Vec<Run> = STARTS.iter().map(|&s| Run::new(s, writes)).collect();
    let ours_path = |k: usize| dir.join(format!("growing_ours_{}.db", STARTS[k]));
    let floor_path = |k: usize| dir.join(format!("growing_floor_{}.db", STARTS[k]));
    // A warm-up of each, which also checks that the floor writes what we store.
    for (k, run) in runs.iter().enumerate() {
        run_ours(&ours_path(k), run, true);
        run_floor(&floor_path(k), run);
    }
    // Contender 2k is ours from STARTS[k], 2k + 1 the floor from it.
    let n = 2 * runs.len();
    let mut samples = vec![Vec::new(); n];
    for r in 0..cfg.rounds() {
        for i in 0..n {
            let c = (r + i) % n;
            let (k, is_floor) = (c / 2, c % 2 == 1);
            samples[c].push(if is_floor {
                run_floor(&floor_path(k), &runs[k])
            } else {
                run_ours(&ours_path(k), &runs[k], false)
            });
        }
    }
    for k in 0..runs.len() {
        remove_db(&ours_path(k));
        remove_db(&floor_path(k));
    }
    let t: Vec<f64> = samples.into_iter().map(median).collect();
    let end = |k: usize| human(runs[k].states.last().unwrap().len());
    let last = runs.len() - 1;
    let base = |k: usize| Row {
        op: format!("set_state, +1 member of 200 B per write, to {}", end(k)),
        size: STARTS[k],
        dir: "disk".into(),
        sync: "normal".into(),
        ours_ns: t[2 * k],
        ..Row::default()
    };
    let factor = Row {
        alternative: format!("the same from 1 KiB, to {}", end(0)),
        alt_ns: t[0],
        target: Some(1.5),
        goal: Goal::CostAtMost,
        write_cost_target: "growing_factor".into(),
        ..base(last)
    };
    let note = format!(
        "mean over {writes} writes; a write from 256 KiB costs {:.2}× one from 1 KiB",
        1.0 / factor.ratio()
    );
    rows.push(Row { note, ..factor });
    for k in 0..runs.len() {
        let at_256 = k == last;
        rows.push(Row {
            alternative:
                "raw write floor of the merged state (BEGIN IMMEDIATE; UPDATE v=?; COMMIT)".into(),
            alt_ns: t[2 * k + 1],
            target: at_256.then_some(10.0),
            write_cost_target: if at_256 {
                "growing_floor".into()
            } else {
                String::new()
            },
            note: format!(
                "mean over {writes} writes{}",
                if at_256 { "" } else { "; information" }
            ),
            ..base(k)
        });
    }
}
