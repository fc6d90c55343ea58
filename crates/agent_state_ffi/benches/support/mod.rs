//! What the bench targets share (`mod support;` in each): the C ABI as a C program declares
//! it, the states and patches they write, the alternating-rounds race with its medians, and the
//! result table with its JSON. Each target uses a part of it.
#![allow(dead_code)]
// It calls the C ABI as a C program would, which takes `unsafe` (each block has its SAFETY note).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

// Links the library, whose exported `agent_*` symbols the declarations below resolve to.
extern crate agent_state_ffi;

use serde_json::{Map, Value};

#[repr(C)]
struct AgentBuffer {
    data: *const u8,
    len: usize,
    owner: *mut c_void,
}

extern "C" {
    fn agent_open(path: *const c_char, options: *const c_char, out: *mut u64) -> i32;
    fn agent_close(h: u64) -> i32;
    fn agent_get_state(h: u64, out: *mut AgentBuffer) -> i32;
    fn agent_set_state(h: u64, patch: *const u8, len: usize, out: *mut AgentBuffer) -> i32;
    fn agent_replace_state(h: u64, next: *const u8, len: usize, out: *mut AgentBuffer) -> i32;
    fn agent_buffer_free(buf: *mut AgentBuffer);
    fn agent_last_error() -> *const c_char;
    fn agent_store_list(
        path: *const c_char,
        options: *const c_char,
        prefix: *const c_char,
        after: *const c_char,
        limit: u32,
        out: *mut AgentBuffer,
    ) -> i32;
    fn agent_store_expire(
        path: *const c_char,
        options: *const c_char,
        idle_ms: u64,
        limit: u32,
        dry_run: i32,
        out: *mut AgentBuffer,
    ) -> i32;
}

/// `agent_store_list` of the store at `path`: a page of `limit` after `after`; returns the
/// JSON's length (the page is read, as a caller would).
pub fn store_list(path: &CStr, after: &CStr, limit: u32) -> usize {
    let mut b = AgentBuffer {
        data: std::ptr::null(),
        len: 0,
        owner: std::ptr::null_mut(),
    };
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
    let mut b = AgentBuffer {
        data: std::ptr::null(),
        len: 0,
        owner: std::ptr::null_mut(),
    };
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
        let mut b = AgentBuffer {
            data: std::ptr::null(),
            len: 0,
            owner: std::ptr::null_mut(),
        };
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
    pub fn set(&self, patch: &[u8]) {
        // SAFETY: `patch` is valid for its length; no output requested.
        check(
            unsafe { agent_set_state(self.0, patch.as_ptr(), patch.len(), std::ptr::null_mut()) },
            "agent_set_state",
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

#[derive(Default)]
pub struct Row {
    /// The figure of the issue this row measures ("1", "6b", ...); empty when none.
    pub fig: String,
    pub op: String,
    pub size: usize,
    /// The directory kind (disk, tmpfs); empty where the table has no such column.
    pub dir: String,
    pub sync: String,
    pub ours_ns: f64,
    pub alternative: String,
    pub alt_ns: f64,
    pub target: Option<f64>,
    /// The target is a stretch goal: the verdict reads "stretch PASS" / "stretch MISS" and is
    /// not counted among the missed targets.
    pub stretch: bool,
    /// Printed in the table's last column: a stretch goal beyond the target, extra figures.
    pub note: String,
}

impl Row {
    pub fn ratio(&self) -> f64 {
        self.alt_ns / self.ours_ns
    }
    pub fn verdict(&self) -> &'static str {
        match (self.target, self.stretch) {
            (None, _) => "",
            (Some(t), false) if self.ratio() >= t => "PASS",
            (Some(_), false) => "MISS",
            (Some(t), true) if self.ratio() >= t => "stretch PASS",
            (Some(_), true) => "stretch MISS",
        }
    }
    /// A note naming a stretch goal beyond the target and whether this run met it.
    pub fn stretch_note(&self, stretch: f64) -> String {
        format!(
            "stretch ≥ {stretch}×: {}",
            if self.ratio() >= stretch {
                "met"
            } else {
                "not met"
            }
        )
    }
}

/// `--smoke` and `--out FILE` (`default_out` without it).
pub struct Args {
    pub smoke: bool,
    pub out: PathBuf,
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
                .unwrap_or_else(|| PathBuf::from(default_out)),
        }
    }
    pub fn rounds(&self) -> usize {
        if self.smoke {
            3
        } else {
            15
        }
    }
}

/// Prints the rows as a Markdown table (with the `dir` column when `with_dir`); returns how
/// many missed their target.
pub fn print_table(rows: &[Row], with_dir: bool) -> usize {
    let dir_head = if with_dir { " dir |" } else { "" };
    println!(
        "| fig. | operation | state |{dir_head} sync | ours (µs) | alternative | alt (µs) | ratio alt/ours | target | | note |"
    );
    println!(
        "|---|---|---|{}---|---|---|---|---|---|---|---|",
        if with_dir { "---|" } else { "" }
    );
    let mut misses = 0;
    for r in rows {
        if r.verdict() == "MISS" {
            misses += 1;
        }
        let dir = if with_dir {
            format!(" {} |", r.dir)
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {} |{dir} {} | {:.3} | {} | {:.3} | {:.2}× | {} | {} | {} |",
            r.fig,
            r.op,
            human(r.size),
            r.sync,
            r.ours_ns / 1000.0,
            r.alternative,
            r.alt_ns / 1000.0,
            r.ratio(),
            r.target
                .map(|t| format!("≥ {}×", round3(t)))
                .unwrap_or_default(),
            r.verdict(),
            r.note
        );
    }
    misses
}

/// The rows as JSON, `{"mode":...,"rows":[...]` followed by `extra` (members, each with a
/// leading comma) and the closing brace, written to `out`.
pub fn write_json(out: &Path, smoke: bool, rows: &[Row], with_dir: bool, extra: &str) {
    let mut json = String::from("{\"mode\":");
    write!(
        json,
        "\"{}\",\"rows\":[",
        if smoke { "smoke" } else { "full" }
    )
    .unwrap();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        let dir = if with_dir {
            format!(r#""dir":"{}","#, r.dir)
        } else {
            String::new()
        };
        write!(
            json,
            r#"{{"fig":"{}","op":"{}","size":{},{dir}"sync":"{}","ours_ns":{:.1},"alternative":"{}","alt_ns":{:.1},"ratio":{:.4},"target":{},"stretch":{},"verdict":"{}","note":{}}}"#,
            r.fig, r.op, r.size, r.sync, r.ours_ns, r.alternative, r.alt_ns, r.ratio(),
            r.target.map(|t| t.to_string()).unwrap_or_else(|| "null".into()), r.stretch,
            r.verdict(), serde_json::to_string(&r.note).unwrap()
        )
        .unwrap();
    }
    write!(json, "]{extra}}}").unwrap();
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(out, json).unwrap();
    eprintln!("raw figures: {}", out.display());
}

/// `t` to three decimals, without trailing zeros (1/1.3 prints as 0.769).
pub fn round3(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub fn human(size: usize) -> String {
    if size >= 1024 {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}
