//! Watching a store (`agent_state::watch`): the changes of any of its agents, by id or by
//! prefix, pushed to a subscriber in commit order per agent, none twice, none missed. One module
//! per concern, every test on both backends (`#[each_backend]`, crates/test-support) unless it
//! is about SQLite files themselves.

mod asynchronous;
mod delivery;
mod gaps;
mod lifecycle;
mod processes;
mod push;

use std::path::PathBuf;
use std::time::Duration;

use agent_state::{Agent, OpenOptions, Selector, Watch, WatchEvent, WatchKind, WatchOptions};
use serde_json::json;
use test_support::{open, opts, Place, TempDir};

/// A store of a test's own, watched: where it is, and the prefix of the test's agent ids in it
/// (on PostgreSQL the test's namespace; on SQLite the file is the test's own).
pub struct Store {
    pub place: Place,
    pub location: PathBuf,
    pub prefix: String,
    _dir: TempDir,
}

impl Store {
    /// A new store (created on SQLite by opening an agent of it, so that there is a file).
    pub fn new(name: &str) -> Store {
        let dir = TempDir::new(name);
        let place = dir.store("watched.db");
        let (location, prefix) = match &place {
            Place::Sqlite { path, .. } => (path.clone(), String::new()),
            Place::Postgres { uri, agent } => (PathBuf::from(uri), format!("{agent}/")),
        };
        let store = Store {
            place,
            location,
            prefix,
            _dir: dir,
        };
        drop(store.agent("_", json!({})));
        store
    }

    /// The full id of the test's agent `name`.
    pub fn id(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Opens the test's agent `name` with these options (the change log on unless they say).
    pub fn agent(&self, name: &str, options: serde_json::Value) -> Agent {
        let mut options = options;
        if options.get("change_log").is_none() {
            options["change_log"] = json!({"keep_last": 1000});
        }
        options["busy_timeout_ms"] = json!(30_000);
        open(&self.place_of(name), &opts(options)).unwrap()
    }

    /// Where the test's agent `name` is.
    pub fn place_of(&self, name: &str) -> Place {
        match &self.place {
            Place::Sqlite { path, .. } => Place::Sqlite {
                path: path.clone(),
                agent: Some(self.id(name)),
            },
            Place::Postgres { uri, .. } => Place::Postgres {
                uri: uri.clone(),
                agent: self.id(name),
            },
        }
    }

    /// A watch of this store. Through a pooler in transaction mode, which cannot carry
    /// LISTEN, a watch polls (as the PostgreSQL guide tells users to).
    pub fn watch(&self, selector: Selector, options: WatchOptions) -> agent_state::Result<Watch> {
        let through_transaction_pooler = matches!(self.place, Place::Postgres { .. })
            && std::env::var("AGENT_STATE_TEST_PG_POOLER").is_ok_and(|mode| mode == "transaction");
        let options = if through_transaction_pooler {
            options.poll_interval(Some(Duration::from_millis(50)))
        } else {
            options
        };
        Watch::open(&self.location, &connection(), selector, options)
    }

    /// A watch of every agent of the test (its prefix).
    pub fn watch_all(&self, options: WatchOptions) -> Watch {
        self.watch(Selector::Prefix(self.prefix.clone()), options)
            .unwrap()
    }

    /// A watch of the test's agents `names`.
    pub fn watch_ids(&self, names: &[&str], options: WatchOptions) -> Watch {
        let ids = names.iter().map(|n| self.id(n)).collect();
        self.watch(Selector::Ids(ids), options).unwrap()
    }
}

/// The connection options of the tests' watches.
pub fn connection() -> OpenOptions {
    opts(json!({"busy_timeout_ms": 30_000}))
}

/// How long a test waits for an event that must come (generous: a loaded machine).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The next event, which must come.
pub fn next(w: &Watch) -> WatchEvent {
    w.next(Some(PATIENCE))
        .unwrap()
        .expect("an event within the patience")
}

/// True when no event comes within a short while (for what must not be delivered: the watcher
/// notices commits within milliseconds, so a quiet half second is telling).
pub fn quiet(w: &Watch) -> bool {
    w.next(Some(Duration::from_millis(500))).unwrap().is_none()
}

/// The JSON value of an event's text.
pub fn value(text: &Option<std::sync::Arc<str>>) -> serde_json::Value {
    serde_json::from_str(text.as_deref().expect("a text")).unwrap()
}

/// An event's agent, without the test's prefix, and its version and kind.
pub fn brief(store: &Store, e: &WatchEvent) -> (String, u64, WatchKind) {
    (
        e.agent_id.strip_prefix(&store.prefix).unwrap().to_string(),
        e.version,
        e.kind,
    )
}
