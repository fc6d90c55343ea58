//! Open options, given as a JSON object so the C ABI never changes shape when one is added.

use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::store::{StoreOptions, Synchronous};
// The change log's retention is the store's policy; it is named here too, as before.
pub use crate::store::{LogRetention, MAX_RETENTION};

/// The per-value size cap of SQLite-backed Durable Objects, our default.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 2 * 1024 * 1024;
/// The largest cap accepted: SQLite's default limit on one value is 1,000,000,000 bytes.
pub const MAX_MAX_VALUE_BYTES: usize = 1_000_000_000;
/// How long a call waits for what another connection holds (a lock, a pool connection), by
/// default.
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 5000;
/// How long a PostgreSQL server may take to answer (connect, or run one statement, beyond any
/// wait for a lock) before the connection is given up, by default. Generous: a loaded machine,
/// a cold cache, a large state or a slow disk's fsync at commit all take their time, and only
/// a server that cannot answer at all (frozen, partitioned) should hit it.
pub const DEFAULT_SERVER_TIMEOUT_MS: u64 = 10_000;
/// The longest `agent_id`, in bytes.
pub const MAX_AGENT_ID_BYTES: usize = 255;
/// Connections per process to one PostgreSQL server, by default (option `max_connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4;
/// The largest `max_connections` accepted.
pub const MAX_MAX_CONNECTIONS: usize = 1000;
/// The largest `schema_version` accepted.
pub const MAX_SCHEMA_VERSION: u32 = 1_000_000;

/// Everything `agent_open` can be told.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// The state shown while nothing is stored (a plain object); `{}` when absent.
    pub initial_state: Option<Value>,
    /// The largest encoded state (and input document) this handle accepts, in bytes. `None`
    /// (the option absent): the store's cap (option `store_max_value_bytes`, remembered by the
    /// store), or [`DEFAULT_MAX_VALUE_BYTES`] when the store has none.
    pub max_value_bytes: Option<usize>,
    /// Records this cap in the store, for every handle opened later without its own
    /// `max_value_bytes` (and this one, unless it gives its own). Refused with `read_only`.
    pub store_max_value_bytes: Option<usize>,
    /// How durable a commit is before the call returns (option `synchronous`).
    pub synchronous: Synchronous,
    /// How long a call waits for what others hold: SQLite's write lock, a PostgreSQL row or
    /// table lock, a connection of the pool. 0: fail at once.
    pub busy_timeout_ms: u64,
    /// PostgreSQL: how long the server may take to answer, beyond waiting for locks (see
    /// [`DEFAULT_SERVER_TIMEOUT_MS`]). No effect on SQLite.
    pub server_timeout_ms: u64,
    /// Refuse every write and never modify the store (option `read_only`).
    pub read_only: bool,
    /// `Some(Some(_))`: switch the agent's change log on with this retention; `Some(None)`:
    /// switch it off; `None`: leave the agent's setting as it is.
    pub change_log: Option<Option<LogRetention>>,
    /// Which agent of the store (`None`: a SQLite file's single agent; required on PostgreSQL).
    pub agent_id: Option<String>,
    /// PostgreSQL: the most connections this process keeps to one server.
    pub max_connections: usize,
    /// The schema version of the states this program reads and writes (option
    /// `schema_version`; 0 when it declares none). A state stored under an older version is
    /// upgraded by the steps on first touch; one stored under a newer version is refused
    /// ([`Error::NewerSchema`]) unless `read_only`.
    pub schema_version: u32,
    /// The declarative steps (option `schema_steps`), each upgrading a state from its `from`
    /// version to the next. Steps of code ([`crate::Agent::set_schema_step`]) fill the others.
    pub schema_steps: Vec<crate::value::schema_steps::DeclarativeStep>,
    /// Changes that other handles and processes commit are pushed to this handle's
    /// on_state_changed hooks by the store's watcher, without `poll` (option `watch`; needs the
    /// change log). Acted on by the opens that share the handle (an `Arc`, which the watcher
    /// holds weakly): [`crate::Agent::open_shared_with`], [`crate::AgentBuilder::open_shared`],
    /// the C ABI's `agent_open` and the bindings; [`crate::Agent::open_with`] refuses it.
    pub watch: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            initial_state: None,
            max_value_bytes: None,
            store_max_value_bytes: None,
            synchronous: Synchronous::Full,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            server_timeout_ms: DEFAULT_SERVER_TIMEOUT_MS,
            read_only: false,
            change_log: None,
            agent_id: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            schema_version: 0,
            schema_steps: Vec::new(),
            watch: false,
        }
    }
}

/// What values an open option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionKind {
    /// A JSON object (a state).
    Object,
    /// An integer in `min..=max`.
    Integer {
        /// The smallest value accepted.
        min: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// A non-empty UTF-8 string of at most this many bytes, without NUL.
    Text {
        /// The longest string accepted, in bytes.
        max_bytes: usize,
    },
    /// The change log's retention (`{"keep_last": N, "keep_seconds": T}`, at least one, each
    /// 1 to [`MAX_RETENTION`]) or `false`.
    Retention,
    /// Declarative schema steps: an array of `{"from": K, "ops": [...]}` (see
    /// [`crate::value::schema_steps`]).
    SchemaSteps,
}

/// Which backends an option applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applies {
    /// Every backend.
    All,
    /// A PostgreSQL server only (accepted, and without effect, elsewhere).
    Postgres,
}

/// One open option, as every language's binding and the documentation describe it: the one
/// definition they are generated from or checked against (see [`OPTIONS`]).
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// The JSON key.
    pub name: &'static str,
    /// The values it takes.
    pub kind: OptionKind,
    /// Its default as JSON text, when it has a fixed one.
    pub default: Option<&'static str>,
    /// What happens when it is absent, in words (the default, or where it comes from).
    pub when_absent: &'static str,
    /// Which backends it applies to.
    pub applies: Applies,
    /// What it does, in one or two sentences.
    pub doc: &'static str,
}

/// Every open option, in the order the documentation lists them. [`OpenOptions::from_json`]
/// checks each value against its entry here, so the ranges and the messages cannot drift from
/// what the bindings and the documentation say (they are generated from, or checked against,
/// the surface description this table is written into: `include/agent_state_surface.json`).
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "initial_state",
        kind: OptionKind::Object,
        default: Some("{}"),
        when_absent: "{}",
        applies: Applies::All,
        doc: "The state shown while nothing is stored; never stored by a read.",
    },
    OptionSpec {
        name: "max_value_bytes",
        kind: OptionKind::Integer {
            min: 2,
            max: MAX_MAX_VALUE_BYTES as u64,
        },
        default: None,
        when_absent: "the store's cap (store_max_value_bytes), else 2097152",
        applies: Applies::All,
        doc: "This handle's cap on the encoded state and on input documents, in bytes.",
    },
    OptionSpec {
        name: "store_max_value_bytes",
        kind: OptionKind::Integer {
            min: 2,
            max: MAX_MAX_VALUE_BYTES as u64,
        },
        default: None,
        when_absent: "the store's setting is left as it is",
        applies: Applies::All,
        doc: "Records this cap in the store, for every handle opened later without its own \
              max_value_bytes (this one too). Refused with read_only.",
    },
    OptionSpec {
        name: "synchronous",
        kind: OptionKind::Choice(&["full", "normal"]),
        default: Some("\"full\""),
        when_absent: "\"full\"",
        applies: Applies::All,
        doc: "\"full\": an acknowledged write survives power loss; \"normal\": it survives a \
              crash of the process.",
    },
    OptionSpec {
        name: "busy_timeout_ms",
        kind: OptionKind::Integer {
            min: 0,
            max: i32::MAX as u64,
        },
        default: Some("5000"),
        when_absent: "5000",
        applies: Applies::All,
        doc: "How long a call waits for what another connection holds (a lock, a pooled \
              connection); 0 fails at once. Never how long an uncontended statement takes.",
    },
    OptionSpec {
        name: "server_timeout_ms",
        kind: OptionKind::Integer {
            min: 1,
            max: i32::MAX as u64,
        },
        default: Some("10000"),
        when_absent: "10000",
        applies: Applies::Postgres,
        doc: "How long the server may take to answer before the call fails as unavailable.",
    },
    OptionSpec {
        name: "read_only",
        kind: OptionKind::Bool,
        default: Some("false"),
        when_absent: "false",
        applies: Applies::All,
        doc: "Refuse every write and never modify the store.",
    },
    OptionSpec {
        name: "change_log",
        kind: OptionKind::Retention,
        default: None,
        when_absent: "the agent's setting is left as it is (off for a new agent)",
        applies: Applies::All,
        doc: "Switches this agent's change log on with this retention, recorded for every \
              handle of the agent, or off (false), dropping it.",
    },
    OptionSpec {
        name: "agent_id",
        kind: OptionKind::Text {
            max_bytes: MAX_AGENT_ID_BYTES,
        },
        default: None,
        when_absent: "a file's single agent; required on PostgreSQL",
        applies: Applies::All,
        doc: "Which agent of the store.",
    },
    OptionSpec {
        name: "schema_version",
        kind: OptionKind::Integer {
            min: 0,
            max: MAX_SCHEMA_VERSION as u64,
        },
        default: Some("0"),
        when_absent: "0",
        applies: Applies::All,
        doc: "The schema version of the states this program reads and writes. A state stored \
              under an older one is upgraded by the steps on first touch (and written back); one \
              stored under a newer one is refused with NEWER_SCHEMA unless read_only.",
    },
    OptionSpec {
        name: "schema_steps",
        kind: OptionKind::SchemaSteps,
        default: Some("[]"),
        when_absent: "[]",
        applies: Applies::All,
        doc: "Declarative steps, [{\"from\": K, \"ops\": [...]}], each upgrading a state \
              from version K to K + 1 with merge, default, set, remove, rename and move \
              operations; steps of code fill the versions these leave out.",
    },
    OptionSpec {
        name: "max_connections",
        kind: OptionKind::Integer {
            min: 1,
            max: MAX_MAX_CONNECTIONS as u64,
        },
        default: Some("4"),
        when_absent: "4",
        applies: Applies::Postgres,
        doc: "The most connections this process keeps to the server, shared by its handles.",
    },
    OptionSpec {
        name: "watch",
        kind: OptionKind::Bool,
        default: Some("false"),
        when_absent: "false",
        applies: Applies::All,
        doc: "Pushes changes that other handles and processes commit to this handle's \
              on_state_changed hooks, in commit order and once each, without poll (the store's \
              watcher notices them). Needs the change log.",
    },
];

impl OptionSpec {
    /// The entry of option `name`.
    pub fn named(name: &str) -> Option<&'static OptionSpec> {
        OPTIONS.iter().find(|o| o.name == name)
    }

    /// `value` checked against the option's kind (the same words for every option of a kind).
    fn check<'v>(&self, value: &'v Value) -> Result<Checked<'v>> {
        let bad = |expected: String| {
            Error::InvalidArgument(format!(
                "option {:?} must be {expected}, got {value}",
                self.name
            ))
        };
        match self.kind {
            OptionKind::Object if value.is_object() => Ok(Checked::Value(value)),
            OptionKind::Object => Err(bad("a JSON object".into())),
            OptionKind::Integer { min, max } => value
                .as_u64()
                .filter(|n| (min..=max).contains(n))
                .map(Checked::Integer)
                .ok_or_else(|| bad(format!("an integer from {min} to {max}"))),
            OptionKind::Choice(choices) => value
                .as_str()
                .filter(|s| choices.contains(s))
                .map(Checked::Text)
                .ok_or_else(|| {
                    let quoted: Vec<String> = choices.iter().map(|c| format!("{c:?}")).collect();
                    bad(quoted.join(" or "))
                }),
            OptionKind::Bool => value
                .as_bool()
                .map(Checked::Bool)
                .ok_or_else(|| bad("true or false".into())),
            OptionKind::Text { max_bytes } => value
                .as_str()
                .filter(|s| !s.is_empty() && s.len() <= max_bytes && !s.contains('\0'))
                .map(Checked::Text)
                .ok_or_else(|| {
                    bad(format!(
                        "a non-empty string of at most {max_bytes} bytes (UTF-8), without NUL"
                    ))
                }),
            OptionKind::Retention | OptionKind::SchemaSteps => Ok(Checked::Value(value)),
        }
    }
}

/// An option's value, checked against its kind.
enum Checked<'v> {
    Value(&'v Value),
    Integer(u64),
    Text(&'v str),
    Bool(bool),
}

impl OpenOptions {
    /// Parses options from a JSON object; each value is checked against its entry in
    /// [`OPTIONS`]. Unknown keys and ill-typed values are [`Error::InvalidArgument`]; malformed
    /// JSON is [`Error::Json`]. The initial state's own codec and size checks happen when the
    /// agent opens.
    pub fn from_json(text: &[u8]) -> Result<OpenOptions> {
        let value = crate::value::json::parse(text)?;
        let Value::Object(map) = value else {
            return Err(Error::InvalidArgument(
                "options must be a JSON object".to_string(),
            ));
        };
        let mut options = OpenOptions::default();
        for (key, value) in &map {
            let Some(spec) = OptionSpec::named(key) else {
                let known: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
                return Err(Error::InvalidArgument(format!(
                    "unknown option {key:?} (known: {})",
                    known.join(", ")
                )));
            };
            let checked = spec.check(value)?;
            let int = |c: &Checked| match c {
                Checked::Integer(n) => *n,
                _ => 0,
            };
            match (key.as_str(), checked) {
                ("initial_state", Checked::Value(v)) => options.initial_state = Some(v.clone()),
                ("max_value_bytes", c) => options.max_value_bytes = Some(int(&c) as usize),
                ("store_max_value_bytes", c) => {
                    options.store_max_value_bytes = Some(int(&c) as usize)
                }
                ("synchronous", Checked::Text(t)) => {
                    options.synchronous = if t == "normal" {
                        Synchronous::Normal
                    } else {
                        Synchronous::Full
                    }
                }
                ("busy_timeout_ms", c) => options.busy_timeout_ms = int(&c),
                ("server_timeout_ms", c) => options.server_timeout_ms = int(&c),
                ("read_only", Checked::Bool(b)) => options.read_only = b,
                ("change_log", Checked::Value(v)) => {
                    options.change_log = Some(match v {
                        Value::Bool(false) => None,
                        other => Some(LogRetention::from_value(other)?),
                    })
                }
                ("agent_id", Checked::Text(t)) => options.agent_id = Some(t.to_string()),
                ("watch", Checked::Bool(b)) => options.watch = b,
                ("max_connections", c) => options.max_connections = int(&c) as usize,
                ("schema_version", c) => options.schema_version = int(&c) as u32,
                ("schema_steps", Checked::Value(v)) => {
                    options.schema_steps =
                        crate::value::schema_steps::parse_steps(v).map_err(|e| {
                            Error::InvalidArgument(format!("option \"schema_steps\": {e}"))
                        })?
                }
                // Every entry of OPTIONS is read above (a unit test holds that); an entry added
                // without its line here is refused rather than silently ignored.
                (name, _) => {
                    return Err(Error::InvalidArgument(format!(
                        "option {name:?} is described but not read by this build"
                    )))
                }
            }
        }
        if let Some(step) = options
            .schema_steps
            .iter()
            .find(|s| s.from >= options.schema_version)
        {
            return Err(Error::InvalidArgument(format!(
                "option \"schema_steps\": the step from version {} upgrades past schema_version \
                 {} (steps go from 0 up to schema_version - 1)",
                step.from, options.schema_version
            )));
        }
        if options.read_only && options.store_max_value_bytes.is_some() {
            return Err(Error::InvalidArgument(
                "option \"store_max_value_bytes\" writes the store's cap, which a read_only \
                 handle cannot do"
                    .to_string(),
            ));
        }
        Ok(options)
    }

    pub(crate) fn store_options(&self) -> StoreOptions {
        StoreOptions {
            synchronous: self.synchronous,
            busy_timeout: Duration::from_millis(self.busy_timeout_ms),
            server_timeout: Duration::from_millis(self.server_timeout_ms),
            read_only: self.read_only,
            agent_id: self.agent_id.clone(),
            max_connections: self.max_connections,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every described option is read (none is refused as "not read by this build"), and its
    /// fixed default is what an absent option gives.
    #[test]
    fn every_described_option_is_read_and_its_default_holds() {
        let samples = |o: &OptionSpec| -> &'static str {
            match o.kind {
                OptionKind::Object => "{}",
                OptionKind::Integer { .. } => "100",
                OptionKind::Choice(_) => "\"normal\"",
                OptionKind::Bool => "false",
                OptionKind::Text { .. } => "\"x\"",
                OptionKind::Retention => "{\"keep_last\":1}",
                OptionKind::SchemaSteps => "[]",
            }
        };
        for o in OPTIONS {
            let text = format!("{{\"{}\":{}}}", o.name, samples(o));
            OpenOptions::from_json(text.as_bytes()).unwrap_or_else(|e| panic!("{}: {e}", o.name));
        }
        let d = OpenOptions::default();
        let defaults = [
            (
                "synchronous",
                "\"full\"",
                d.synchronous == Synchronous::Full,
            ),
            (
                "busy_timeout_ms",
                "5000",
                d.busy_timeout_ms == DEFAULT_BUSY_TIMEOUT_MS,
            ),
            (
                "server_timeout_ms",
                "10000",
                d.server_timeout_ms == DEFAULT_SERVER_TIMEOUT_MS,
            ),
            ("read_only", "false", !d.read_only),
            ("watch", "false", !d.watch),
            (
                "max_connections",
                "4",
                d.max_connections == DEFAULT_MAX_CONNECTIONS,
            ),
        ];
        for (name, text, holds) in defaults {
            assert_eq!(
                OptionSpec::named(name).unwrap().default,
                Some(text),
                "{name}"
            );
            assert!(holds, "{name}");
        }
    }
}
