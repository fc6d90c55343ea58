//! The Rust runner of the cross-language conformance vectors (tests/conformance/README.md):
//! every file of tests/conformance/vectors, each vector on a fresh store, through the core's
//! Rust API (`Agent`, `OpenOptions::from_json`, `StateChangedHook`, `Validator`).
//!
//! Like the C runner (tests/conformance/run_c.c), it passes inputs and open options as JSON
//! text and compares the library's output bytes with the expected value written compactly:
//! serde_json here is the workspace's, with `arbitrary_precision` (numbers keep their text)
//! and `preserve_order` (members keep their place), and it escapes strings as the library does,
//! so `expect` values (written in the library's output form) come back byte for byte. A status
//! is `AGENT_OK` or `"AGENT_ERR_" + ErrorKind::name()`, the C names; a `message` must be part
//! of the error's Display text (what the C ABI's `agent_last_error` reports after its
//! `"<function>: "` prefix).
//!
//! tests/conformance/binding_values.json is not run: it describes native values of the Python
//! and Go bindings, which the Rust API (raw JSON text in and out) has no counterpart of.
//!
//! One line per vector (`ok`, `FAIL` with the reason, `skip` for a vector restricted to other
//! runners or backends), then the skipped count and "N passed, M failed"; the test fails when
//! any vector failed. It runs on each backend (`#[each_backend]`, crates/test-support): the store
//! is a fresh SQLite file per vector, or a fresh agent `rust_<pid>_<start>_<n>` of the server
//! `AGENT_STATE_TEST_PG_URI` (skipped without it, a failure under CI=true).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Error, OpenOptions, StateChange, StateChangedHook, Validator};
use serde_json::{Map, Value};

use test_support::{each_backend, Place, TempDir};

/// This runner's name in the vectors' `runners` lists (and its agent ids' prefix).
const RUNNER: &str = "rust";

type Object = Map<String, Value>;

/// The vector files, sorted.
fn vector_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "vector files in {}: {files:?}",
        dir.display()
    );
    files
}

/// Whether `vector`'s list `field` (`runners`, `backends`) is absent or names `name`.
fn listed(vector: &Object, field: &str, name: &str) -> bool {
    match vector.get(field) {
        None => true,
        Some(list) => list
            .as_array()
            .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(name))),
    }
}

/// A text form: a string, or pieces (strings and `[string, count]` pairs) joined.
fn text_form(form: &Value) -> Option<Vec<u8>> {
    if let Some(s) = form.as_str() {
        return Some(s.as_bytes().to_vec());
    }
    let mut out = Vec::new();
    for piece in form.as_array()? {
        let (text, count) = match piece {
            Value::String(s) => (s.as_str(), 1),
            Value::Array(pair) if pair.len() == 2 => (pair[0].as_str()?, pair[1].as_u64()?),
            _ => return None,
        };
        for _ in 0..count {
            out.extend_from_slice(text.as_bytes());
        }
    }
    Some(out)
}

/// The expected bytes of `field` of `obj`: its value written compactly, or its `<field>_text`.
/// `None` when there is neither; `Some(None)` when the expectation is unusable.
fn expected(obj: &Object, field: &str) -> Option<Option<Vec<u8>>> {
    if let Some(value) = obj.get(field) {
        return Some(serde_json::to_vec(value).ok());
    }
    obj.get(&format!("{field}_text")).map(text_form)
}

/// An op's input bytes: `input_hex`, `input` (compact JSON) or `input_text`.
fn input(op: &Object) -> Option<Vec<u8>> {
    if let Some(hex) = op.get("input_hex") {
        let hex = hex.as_str()?.as_bytes();
        if hex.len() % 2 != 0 {
            return None;
        }
        return hex
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
            .collect();
    }
    expected(op, "input").flatten()
}

fn has_member(state: &[u8], name: &str) -> bool {
    serde_json::from_slice::<Value>(state).is_ok_and(|v| v.get(name).is_some())
}

/// The C name of an outcome's status.
fn status_name<T>(outcome: &Result<T, Error>) -> String {
    match outcome {
        Ok(_) => "AGENT_OK".to_string(),
        Err(e) => format!("AGENT_ERR_{}", e.kind().name()),
    }
}

/// One hook delivery as recorded.
struct Event {
    next: Vec<u8>,
    prev: Vec<u8>,
    patch: Option<Vec<u8>>,
    version: u64,
}

/// The recording hook: registered at every open of a vector (so the deliveries of every
/// handle collect in one list), failing when the new state has the member `fail_when`.
struct Recorder {
    events: Mutex<Vec<Event>>,
    fail_when: Option<String>,
}

impl StateChangedHook for Recorder {
    fn on_state_changed(&self, c: &StateChange) -> Result<(), String> {
        self.events.lock().unwrap().push(Event {
            next: c.next.json().to_vec(),
            prev: c.prev.json().to_vec(),
            patch: c.patch.as_ref().map(|p| p.json().to_vec()),
            version: c.version,
        });
        match &self.fail_when {
            Some(name) if has_member(c.next.json(), name) => {
                Err(format!("the hook fails on the member {name}"))
            }
            _ => Ok(()),
        }
    }
}

/// The validator: rejects every change whose new state has the member `rejects`.
struct Gate {
    rejects: String,
}

impl Validator for Gate {
    fn validate(&self, c: &StateChange) -> Result<(), String> {
        if has_member(c.next.json(), &self.rejects) {
            return Err(format!(
                "the state may not have the member {}",
                self.rejects
            ));
        }
        Ok(())
    }
}

/// Where the next vector's store lives: a fresh SQLite file in `dir`, or on PostgreSQL the
/// server's URI and a fresh agent id, which every open of the vector sets.
fn store_location(dir: &TempDir) -> (PathBuf, Option<String>) {
    static N: AtomicUsize = AtomicUsize::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let n = N.fetch_add(1, Ordering::Relaxed) + 1;
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    });
    let pid = std::process::id();
    match dir.store(&format!("{RUNNER}{pid}_{n}.db")) {
        Place::Sqlite { path, .. } => (path, None),
        Place::Postgres { uri, .. } => (
            PathBuf::from(uri),
            Some(format!("{RUNNER}_{pid}_{start:x}_{n}")),
        ),
    }
}

/// One vector's run: its store, its handle, its hook and gate.
struct Run<'a> {
    vector: &'a Object,
    path: PathBuf,
    agent_id: Option<String>,
    agent: Option<Agent>,
    recorder: Arc<Recorder>,
    gate: Option<Arc<Gate>>,
}

type Check = Result<(), String>;

/// The outcome (of an op, or of the open: `what`) has the status `want` (default `AGENT_OK`)
/// and, when it failed, a message containing `part`.
fn status_ok<T>(
    what: &str,
    outcome: &Result<T, Error>,
    want: Option<&Value>,
    part: Option<&Value>,
) -> Check {
    let got = status_name(outcome);
    let want = want.and_then(Value::as_str).unwrap_or("AGENT_OK");
    let msg = outcome
        .as_ref()
        .err()
        .map(Error::to_string)
        .unwrap_or_default();
    if got != want {
        return Err(format!("{what}got {got} ({msg}), want {want}"));
    }
    match part.and_then(Value::as_str) {
        Some(part) if outcome.is_err() && !msg.contains(part) => Err(format!(
            "{what}message \"{msg}\" does not contain \"{part}\""
        )),
        _ => Ok(()),
    }
}

/// `actual` equals the expectation `field` of `obj`, when there is one.
fn expect_ok(what: &str, obj: &Object, field: &str, actual: &[u8]) -> Check {
    match expected(obj, field) {
        None => Ok(()),
        Some(Some(want)) if want == actual => Ok(()),
        Some(want) => Err(format!(
            "{what}: got {:.400}, want {:.400}",
            String::from_utf8_lossy(actual),
            want.map_or("(unusable expectation)".into(), |w| {
                String::from_utf8_lossy(&w).into_owned()
            })
        )),
    }
}

/// `got` equals the version `want` (when given).
fn version_ok(want: Option<&Value>, got: u64) -> Check {
    match want {
        Some(want) if want.as_u64() != Some(got) => Err(format!("version {got}, want {want}")),
        _ => Ok(()),
    }
}

impl Run<'_> {
    /// The handle (`Error::Closed` after a failed reopen, as C's zero handle is refused).
    fn agent(&self) -> Result<&Agent, Error> {
        self.agent.as_ref().ok_or(Error::Closed)
    }

    fn close(&mut self) {
        if let Some(agent) = self.agent.take() {
            let _ = agent.close();
        }
    }

    /// Opens the store with `options` (as JSON text; `None`: the defaults) and registers the
    /// vector's hook and gate.
    fn open(&mut self, options: Option<&Value>) -> Result<(), Error> {
        self.close();
        let mut opts = match options {
            Some(v) => OpenOptions::from_json(&serde_json::to_vec(v).unwrap())?,
            None => OpenOptions::default(),
        };
        if self.agent_id.is_some() {
            opts.agent_id.clone_from(&self.agent_id);
        }
        let agent = Agent::open_with(&self.path, &opts)?;
        if self.vector.contains_key("hooks") || self.recorder.fail_when.is_some() {
            agent.on_state_changed(self.recorder.clone())?;
        }
        if let Some(gate) = &self.gate {
            agent.set_validator(Some(gate.clone()))?;
        }
        self.agent = Some(agent);
        Ok(())
    }

    /// The store's version now equals `want` (when given).
    fn version_now_ok(&self, want: Option<&Value>) -> Check {
        if want.is_none() {
            return Ok(());
        }
        let now = self.agent().and_then(Agent::get_state_versioned);
        let now = now.map_err(|e| format!("reading the version failed: {e}"))?;
        version_ok(want, now.version)
    }

    fn events_ok(&self, want: Option<&Value>) -> Check {
        let want = want
            .and_then(Value::as_array)
            .ok_or("events op without an \"events\" array")?;
        let mut events = self.recorder.events.lock().unwrap();
        if want.len() != events.len() {
            return Err(format!("{} deliveries, want {}", events.len(), want.len()));
        }
        for (k, (e, w)) in events.iter().zip(want).enumerate() {
            let w = w.as_object().ok_or("an event is not an object")?;
            let k = k + 1;
            expect_ok(&format!("delivery {k} next"), w, "next", &e.next)?;
            expect_ok(&format!("delivery {k} prev"), w, "prev", &e.prev)?;
            let patch = e.patch.as_deref().unwrap_or(b"null");
            expect_ok(&format!("delivery {k} patch"), w, "patch", patch)?;
            version_ok(w.get("version"), e.version)?;
        }
        events.clear();
        Ok(())
    }

    fn run_op(&mut self, op: &Object) -> Check {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let (status, message) = (op.get("status"), op.get("message"));
        match name {
            "events" => return self.events_ok(op.get("events")),
            "reopen" => {
                let options = op.get("open").or(self.vector.get("open"));
                let outcome = self.open(options);
                return status_ok("", &outcome, status, message);
            }
            _ => {}
        }
        // The state's text and, where the call returns one, its version.
        let outcome: Result<(Vec<u8>, Option<u64>), Error> = if name == "get" {
            let v = self.agent().and_then(Agent::get_state_versioned);
            v.map(|v| (v.state.json().to_vec(), Some(v.version)))
        } else {
            let input = input(op).ok_or_else(|| format!("op {name} has no input"))?;
            let expected = match op.get("if_version") {
                None => 0,
                Some(v) => v.as_u64().ok_or("if_version is not a version")?,
            };
            let agent = self.agent();
            match name {
                "set" => agent
                    .and_then(|a| a.set_state(&input))
                    .map(|s| (s.json().to_vec(), None)),
                "replace" => agent
                    .and_then(|a| a.replace_state(&input))
                    .map(|s| (s.json().to_vec(), None)),
                "set_if" => agent
                    .and_then(|a| a.set_state_if(&input, Some(expected)))
                    .map(|v| (v.state.json().to_vec(), Some(v.version))),
                "replace_if" => agent
                    .and_then(|a| a.replace_state_if(&input, Some(expected)))
                    .map(|v| (v.state.json().to_vec(), Some(v.version))),
                "patch" => agent
                    .and_then(|a| a.patch_state(&input))
                    .map(|s| (s.json().to_vec(), None)),
                "patch_if" => agent
                    .and_then(|a| a.patch_state_if(&input, Some(expected)))
                    .map(|v| (v.state.json().to_vec(), Some(v.version))),
                _ => return Err(format!("unknown op {name}")),
            }
        };
        status_ok("", &outcome, status, message)?;
        match outcome {
            Ok((state, version)) => {
                expect_ok("state", op, "expect", &state)?;
                match version {
                    Some(v) => version_ok(op.get("version"), v),
                    None => self.version_now_ok(op.get("version")),
                }
            }
            Err(_) => self.version_now_ok(op.get("version")),
        }
    }

    fn run(&mut self) -> Check {
        let open_status = self.vector.get("open_status");
        let outcome = self.open(self.vector.get("open"));
        if open_status.is_some() || outcome.is_err() {
            let part = self.vector.get("open_message");
            status_ok("open: ", &outcome, open_status, part)?;
        }
        if open_status.is_some() {
            return Ok(()); // no ops then
        }
        let ops = self.vector.get("ops").and_then(Value::as_array);
        for (k, op) in ops.into_iter().flatten().enumerate() {
            let op = op
                .as_object()
                .ok_or(format!("op {} is not an object", k + 1))?;
            self.run_op(op)
                .map_err(|why| format!("op {}: {why}", k + 1))?;
        }
        Ok(())
    }
}

/// Removes a vector's SQLite file and its WAL companions (nothing for an agent on a server).
fn drop_store(path: &Path, agent_id: &Option<String>) {
    if agent_id.is_none() {
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let _ = std::fs::remove_file(name);
        }
    }
}

#[each_backend]
fn conformance_vectors() {
    let backend = if test_support::sqlite() {
        "sqlite"
    } else {
        "postgres"
    };
    let dir = TempDir::new("conformance");
    println!("agent_state conformance vectors, Rust runner, backend {backend}");
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for file in vector_files() {
        let label = file.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
        let label = label.unwrap_or(&file).display().to_string();
        let root: Value = match std::fs::read(&file).map(|b| serde_json::from_slice(&b)) {
            Ok(Ok(root)) => root,
            other => {
                println!("FAIL {label}: cannot read the vectors ({other:?})");
                failed += 1;
                continue;
            }
        };
        let vectors = root.get("vectors").and_then(Value::as_array);
        for vector in vectors.into_iter().flatten() {
            let vector = vector.as_object().expect("a vector is an object");
            let name = vector.get("name").and_then(Value::as_str).unwrap_or("?");
            if !listed(vector, "runners", RUNNER) || !listed(vector, "backends", backend) {
                println!("skip {label}: {name}");
                skipped += 1;
                continue;
            }
            let (path, agent_id) = store_location(&dir);
            let mut run = Run {
                vector,
                path,
                agent_id,
                agent: None,
                recorder: Arc::new(Recorder {
                    events: Mutex::new(Vec::new()),
                    fail_when: vector
                        .get("hook_fails_when")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                }),
                gate: vector
                    .get("validator_rejects")
                    .and_then(Value::as_str)
                    .map(|m| {
                        Arc::new(Gate {
                            rejects: m.to_string(),
                        })
                    }),
            };
            let result = run.run();
            run.close();
            drop_store(&run.path, &run.agent_id);
            match result {
                Ok(()) => {
                    passed += 1;
                    println!("ok   {label}: {name}");
                }
                Err(why) => {
                    failed += 1;
                    println!("FAIL {label}: {name}: {why}");
                }
            }
        }
    }
    println!("{skipped} skipped (restricted to other runners or backends)");
    println!("{passed} passed, {failed} failed");
    assert_eq!(
        failed, 0,
        "{failed} conformance vectors failed (see the FAIL lines)"
    );
}
