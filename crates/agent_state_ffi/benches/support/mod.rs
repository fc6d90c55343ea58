//! What the bench targets share (`mod support;` in each): the C ABI as a C program declares
//! it, the states and patches they write, the alternating-rounds race with its medians, and the
//! result table with its JSON. Each target uses a part of it.
#![allow(dead_code)]
// It calls the C ABI as a C program would, which takes `unsafe` (each block has its SAFETY note).
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

// Links the library, whose exported `agent_*` symbols the declarations resolve to.
extern crate agent_state_ffi;

use serde_json::{Map, Value};

// The header's declarations, shared with the tests and the ABI fuzz target.
#[path = "../../tests/support/abi.rs"]
mod abi;
use abi::*;

/// `agent_store_list` of the store at `path`: a page of `limit` after `after`; returns the
/// JSON's length (the page is read, as a caller would).
pub fn store_list(path: &CStr, after: &CStr, limit: u32) -> usize {
    let mut b = AgentBuffer::EMPTY;
    // SAFETY: valid NUL-terminated strings and out pointer; the buffer is freed below.
    check(
        unsafe {
            agent_store_list(
                path.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                after.as_ptr(),
                limit,
                &mut b,
            )
        },
        "agent_store_list",
    );
    let len = b.len;
    // SAFETY: a buffer the library filled.
    unsafe { agent_buffer_free(&mut b) };
    len
}

/// `agent_store_expire` of the store at `path` as a dry run: the `limit` longest idle agents
/// idle for more than `idle_ms`; returns the JSON's length.
pub fn store_expire_dry(path: &CStr, idle_ms: u64, limit: u32) -> usize {
    let mut b = AgentBuffer::EMPTY;
    // SAFETY: valid NUL-terminated string and out pointer; the buffer is freed below.
    check(
        unsafe { agent_store_expire(path.as_ptr(), std::ptr::null(), idle_ms, limit, 1, &mut b) },
        "agent_store_expire",
    );
    let len = b.len;
    // SAFETY: a buffer the library filled.
    unsafe { agent_buffer_free(&mut b) };
    len
}

fn check(status: i32, what: &str) {
    if status != 0 {
        // SAFETY: agent_last_error returns a valid NUL-terminated string owned by the library.
        let msg = unsafe { CStr::from_ptr(agent_last_error()) };
        panic!("{what} failed with {status}: {}", msg.to_string_lossy());
    }
}

/// An agent handle through the C ABI.
pub struct Abi(u64);

impl Abi {
    /// Opens `path`: a file, or a `postgresql://` URI (as a `Path`).
    pub fn open(path: &Path, options: &str) -> Abi {
        let p = CString::new(path.to_str().unwrap()).unwrap();
        let o = CString::new(options).unwrap();
        let mut h = 0;
        // SAFETY: valid NUL-terminated strings and out pointer.
        check(
            unsafe { agent_open(p.as_ptr(), o.as_ptr(), &mut h) },
            "agent_open",
        );
        Abi(h)
    }
    /// get_state, touching the first and last byte as a reader would.
    pub fn get(&self) -> usize {
        let mut b = AgentBuffer::EMPTY;
        // SAFETY: valid out pointer; the buffer is freed below.
        check(
            unsafe { agent_get_state(self.0, &mut b) },
            "agent_get_state",
        );
        // SAFETY: the library guarantees `len` readable bytes at `data`.
        let touched = unsafe { *b.data as usize + *b.data.add(b.len - 1) as usize };
        // SAFETY: a buffer the library filled.
        unsafe { agent_buffer_free(&mut b) };
        touched
    }
    /// get_state's bytes, copied out (for the benches' checks, not their timed loops).
    pub fn state(&self) -> Vec<u8> {
        let mut b = AgentBuffer::EMPTY;
        // SAFETY: valid out pointer; the buffer is freed below.
        check(
            unsafe { agent_get_state(self.0, &mut b) },
            "agent_get_state",
        );
        // SAFETY: the library guarantees `len` readable bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(b.data, b.len) }.to_vec();
        // SAFETY: a buffer the library filled.
        unsafe { agent_buffer_free(&mut b) };
        bytes
    }
    pub fn set(&self, patch: &[u8]) {
        // SAFETY: `patch` is valid for its length; no output requested.
        check(
            unsafe { agent_set_state(self.0, patch.as_ptr(), patch.len(), std::ptr::null_mut()) },
            "agent_set_state",
        );
    }
    /// patch_state: `operations`, an RFC 6902 JSON Patch.
    pub fn patch(&self, operations: &[u8]) {
        // SAFETY: as for set.
        check(
            unsafe {
                agent_patch_state(
                    self.0,
                    operations.as_ptr(),
                    operations.len(),
                    std::ptr::null_mut(),
                )
            },
            "agent_patch_state",
        );
    }
    pub fn replace(&self, next: &[u8]) {
        // SAFETY: as for set.
        check(
            unsafe { agent_replace_state(self.0, next.as_ptr(), next.len(), std::ptr::null_mut()) },
            "agent_replace_state",
        );
    }
}

impl Drop for Abi {
    fn drop(&mut self) {
        // SAFETY: closing a handle we opened.
        unsafe { agent_close(self.0) };
    }
}

/// The RFC 7396 merge a user would write over serde_json.
pub fn hand_merge(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let t = target.as_object_mut().unwrap();
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                hand_merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    } else {
        *target = patch.clone();
    }
}

/// A state of about `size` bytes: a status plus members of ~250 bytes each.
pub fn make_state(size: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"status":"idle""#);
    let mut i = 0;
    while s.len() + 260 < size || i < 2 {
        write!(
            s,
            r#","m{i}":{{"id":{i},"name":"member {i}","tags":["alpha","beta"],"score":0.5,"text":"{}"}}"#,
            "x".repeat(150)
        )
        .unwrap();
        i += 1;
    }
    s.push('}');
    s.into_bytes()
}

/// Patches touching two members (a scalar and a nested field), cycling through `n` variants.
pub fn make_patches(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            format!(
                r#"{{"status":"s{i}","m1":{{"id":{i},"score":{}.25}}}}"#,
                i % 7
            )
            .into_bytes()
        })
        .collect()
}

/// The states our merges produce, precomputed for the write floor (so it writes the same bytes).
pub fn states_after(state: &[u8], patches: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(state).unwrap();
    patches
        .iter()
        .map(|p| {
            hand_merge(&mut v, &serde_json::from_slice(p).unwrap());
            serde_json::to_vec(&v).unwrap()
        })
        .collect()
}

pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Runs the contenders in alternating rounds of `ops` operations; returns median ns/op each.
pub fn race(contenders: &mut [&mut dyn FnMut(usize)], rounds: usize, ops: usize) -> Vec<f64> {
    let n = contenders.len();
    let mut samples = vec![Vec::new(); n];
    let mut counter = 0usize;
    for f in contenders.iter_mut() {
        f(counter); // warm up
    }
    for r in 0..rounds {
        for k in 0..n {
            let c = (r + k) % n;
            let t = Instant::now();
            for _ in 0..ops {
                counter += 1;
                (contenders[c])(counter);
            }
            samples[c].push(t.elapsed().as_nanos() as f64 / ops as f64);
        }
    }
    samples.into_iter().map(median).collect()
}

/// `--smoke`, `--out FILE` (`default_out` without it) and `--only CASE` (one group of rows,
/// for a quick measurement of it: `nested`, `append`, `hot`, `floor` or `log` in the abi bench;
/// `nested` or `append` in the postgres bench).
pub struct Args {
    pub smoke: bool,
    pub out: PathBuf,
    pub only: Option<String>,
}

impl Args {
    pub fn parse(default_out: &str) -> Args {
        let args: Vec<String> = std::env::args().collect();
        Args {
            smoke: args.iter().any(|a| a == "--smoke"),
            out: args
                .iter()
                .position(|a| a == "--out")
                .and_then(|i| args.get(i + 1))
                .map(PathBuf::from)
                // Relative to the workspace, not to the directory cargo runs benches in (the
                // crate's): a bare `cargo bench` writes where bench/run.sh does.
                .unwrap_or_else(|| {
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../..")
                        .join(default_out)
                }),
            only: args
                .iter()
                .position(|a| a == "--only")
                .and_then(|i| args.get(i + 1))
                .cloned(),
        }
    }
    /// Whether the group of rows `case` runs (all do without `--only`).
    pub fn runs(&self, case: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == case)
    }
    pub fn rounds(&self) -> usize {
        if self.smoke {
            3
        } else {
            15
        }
    }
}

// The result rows, their targets, the printed table and its JSON.
mod table;
pub use table::*;

/// The names of the objects a nested state's members sit in, outermost first: a state
/// `depth` levels deep keeps them at `/msgs`, `/msgs/thread`, ... (as users keep a
/// conversation: a status beside it at the top level).
pub const NESTED_PATH: [&str; 4] = ["msgs", "thread", "turns", "items"];

/// `make_state(size)` with its members (all but the status) moved `depth` levels down, inside
/// the objects of [`NESTED_PATH`]: `{"status":"idle","msgs":{"thread":{"m0":{...},...}}}` for
/// depth 2; depth 0 is `make_state(size)` itself.
pub fn make_nested_state(size: usize, depth: usize) -> Vec<u8> {
    let flat = String::from_utf8(make_state(size)).unwrap();
    let head = r#"{"status":"idle","#;
    let members = &flat[head.len()..flat.len() - 1];
    let mut s = String::from(head);
    for name in &NESTED_PATH[..depth] {
        write!(s, r#""{name}":{{"#).unwrap();
    }
    s.push_str(members);
    for _ in 0..depth {
        s.push('}');
    }
    s.push('}');
    s.into_bytes()
}

/// Write `step`'s merge patch on a state of [`make_nested_state`] at `depth`: the status
/// changed, and one new member of 200 bytes (`"note00007":{...}`) added `depth` levels down.
pub fn make_nested_patch(depth: usize, step: usize) -> Vec<u8> {
    let head = format!(r#""note{step:05}":{{"id":{step},"kind":"tool_result","text":""#);
    let member = format!("{head}{}\"}}", "y".repeat(200 - head.len() - 2));
    debug_assert_eq!(member.len(), 200);
    let mut s = format!(r#"{{"status":"s{step}","#);
    for name in &NESTED_PATH[..depth] {
        write!(s, r#""{name}":{{"#).unwrap();
    }
    s.push_str(&member);
    for _ in 0..depth {
        s.push('}');
    }
    s.push('}');
    s.into_bytes()
}

/// The depths of the nested rows: the top level (the baseline), then 1, 2 and 4 levels down.
pub const NESTED_DEPTHS: [usize; 4] = [0, 1, 2, 4];
/// Their state sizes, and the writes of a run (each adds one member).
pub const NESTED_SIZES: [usize; 2] = [1024, 256 * 1024];
pub const NESTED_WRITES: usize = 300;

/// The nested rows of one backend from the median cost per write of each run, `t[size][depth]`
/// (indexes into [`NESTED_SIZES`] and [`NESTED_DEPTHS`]): a row per size and depth below the
/// top, its cost against the same at the top level (target: at most 1.3×).
pub fn nested_rows(t: &[Vec<f64>], writes: usize, dir: &str, rows: &mut Vec<Row>) {
    for (s, &size) in NESTED_SIZES.iter().enumerate() {
        for (d, &depth) in NESTED_DEPTHS.iter().enumerate().skip(1) {
            let row = Row {
                op: format!(
                    "set_state, +1 member of 200 B {depth} level{} down",
                    if depth == 1 { "" } else { "s" }
                ),
                size,
                dir: dir.into(),
                sync: "normal".into(),
                ours_ns: t[s][d],
                alternative: "the same member added at the top level".into(),
                alt_ns: t[s][0],
                target: Some(1.3),
                goal: Goal::CostAtMost,
                write_cost_target: format!("nested_{depth}"),
                ..Row::default()
            };
            let note = format!(
                "mean over {writes} writes; {depth} level{} down costs {:.2}× the top level",
                if depth == 1 { "" } else { "s" },
                1.0 / row.ratio()
            );
            rows.push(Row { note, ..row });
        }
    }
}
