//! Helpers shared by the workspace's Rust tests (the core's suites, the CLI's).
//!
//! A test of the library's behaviour is declared once and runs on both backends: a function
//! marked [`#[each_backend]`](each_backend) becomes two tests, `NAME::sqlite` and
//! `NAME::postgres`, each calling it through [`run`], which sets the backend of the test's
//! thread. The test asks a [`TempDir`] for a store ([`TempDir::store`], a [`Place`]) and
//! [`open`]s it: a SQLite file in the directory, or an agent of the PostgreSQL server
//! `AGENT_STATE_TEST_PG_URI` names (tests/pg/with-server.sh starts one; `make test` runs the
//! suites with it). Without that URI a PostgreSQL variant says it was skipped and passes, except
//! under `CI=true`, where it fails.
//!
//! The tests of SQLite files themselves (raw access to the file, old schemas, modes, file
//! descriptors) are plain `#[test]`s, on SQLite: they start with [`sqlite_only!`], which says
//! why, and use [`TempDir::file`]. A test that must be alone in its process (it forks, or
//! counts the process's threads) is marked [`#[own_process]`](own_process).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Once, OnceLock, PoisonError, RwLock};

use agent_state::{Agent, OpenOptions, Result};
use serde_json::Value;

/// `#[each_backend]` on a test function: the tests `NAME::sqlite` and `NAME::postgres`, each
/// running it through [`run`] on its backend; `#[each_backend(whole_store)]`, for a test that
/// acts on every agent of the store (expiry of whatever is idle), through
/// [`run_on_whole_store`]. A test of SQLite alone (one that uses [`sqlite_only!`]) is refused:
/// it is a plain `#[test]`.
///
/// `#[own_process]` on a test function: the test runs through [`own_process`], alone in a
/// process of its own.
pub use test_support_macros::{each_backend, own_process};

/// The storage backend a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

thread_local! {
    /// The backend of the test running on this thread: SQLite but inside [`run`].
    static BACKEND: Cell<Backend> = const { Cell::new(Backend::Sqlite) };
}

/// Runs `test` on `backend` (the variants `#[each_backend]` declares call it): the helpers
/// ([`TempDir`], [`sqlite`], [`sqlite_only!`]) go by it on this thread until `test` returns.
/// On PostgreSQL without `AGENT_STATE_TEST_PG_URI`, `test` is skipped with a notice; under
/// `CI=true` that is a failure. On PostgreSQL, the tests of this process share the database
/// (each in a namespace of its own), but not with a test that runs on the whole store.
pub fn run(backend: Backend, test: fn()) {
    let _shared = (backend == Backend::Postgres)
        .then(|| DATABASE.read().unwrap_or_else(PoisonError::into_inner));
    with_backend(backend, test);
}

/// [`run`] for a test that acts on every agent of its store, as an expiry of whatever is idle
/// does: on PostgreSQL, where the store is the database all tests share, no other test of this
/// process runs while it does (on SQLite the store is the test's own file).
pub fn run_on_whole_store(backend: Backend, test: fn()) {
    let _alone = (backend == Backend::Postgres)
        .then(|| DATABASE.write().unwrap_or_else(PoisonError::into_inner));
    with_backend(backend, test);
}

/// The PostgreSQL tests' turns on the test database: shared, or one test alone
/// ([`run_on_whole_store`]).
static DATABASE: RwLock<()> = RwLock::new(());

/// Runs `test` with `backend` as the backend of this thread (or skips it: see [`run`]).
fn with_backend(backend: Backend, test: fn()) {
    if backend == Backend::Postgres && pg_uri().is_none() {
        skip();
        return;
    }
    /// Puts the thread's backend back, also when `test` panics.
    struct Restore(Backend);
    impl Drop for Restore {
        fn drop(&mut self) {
            BACKEND.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BACKEND.with(|b| b.replace(backend)));
    test();
}

/// The backend of the test running on this thread.
pub fn backend() -> Backend {
    BACKEND.with(Cell::get)
}

/// Whether the test running on this thread is on SQLite.
pub fn sqlite() -> bool {
    backend() == Backend::Sqlite
}

/// The test server's URI (`AGENT_STATE_TEST_PG_URI`), `None` without one.
fn pg_uri() -> Option<&'static str> {
    static URI: OnceLock<Option<String>> = OnceLock::new();
    URI.get_or_init(|| {
        std::env::var("AGENT_STATE_TEST_PG_URI")
            .ok()
            .filter(|uri| !uri.is_empty())
    })
    .as_deref()
}

/// A PostgreSQL variant without a server: a failure under `CI=true`, else a notice (in the
/// test's output, and once per test binary where the harness does not capture it).
fn skip() {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "AGENT_STATE_TEST_PG_URI is unset under CI=true: the PostgreSQL variant cannot run"
    );
    eprintln!("skipped: AGENT_STATE_TEST_PG_URI is unset (no PostgreSQL server)");
    static NOTICE: Once = Once::new();
    NOTICE.call_once(|| {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: the PostgreSQL variants of this binary's tests (AGENT_STATE_TEST_PG_URI \
             is unset: no PostgreSQL server)"
        );
    });
}

/// Returns from a test of SQLite files when it runs on PostgreSQL (such a test is a plain
/// `#[test]`, on SQLite, so this says why it is SQLite's alone).
#[macro_export]
macro_rules! sqlite_only {
    ($why:literal) => {
        if !$crate::sqlite() {
            return;
        }
    };
}

/// The name the test harness gives the test function `name` of the module `module_path`
/// (`module_path!()`): its path in the test binary, without the crate's name. What `--exact`
/// takes, to run one test of this binary in a child process.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

/// Runs `test`, the body of the test `name` of the module `module_path` (`#[own_process]`
/// passes them), alone in a process: this test binary run again with only that test, so that
/// no other test's thread is there while it forks or counts the process's threads. Its output
/// is this test's; the test fails when it fails there.
pub fn own_process(module_path: &str, name: &str, test: impl FnOnce()) {
    const ALONE: &str = "TEST_SUPPORT_OWN_PROCESS";
    let name = test_name(module_path, name);
    if std::env::var(ALONE).as_deref() == Ok(name.as_str()) {
        test();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(ALONE, &name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its own process");
    assert!(
        stdout.contains("1 passed"),
        "{name} did not run in its own process"
    );
}

/// Where a test's stores live: a directory under the system temp dir, removed when dropped;
/// on PostgreSQL also a namespace of agent ids no other test (or run) uses.
pub struct TempDir {
    dir: PathBuf,
    namespace: String,
    /// The backend of the test that made it (its stores are there, on any thread).
    backend: Backend,
}

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let unique = format!("{name}_{}_{n}", std::process::id());
        let dir = std::env::temp_dir().join(format!("agent_state_test_{unique}"));
        std::fs::create_dir_all(&dir).unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        TempDir {
            dir,
            namespace: format!("{unique}_{nanos}"),
            backend: backend(),
        }
    }

    /// A store of its own: the SQLite file `name` in this directory, or on PostgreSQL the
    /// agent `name` of this test's namespace.
    pub fn store(&self, name: &str) -> Place {
        match self.backend {
            Backend::Sqlite => Place::Sqlite {
                path: self.file(name),
                agent: None,
            },
            Backend::Postgres => Place::Postgres {
                uri: pg_uri()
                    .expect("run() starts PostgreSQL tests only with a server")
                    .to_string(),
                agent: format!("{}/{name}", self.namespace),
            },
        }
    }

    /// The path of `name` in this directory (for the tests of SQLite files, and of files).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A store an agent is opened at (see [`TempDir::store`]).
#[derive(Clone, Debug)]
pub enum Place {
    /// A SQLite file, and the agent of it (`None`: the file's single agent).
    Sqlite {
        path: PathBuf,
        agent: Option<String>,
    },
    /// An agent of a PostgreSQL database.
    Postgres { uri: String, agent: String },
}

impl Place {
    /// The agent `id` beside this one: of the same SQLite file, or of the same namespace.
    pub fn agent(&self, id: &str) -> Place {
        match self {
            Place::Sqlite { path, .. } => Place::Sqlite {
                path: path.clone(),
                agent: Some(id.to_string()),
            },
            Place::Postgres { uri, agent } => Place::Postgres {
                uri: uri.clone(),
                agent: format!("{agent}/{id}"),
            },
        }
    }
}

/// `Agent::open` of the agent at `place`, with `options` (whose `agent_id` the place sets,
/// where it names one).
pub fn open(place: &Place, options: &OpenOptions) -> Result<Agent> {
    let mut options = options.clone();
    let location: &Path = match place {
        Place::Sqlite { path, agent } => {
            if agent.is_some() {
                options.agent_id = agent.clone();
            }
            path
        }
        Place::Postgres { uri, agent } => {
            options.agent_id = Some(agent.clone());
            Path::new(uri)
        }
    };
    Agent::open_with(location, &options)
}

/// Stores `value` as the agent's state behind the library's back, as a commit by another
/// program would (the version goes up by one; nothing is logged): how a test corrupts a
/// stored state, or writes from outside.
pub fn write_behind_the_back(place: &Place, value: &str) {
    // The value becomes the base of the new version (SQLite's schema 5, PostgreSQL's 4: a
    // state is its base and the patches after it).
    const UPDATE: &str = "UPDATE agent_state SET value = $1, version = version + 1, \
                          base = version + 1, tail = 0 WHERE agent = $2";
    match place {
        Place::Sqlite { path, agent } => {
            let agent = agent.as_deref().unwrap_or("");
            let n = rusqlite::Connection::open(path)
                .unwrap()
                .execute(UPDATE, rusqlite::params![value.as_bytes(), agent])
                .unwrap();
            assert_eq!(n, 1, "no stored state to overwrite");
        }
        Place::Postgres { uri, agent } => {
            let n = server_client(uri)
                .execute(UPDATE, &[&value, agent])
                .unwrap();
            assert_eq!(n, 1, "no stored state to overwrite");
        }
    }
}

/// A connection of the test's own to the PostgreSQL server at `uri`, behind the library's back:
/// behind a connection pooler's back too, when the tests run through one, to the server itself
/// (`AGENT_STATE_TEST_PG_SERVER_URI`, tests/pg/pooler-suites.sh; the same database).
pub fn server_client(uri: &str) -> postgres::Client {
    let server = std::env::var("AGENT_STATE_TEST_PG_SERVER_URI")
        .ok()
        .filter(|s| !s.is_empty());
    postgres::Client::connect(server.as_deref().unwrap_or(uri), postgres::NoTls).unwrap()
}

/// Open options from JSON.
pub fn opts(v: Value) -> OpenOptions {
    OpenOptions::from_json(v.to_string().as_bytes()).unwrap()
}

/// A snapshot's JSON as a String.
pub fn text(s: &agent_state::Snapshot) -> String {
    String::from_utf8(s.json().to_vec()).unwrap()
}

/// A hook that records every delivery as (next, prev, patch): the texts, to check how
/// deliveries chain.
#[derive(Default)]
pub struct Recorder {
    pub seen: std::sync::Mutex<Vec<(String, String, Option<String>)>>,
}

impl agent_state::StateChangedHook for Recorder {
    fn on_state_changed(&self, c: &agent_state::StateChange) -> std::result::Result<(), String> {
        self.seen
            .lock()
            .unwrap()
            .push((text(&c.next), text(&c.prev), patch_text(c)));
        Ok(())
    }
}

/// One delivery with its version: (version, prev, next, patch).
pub type Delivery = (u64, String, String, Option<String>);

/// A hook that records every delivery with its version (see [`Delivery`]).
#[derive(Default)]
pub struct VersionRecorder {
    pub seen: std::sync::Mutex<Vec<Delivery>>,
}

impl agent_state::StateChangedHook for VersionRecorder {
    fn on_state_changed(&self, c: &agent_state::StateChange) -> std::result::Result<(), String> {
        self.seen
            .lock()
            .unwrap()
            .push((c.version, text(&c.prev), text(&c.next), patch_text(c)));
        Ok(())
    }
}

/// The patch of a delivery as text (`None` for a replacement).
fn patch_text(c: &agent_state::StateChange) -> Option<String> {
    c.patch
        .as_ref()
        .map(|p| String::from_utf8(p.json().to_vec()).unwrap())
}

/// Fires `token` from another thread after `delay`; the thread returns when it fired.
pub fn fire_after(
    token: &agent_state::Cancel,
    delay: std::time::Duration,
) -> std::thread::JoinHandle<std::time::Instant> {
    let token = token.clone();
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        token.cancel();
        std::time::Instant::now()
    })
}
