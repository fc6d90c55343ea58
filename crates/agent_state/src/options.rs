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
    /// `Some(Some(_))`: switch the store's change log on with this retention; `Some(None)`:
    /// switch it off; `None`: leave the store's setting as it is.
    pub change_log: Option<Option<LogRetention>>,
    /// Which agent of the store (`None`: a SQLite file's single agent; required on PostgreSQL).
    pub agent_id: Option<String>,
    /// PostgreSQL: the most connections this process keeps to one server.
    pub max_connections: usize,
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
        }
    }
}

impl OpenOptions {
    /// Parses options from a JSON object. Unknown keys and ill-typed values are
    /// [`Error::InvalidArgument`]; malformed JSON is [`Error::Json`]. The initial state's own
    /// codec and size checks happen when the agent opens.
    pub fn from_json(text: &[u8]) -> Result<OpenOptions> {
        let value = crate::value::json::parse(text)?;
        let Value::Object(map) = value else {
            return Err(Error::InvalidArgument(
                "options must be a JSON object".to_string(),
            ));
        };
        let mut options = OpenOptions::default();
        for (key, value) in map {
            let bad = |expected: &str| {
                Error::InvalidArgument(format!("option {key:?} must be {expected}, got {value}"))
            };
            match key.as_str() {
                "initial_state" => {
                    if !value.is_object() {
                        return Err(bad("a JSON object"));
                    }
                    options.initial_state = Some(value);
                }
                "max_value_bytes" | "store_max_value_bytes" => {
                    let bytes = value
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|n| (2..=MAX_MAX_VALUE_BYTES).contains(n))
                        .ok_or_else(|| bad("an integer from 2 to 1000000000"))?;
                    if key == "max_value_bytes" {
                        options.max_value_bytes = Some(bytes);
                    } else {
                        options.store_max_value_bytes = Some(bytes);
                    }
                }
                "synchronous" => {
                    options.synchronous = match value.as_str() {
                        Some("full") => Synchronous::Full,
                        Some("normal") => Synchronous::Normal,
                        _ => return Err(bad("\"full\" or \"normal\"")),
                    };
                }
                "busy_timeout_ms" => {
                    options.busy_timeout_ms = value
                        .as_u64()
                        .filter(|n| *n <= i32::MAX as u64)
                        .ok_or_else(|| bad("an integer from 0 to 2147483647"))?;
                }
                "server_timeout_ms" => {
                    options.server_timeout_ms = value
                        .as_u64()
                        .filter(|n| (1..=i32::MAX as u64).contains(n))
                        .ok_or_else(|| bad("an integer from 1 to 2147483647"))?;
                }
                "read_only" => {
                    options.read_only = value.as_bool().ok_or_else(|| bad("true or false"))?;
                }
                "change_log" => {
                    options.change_log = Some(match value {
                        Value::Bool(false) => None,
                        other => Some(LogRetention::from_value(&other)?),
                    });
                }
                "agent_id" => {
                    let id = value
                        .as_str()
                        .filter(|s| {
                            !s.is_empty() && s.len() <= MAX_AGENT_ID_BYTES && !s.contains('\0')
                        })
                        .ok_or_else(|| {
                            bad("a non-empty string of at most 255 bytes (UTF-8), without NUL")
                        })?;
                    options.agent_id = Some(id.to_string());
                }
                "max_connections" => {
                    options.max_connections = value
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|n| (1..=MAX_MAX_CONNECTIONS).contains(n))
                        .ok_or_else(|| bad("an integer from 1 to 1000"))?;
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "unknown option {key:?} (known: initial_state, max_value_bytes, store_max_value_bytes, synchronous, busy_timeout_ms, server_timeout_ms, read_only, change_log, agent_id, max_connections)"
                    )))
                }
            }
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
