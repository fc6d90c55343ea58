//! Opening an agent from Rust: [`Agent::builder`] names each option with a method and a Rust
//! type (the initial state any `Serialize`, timeouts as [`Duration`]s, the change log's
//! retention as a [`ChangeLog`]), and opens a [`Location`]. It fills the same
//! [`OpenOptions`] that [`OpenOptions::from_json`] reads for the C ABI and the command, so
//! both ways check the same rules and open the same way.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::agent::Agent;
use crate::error::{Error, Result};
use crate::location::Location;
use crate::options::{LogRetention, OpenOptions, OptionKind, OptionSpec, MAX_RETENTION};
use crate::store::Synchronous;

/// How much of an agent's change log the store keeps ([`AgentBuilder::change_log`]): the
/// open option `change_log`. Each bound is from 1 to [`MAX_RETENTION`] (seconds: whole seconds,
/// at least one), else the open fails with [`Error::InvalidArgument`].
///
/// ```
/// use std::time::Duration;
/// use agent_state::ChangeLog::{KeepFor, KeepLast};
/// use agent_state::{Agent, ChangeLog};
///
/// let agent = Agent::builder().change_log(KeepLast(1000)).open(":memory:")?;
/// agent.set(&serde_json::json!({"step": 1}))?;
/// assert_eq!(agent.state_at(1)?.json(), br#"{"step":1}"#);
/// let _ = (KeepFor(Duration::from_secs(3600)), ChangeLog::Off);
/// # Ok::<(), agent_state::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeLog {
    /// Switch the log off (the changes kept are dropped).
    Off,
    /// Keep the last this many changes.
    KeepLast(u64),
    /// Keep the changes of the last this long (whole seconds).
    KeepFor(Duration),
    /// Keep a change while it is among the last `last` or younger than `for_`.
    KeepLastFor {
        /// How many changes.
        last: u64,
        /// How long (whole seconds).
        for_: Duration,
    },
}

impl ChangeLog {
    /// The option's value: `None` for [`ChangeLog::Off`], else the retention, checked.
    fn retention(self) -> Result<Option<LogRetention>> {
        let (last, seconds) = match self {
            ChangeLog::Off => return Ok(None),
            ChangeLog::KeepLast(n) => (Some(n), None),
            ChangeLog::KeepFor(d) => (None, Some(d)),
            ChangeLog::KeepLastFor { last, for_ } => (Some(last), Some(for_)),
        };
        let bad = || {
            Error::InvalidArgument(format!(
                "change_log {self:?}: each bound must be from 1 to {MAX_RETENTION} (changes, or \
                 whole seconds)"
            ))
        };
        let in_range = |n: u64| (1..=MAX_RETENTION).contains(&n);
        let keep_last = match last {
            Some(n) if !in_range(n) => return Err(bad()),
            other => other,
        };
        let keep_seconds = match seconds {
            Some(d) if d.subsec_nanos() != 0 || !in_range(d.as_secs()) => return Err(bad()),
            other => other.map(|d| d.as_secs()),
        };
        Ok(Some(LogRetention {
            keep_last,
            keep_seconds,
        }))
    }
}

/// The options of an agent to open, set one by one ([`Agent::builder`]); [`AgentBuilder::open`]
/// opens it. Every option unset keeps [`OpenOptions::default`]'s value. A value that cannot be
/// used (an initial state serde cannot write, a retention out of range) is reported by `open`,
/// which then opens nothing. Plain data: `Send`, `Sync`, `Clone` (open several alike).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use agent_state::{Agent, ChangeLog::KeepLast};
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct ConvState { status: String, #[serde(rename = "lastReply")] last_reply: String, at: u64 }
///
/// let init = ConvState { status: "idle".into(), last_reply: String::new(), at: 0 };
/// let agent = Agent::builder()
///     .agent_id("c1")
///     .initial_state(&init)
///     .change_log(KeepLast(1000))
///     .open(":memory:")?;
/// assert_eq!(agent.get::<ConvState>()?, init); // the initial state, not stored
/// # Ok::<(), agent_state::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a builder opens nothing until its open() is called"]
pub struct AgentBuilder {
    options: OpenOptions,
    /// The first value that could not be used; `open` reports it.
    error: Option<Error>,
}

impl Agent {
    /// A builder of an agent's options, every one at its default.
    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    /// Opens the store at `location` (a path or URI as text, a [`Path`](std::path::Path), a
    /// [`Location`]) with `options` (see [`OpenOptions::from_json`]).
    ///
    /// Errors: those of [`Agent::open`], and those of the options (an initial state that is
    /// not an object, or over the cap: [`Error::InvalidArgument`], [`Error::Codec`],
    /// [`Error::TooLarge`]; option `watch`, which only [`Agent::open_shared_with`] acts on:
    /// [`Error::InvalidArgument`]).
    pub fn open_with(location: impl Into<Location>, options: &OpenOptions) -> Result<Agent> {
        if options.watch {
            // The watcher holds the handle weakly, which takes an Arc: silently opening a
            // handle that never receives the pushes it asked for would be worse.
            return Err(Error::InvalidArgument(
                "option \"watch\" pushes changes to a shared handle: open it with \
                 Agent::open_shared_with or the builder's open_shared (an Arc<Agent>)"
                    .to_string(),
            ));
        }
        let location = location.into();
        Agent::open_path(&location.store_path(), options)
    }

    /// Opens the store at `location` with `options` as [`Agent::open_with`] does, shared (an
    /// [`Arc`]), and when option `watch` is set starts pushing the changes other handles and
    /// processes commit to its hooks ([`Agent::push_changes`]). What the C ABI and the
    /// bindings open. Thread-safe like every handle.
    ///
    /// Errors: those of [`Agent::open_with`] (but `watch`), then those of
    /// [`Agent::push_changes`] (the handle is closed again).
    pub fn open_shared_with(
        location: impl Into<Location>,
        options: &OpenOptions,
    ) -> Result<Arc<Agent>> {
        let location = location.into();
        let path = location.store_path();
        let agent = Arc::new(Agent::open_path(&path, options)?);
        if options.watch {
            if let Err(e) = agent.push_changes(&path, options) {
                let _ = agent.close();
                return Err(e);
            }
        }
        Ok(agent)
    }

    /// Opens the store at `location` (a SQLite file path or a `postgres://` URI, as text or
    /// a path; a [`Location`]) with the default options: `Agent::open("conv.db")`. The
    /// file is created when absent. [`Agent::builder`] and [`Agent::open_with`] take options.
    ///
    /// Errors: [`Error::Storage`] (the file cannot be opened or created, or is not a store),
    /// [`Error::InvalidArgument`] (a server without an `agent_id`), [`Error::Unavailable`] and
    /// [`Error::Auth`] (a server), [`Error::Busy`].
    ///
    /// ```
    /// let agent = agent_state::Agent::open(":memory:")?;
    /// agent.set(&serde_json::json!({"turns": 1}))?;
    /// assert_eq!(agent.get::<serde_json::Value>()?["turns"], 1);
    /// # Ok::<(), agent_state::Error>(())
    /// ```
    pub fn open(location: impl Into<Location>) -> Result<Agent> {
        Agent::open_with(location, &OpenOptions::default())
    }
}

impl AgentBuilder {
    /// A builder that starts from `options` (read with [`OpenOptions::from_json`], say) rather
    /// than the defaults.
    pub fn from_options(options: OpenOptions) -> AgentBuilder {
        AgentBuilder {
            options,
            error: None,
        }
    }

    /// Which agent of the store (option `agent_id`; required on PostgreSQL; a SQLite file's
    /// single agent when unset).
    pub fn agent_id(mut self, id: impl Into<String>) -> Self {
        self.options.agent_id = Some(id.into());
        self
    }

    /// The state shown while nothing is stored (option `initial_state`): any value serde
    /// writes as a JSON object, with the codec's types of [`crate::types`] where it holds
    /// them. Never stored by a read.
    pub fn initial_state<T: Serialize + ?Sized>(mut self, state: &T) -> Self {
        // Agent::open checks it (an object, the codec, the cap) before it opens anything.
        if let Err(e) = crate::types::finite::check("the initial state", state) {
            self.fail(e);
            return self;
        }
        match serde_json::to_value(state) {
            Ok(value) => self.options.initial_state = Some(value),
            Err(e) => self.fail(crate::typed::serialize_error("the initial state", e)),
        }
        self
    }

    /// How much of the change log the store keeps for this agent (option `change_log`); unset,
    /// the agent's setting stays as it is.
    pub fn change_log(mut self, log: ChangeLog) -> Self {
        match log.retention() {
            Ok(retention) => self.options.change_log = Some(retention),
            Err(e) => self.fail(e),
        }
        self
    }

    /// The largest encoded state this handle accepts, in bytes (option `max_value_bytes`).
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.check("max_value_bytes", bytes as u64);
        self.options.max_value_bytes = Some(bytes);
        self
    }

    /// Records a cap in the store for every handle opened later without its own (option
    /// `store_max_value_bytes`).
    pub fn store_max_value_bytes(mut self, bytes: usize) -> Self {
        self.check("store_max_value_bytes", bytes as u64);
        self.options.store_max_value_bytes = Some(bytes);
        self
    }

    /// How durable a commit is before the call returns (option `synchronous`).
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.options.synchronous = synchronous;
        self
    }

    /// How long a call waits for what other connections hold (option `busy_timeout_ms`, in
    /// whole milliseconds: finer parts are dropped).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.options.busy_timeout_ms = millis(timeout);
        self.check("busy_timeout_ms", self.options.busy_timeout_ms);
        self
    }

    /// PostgreSQL: how long the server may take to answer (option `server_timeout_ms`).
    pub fn server_timeout(mut self, timeout: Duration) -> Self {
        self.options.server_timeout_ms = millis(timeout);
        self.check("server_timeout_ms", self.options.server_timeout_ms);
        self
    }

    /// Refuse every write and never modify the store (option `read_only`).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.options.read_only = read_only;
        self
    }

    /// PostgreSQL: the most connections this process keeps to the server (option
    /// `max_connections`).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.check("max_connections", connections as u64);
        self.options.max_connections = connections;
        self
    }

    /// The schema version of the states this program reads and writes (option
    /// `schema_version`; steps of code are registered on the agent once open).
    pub fn schema_version(mut self, version: u32) -> Self {
        self.check("schema_version", u64::from(version));
        self.options.schema_version = version;
        self
    }

    /// Pushes changes that other handles and processes commit to the handle's on_state_changed
    /// hooks, without `poll` (option `watch`; needs the change log). Only
    /// [`AgentBuilder::open_shared`] acts on it: [`AgentBuilder::open`] refuses it.
    pub fn watch(mut self, watch: bool) -> Self {
        self.options.watch = watch;
        self
    }

    /// The options as set so far.
    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    /// Opens the agent at `location` (text read by its scheme, a path, a [`Location`]).
    ///
    /// Errors: the first option that could not be used ([`Error::InvalidArgument`], or
    /// [`Error::Codec`] for an initial state serde could not write), then those of
    /// [`Agent::open`].
    pub fn open(self, location: impl Into<Location>) -> Result<Agent> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Agent::open_with(location, &self.options)
    }

    /// Opens the agent at `location` as [`AgentBuilder::open`] does, shared (an [`Arc`]), and
    /// when option `watch` is set starts pushing other handles' and processes' changes to its
    /// hooks ([`Agent::push_changes`]). Thread-safe like every handle.
    ///
    /// Errors: those of [`AgentBuilder::open`] (but `watch`), then those of
    /// [`Agent::push_changes`] (the handle is closed again).
    pub fn open_shared(self, location: impl Into<Location>) -> Result<Arc<Agent>> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Agent::open_shared_with(location, &self.options)
    }

    /// The range [`OpenOptions::from_json`] holds option `name` to (its entry of
    /// [`OPTIONS`](crate::options::OPTIONS)), so both ways refuse the same values.
    fn check(&mut self, name: &str, value: u64) {
        let spec = OptionSpec::named(name);
        if let Some(OptionKind::Integer { min, max }) = spec.map(|s| s.kind) {
            if !(min..=max).contains(&value) {
                self.fail(Error::InvalidArgument(format!(
                    "option {name:?} must be an integer from {min} to {max}, got {value}"
                )));
            }
        }
    }

    fn fail(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
