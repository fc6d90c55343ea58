//! The tables of a PostgreSQL store, created on first open, and the schema-version check.
//!
//! - `agent_state_schema`: one row `(1, version)`.
//! - `agent_state`: one row per agent: its state as `text`, exactly the library's bytes (never
//!   `jsonb`, which reorders members and rewrites numbers), its version (0 and a NULL value:
//!   nothing stored), the change log's retention as JSON text (NULL: the log is off), and the
//!   stamp of the state (a random number written with it: after a failover that lost the last
//!   versions, the same version numbers come again with other states; see `super::stamp`).
//! - `agent_changes`: the change log, per agent and version.
//! - since schema 3: `agent_state.written_ms` (when the state was last written) and
//!   `written_grain` (the same rounded down to a minute, rewritten only when the minute changes,
//!   so that most writes leave the index `agent_state_idle` that expiry reads untouched, and
//!   stay HOT updates); `agent_state_by_id`, the ids in byte order (`COLLATE "C"`) that a
//!   listing pages through whatever the database's collation; `agent_deleted`, the tombstones
//!   of deleted agents (the hash of the id, not the id, and the last version: the agent's next
//!   first write takes the version after it).
//!
//! - `agent_settings(name, value)`: what the store remembers for every handle (see
//!   `super::settings`), in the tables of a new database; one an older release created gets
//!   it when a setting is first recorded, without a change of schema version.
//!
//! - since schema 4: a state is stored as its base (`value`, the state at version `base`) and
//!   the patches after it (rows of `agent_changes` without `next`); `tail` counts their bytes,
//!   `bytes` is the current state's size (see `super::delta`).
//!
//! - since schema 5: the schema version (`integer`) each state was written under
//!   (`agent_state.schema`, the one its program declares; 0: none, or written before schema
//!   5) and that of each row of `agent_changes` (`schema`, the state after its change; and
//!   `migrated_from`, NULL but for a schema migration, the version it upgraded from), for
//!   schema evolution. The program's `u32` is stored in the column's 32 bits as they are (a
//!   version above 2^31 - 1 reads back negative in SQL, and exactly in the library).
//!
//! - `agent_listeners(id, expires_ms)`: the watchers of this store listening for its changes
//!   (see `super::listen`), each row kept alive by its heartbeat (`expires_ms`, on the server's
//!   clock); while one has not expired, every write notifies them (`super::sql`). In the tables
//!   of a new database, and added at open to a schema-5 database an older release created,
//!   without a change of schema version: no older statement reads it, so older builds keep
//!   opening the database (their writes notify no one: a watcher's periodic rescan finds them).
//!
//! Only portable SQL (text, bigint, primary keys, `ON CONFLICT`): no `jsonb`, no advisory lock.

use std::time::Duration;

use super::conn::{Conn, Settings};
use super::error::{classify, Fault};
use crate::error::Error;

/// The schema this build reads and writes; a newer one is refused, never altered.
pub const SCHEMA_VERSION: i32 = 5;

/// Schema 1 to 2: the `stamp` column (existing rows get 0, which no write of this build
/// stamps, so every cache of a state read before the upgrade is read again once).
const UPGRADE_1: &str = "
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS stamp bigint NOT NULL DEFAULT 0;
UPDATE agent_state_schema SET version = 2 WHERE singleton = 1 AND version = 1;
";

/// Schema 2 to 3 (`{now}`, `{grain}`: the upgrade's time, which every stored state counts as
/// its last write, so that expiry never takes an agent for idler than it is).
const UPGRADE_2: &str = "
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS written_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS written_grain bigint NOT NULL DEFAULT 0;
UPDATE agent_state SET written_ms = {now}, written_grain = {grain} WHERE written_ms = 0;
CREATE TABLE IF NOT EXISTS agent_deleted (id_hash bigint PRIMARY KEY, version bigint NOT NULL);
CREATE INDEX IF NOT EXISTS agent_state_idle ON agent_state (written_grain);
CREATE INDEX IF NOT EXISTS agent_state_by_id ON agent_state (agent COLLATE \"C\");
UPDATE agent_state_schema SET version = 3 WHERE singleton = 1 AND version = 2;
";

/// Schema 3 to 4: a state is its base and the patches after it (see `super::delta`); every
/// stored state becomes its own base, and a patch's row of `agent_changes` holds no `next`.
const UPGRADE_3: &str = "
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS base bigint NOT NULL DEFAULT 0;
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS tail bigint NOT NULL DEFAULT 0;
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE agent_changes ALTER COLUMN next DROP NOT NULL;
UPDATE agent_state SET base = version, bytes = coalesce(octet_length(value), 0)
    WHERE value IS NOT NULL AND base = 0;
UPDATE agent_state_schema SET version = 4 WHERE singleton = 1 AND version = 3;
";

/// Schema 4 to 5: the schema version of each state and change-log entry, and the version a
/// schema migration upgraded from (what is stored becomes schema 0: none declared). Adding a
/// column with a constant default rewrites no row.
const UPGRADE_4: &str = "
ALTER TABLE agent_state ADD COLUMN IF NOT EXISTS schema integer NOT NULL DEFAULT 0;
ALTER TABLE agent_changes ADD COLUMN IF NOT EXISTS schema integer NOT NULL DEFAULT 0;
ALTER TABLE agent_changes ADD COLUMN IF NOT EXISTS migrated_from integer;
UPDATE agent_state_schema SET version = 5 WHERE singleton = 1 AND version = 4;
";

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS agent_state_schema (
    singleton int PRIMARY KEY CHECK (singleton = 1),
    version int NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_deleted (
    id_hash bigint PRIMARY KEY,
    version bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_settings (
    name text PRIMARY KEY,
    value bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_state (
    agent text PRIMARY KEY,
    value text,
    version bigint NOT NULL DEFAULT 0,
    change_log text,
    stamp bigint NOT NULL DEFAULT 0,
    written_ms bigint NOT NULL DEFAULT 0,
    written_grain bigint NOT NULL DEFAULT 0,
    base bigint NOT NULL DEFAULT 0,
    tail bigint NOT NULL DEFAULT 0,
    bytes bigint NOT NULL DEFAULT 0,
    schema integer NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS agent_state_idle ON agent_state (written_grain);
CREATE INDEX IF NOT EXISTS agent_state_by_id ON agent_state (agent COLLATE \"C\");
CREATE TABLE IF NOT EXISTS agent_listeners (
    id bigint PRIMARY KEY,
    expires_ms bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_changes (
    agent text NOT NULL,
    version bigint NOT NULL,
    at_ms bigint NOT NULL,
    writer bigint NOT NULL,
    patch text,
    next text,
    prev text,
    schema integer NOT NULL DEFAULT 0,
    migrated_from integer,
    PRIMARY KEY (agent, version)
);
INSERT INTO agent_state_schema (singleton, version) VALUES (1, 5) ON CONFLICT (singleton) DO NOTHING;
";

/// The table of the listening watchers (see the module's doc), for a database whose other
/// tables are there.
const CREATE_LISTENERS: &str =
    "CREATE TABLE IF NOT EXISTS agent_listeners (id bigint PRIMARY KEY, expires_ms bigint NOT NULL)";

/// SQLSTATEs of a lost race between processes creating the tables at once: try again. (42710,
/// duplicate object: `CREATE TABLE IF NOT EXISTS` racing another creates the table's row type
/// twice; seen in a clean-clone CI run of the test of 8 processes opening a new database.
/// 55P03, lock not available: another connection's creation held a table's lock longer than
/// the lock timeout.)
const RACES: [&str; 6] = ["23505", "42P07", "42710", "40001", "40P01", "55P03"];

/// Makes sure the database has this build's tables (creating them, unless `read_only`, with
/// `settings` for that transaction: the caller's, with a lock timeout long enough to wait for
/// another process creating them), and refuses one whose schema is newer. Returns the failure
/// as a [`Fault`], so the caller knows whether the connection is still good.
pub(super) fn check(
    conn: &mut Conn,
    settings: Settings,
    read_only: bool,
    shown: &str,
) -> std::result::Result<(), Fault> {
    let mut attempt = 0u32;
    loop {
        match conn.query_opt(
            "SELECT version, to_regclass('agent_listeners') IS NOT NULL
             FROM agent_state_schema WHERE singleton = 1",
            &[],
        ) {
            Ok(Some(row)) => {
                let version: i32 = row.get(0);
                let listeners: bool = row.get(1);
                return if version > SCHEMA_VERSION {
                    Err(Fault::Answered(Error::Storage(
                        format!(
                        "{shown}: the database holds agent_state schema version {version}, newer \
                         than this library's ({SCHEMA_VERSION}); upgrade the library (the \
                         database was not changed)"
                    )
                        .into(),
                    )))
                } else if version < 1 {
                    Err(Fault::Answered(Error::Storage(
                        format!(
                            "{shown}: the database holds an unknown agent_state schema version \
                         {version}"
                        )
                        .into(),
                    )))
                } else if version < SCHEMA_VERSION && read_only {
                    Err(Fault::Answered(Error::Storage(
                        format!(
                        "{shown}: the database holds agent_state schema version {version}, and \
                         the store was opened read_only (open it once without read_only to \
                         upgrade it to version {SCHEMA_VERSION}; older builds then refuse it)"
                    )
                        .into(),
                    )))
                } else if version < SCHEMA_VERSION {
                    let upgrade = if version == 1 {
                        UPGRADE_1.to_string()
                    } else if version == 3 {
                        UPGRADE_3.to_string()
                    } else if version == 4 {
                        UPGRADE_4.to_string()
                    } else {
                        let now = crate::store::now_ms();
                        UPGRADE_2
                            .replace("{now}", &now.to_string())
                            .replace("{grain}", &crate::store::grain_of(now).to_string())
                    };
                    match conn.batch_execute(&upgrade) {
                        Ok(()) => continue,
                        Err(e) if raced(&e, &mut attempt) => continue,
                        Err(e) => {
                            return Err(classify(&e, "cannot upgrade the agent_state tables"))
                        }
                    }
                } else if !listeners && !read_only {
                    // Every write names the table (`super::sql`): it must be there first.
                    let create = format!("{};{CREATE_LISTENERS}", settings.set_local());
                    match conn.batch_execute(&create) {
                        Ok(()) => continue,
                        Err(e) if raced(&e, &mut attempt) => continue,
                        Err(e) => {
                            return Err(classify(&e, "cannot create the agent_listeners table"))
                        }
                    }
                } else {
                    Ok(())
                };
            }
            Ok(None) => {} // the table is there, its row not (yet): create below
            Err(e) if e.code().map(|c| c.code()) == Some("42P01") => {} // no table
            Err(e) => return Err(classify(&e, "cannot read the schema version")),
        }
        if read_only {
            return Err(Fault::Answered(Error::Storage(
                format!(
                    "{shown}: the database has no agent_state tables, and the store was opened \
                 read_only (open it once without read_only to create them)"
                )
                .into(),
            )));
        }
        // One simple query: the statements run in one implicit transaction, which the settings
        // are local to.
        match conn.batch_execute(&format!("{};{CREATE}", settings.set_local())) {
            Ok(()) => {}
            Err(e) if raced(&e, &mut attempt) => continue,
            Err(e) => {
                if e.code().map(|c| c.code()) == Some("55P03") {
                    return Err(Fault::Answered(Error::Busy(
                        format!(
                            "{shown}: cannot create the agent_state tables: another connection \
                         kept them locked while creating them for longer than \
                         server_timeout_ms, {attempt} times ({})",
                            e.describe()
                        )
                        .into(),
                    )));
                }
                return Err(classify(&e, "cannot create the agent_state tables"));
            }
        }
    }
}

/// True when `e` lost a race with another process creating or upgrading the tables
/// ([`RACES`]) and the attempt (the `attempt`th, counted here) is worth making again, after a
/// pause that grows with each.
fn raced(e: &super::error::PgError, attempt: &mut u32) -> bool {
    let code = e.code().map(|c| c.code().to_string());
    if *attempt >= 20 || !code.as_deref().is_some_and(|c| RACES.contains(&c)) {
        return false;
    }
    *attempt += 1;
    std::thread::sleep(Duration::from_millis(5 * u64::from(*attempt)));
    true
}

/// Whether the database's store has the table of listeners, when it holds a store (its schema
/// table); [`Error::Storage`] otherwise, for a caller that must not create one (a watcher: see
/// `super::Postgres::open_existing` and `super::listen`).
pub(super) fn exists(conn: &mut Conn, shown: &str) -> std::result::Result<bool, Fault> {
    let row = conn
        .query_opt(super::sql::STORE_TABLES, &[])
        .map_err(|e| classify(&e, "cannot read the store's tables"))?;
    match row {
        Some(r) if r.get::<_, bool>(0) => Ok(r.get(1)),
        _ => Err(Fault::Answered(Error::Storage(
            format!(
                "{shown}: no agent_state store there (its tables are missing); watching never \
                 creates one"
            )
            .into(),
        ))),
    }
}

/// Adds the table of listeners to a store an older release made, which no handle of this one
/// has opened since ([`check`] adds it at open); another process may be adding it too.
pub(super) fn add_listeners(conn: &mut Conn) -> std::result::Result<(), Fault> {
    let mut attempt = 0;
    loop {
        match conn.batch_execute(CREATE_LISTENERS) {
            Ok(()) => return Ok(()),
            Err(e) if raced(&e, &mut attempt) => continue,
            Err(e) => return Err(classify(&e, "cannot create the agent_listeners table")),
        }
    }
}
