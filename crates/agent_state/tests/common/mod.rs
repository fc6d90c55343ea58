//! Helpers shared by the integration tests.
//!
//! The suites of the library's behaviour (agent, hooks, versions, change_log, agents) run on either backend: a
//! test asks a [`TempDir`] for a store ([`TempDir::store`], a [`Place`]) and [`open`]s it. By
//! default that is a SQLite file in the directory; with `AGENT_STATE_TEST_BACKEND=postgres` it
//! is an agent of the PostgreSQL server `AGENT_STATE_TEST_PG_URI` names (`make test-rust` runs
//! them both ways, tests/pg/with-server.sh starts a server). Without that URI the run is
//! skipped with a notice, except under `CI=true`, where it fails.
//!
//! The tests of SQLite files themselves (raw access to the file, old schemas, modes, file
//! descriptors) start with [`sqlite_only!`](crate::sqlite_only) and use [`TempDir::file`].
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use agent_state::{Agent, OpenOptions, Result};
use serde_json::Value;

/// The test server's URI when the suites run on PostgreSQL, `None` when on SQLite.
fn pg_uri() -> Option<&'static str> {
    static URI: OnceLock<Option<String>> = OnceLock::new();
    URI.get_or_init(|| {
        if std::env::var("AGENT_STATE_TEST_BACKEND").as_deref() != Ok("postgres") {
            return None;
        }
        match std::env::var("AGENT_STATE_TEST_PG_URI") {
            Ok(uri) if !uri.is_empty() => Some(uri),
            _ => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "AGENT_STATE_TEST_BACKEND=postgres without AGENT_STATE_TEST_PG_URI under \
                     CI=true: the suite cannot run"
                );
                // The whole suite is skipped (straight to stderr: the harness's capture of
                // this test's output would be lost with the process).
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: AGENT_STATE_TEST_BACKEND=postgres but AGENT_STATE_TEST_PG_URI \
                     is unset (no PostgreSQL server)"
                );
                std::process::exit(0);
            }
        }
    })
    .as_deref()
}

/// Whether the suites run on SQLite (the default).
pub fn sqlite() -> bool {
    pg_uri().is_none()
}

/// Returns from a test of SQLite files when the suites run on PostgreSQL. The reason says
/// why the test is SQLite's alone.
#[macro_export]
macro_rules! sqlite_only {
    ($why:literal) => {
        if !$crate::common::sqlite() {
            return;
        }
    };
}

/// Where a test's stores live: a directory under the system temp dir, removed when dropped;
/// on PostgreSQL also a namespace of agent ids no other test (or run) uses.
pub struct TempDir {
    dir: PathBuf,
    namespace: String,
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
        }
    }

    /// A store of its own: the SQLite file `name` in this directory, or on PostgreSQL the
    /// agent `name` of this test's namespace.
    pub fn store(&self, name: &str) -> Place {
        match pg_uri() {
            None => Place::Sqlite {
                path: self.file(name),
                agent: None,
            },
            Some(uri) => Place::Postgres {
                uri: uri.to_string(),
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
    Agent::open(location, &options)
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
            // Behind a connection pooler's back too, when the suites run through one: to the
            // server itself (tests/pg/pooler-suites.sh; the same database).
            let server = std::env::var("AGENT_STATE_TEST_PG_SERVER_URI")
                .ok()
                .filter(|s| !s.is_empty());
            let n = postgres::Client::connect(server.as_deref().unwrap_or(uri), postgres::NoTls)
                .unwrap()
                .execute(UPDATE, &[&value, agent])
                .unwrap();
            assert_eq!(n, 1, "no stored state to overwrite");
        }
    }
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
