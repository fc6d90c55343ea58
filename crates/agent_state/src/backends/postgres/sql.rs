//! The statements of the PostgreSQL backend (portable SQL: text and bigint columns, primary
//! keys, `INSERT .. ON CONFLICT`, `UPDATE .. RETURNING`, `SELECT .. FOR UPDATE`, data-modifying
//! `WITH`; no jsonb, no advisory locks).
//!
//! Every statement that changes an agent's version (a write, a deletion) also notifies the
//! store's watchers (`pg_notify` on [`CHANNEL`], see `listen`), in the same statement (no round
//! trip more), but only while one is registered in `agent_listeners` and has not expired
//! ([`notify!`]): a `NOTIFY` takes a database-wide lock at commit that serialises every
//! notifying commit, WAL flush included, so a store nobody watches must not pay for it. The
//! test costs the statement an index-free scan of that small table (its rows: one per watching
//! process).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// The channel the store's writers notify and its watchers listen on.
pub(super) const CHANNEL: &str = "agent_state_changes";

/// The server's clock in milliseconds since the Unix epoch, as `agent_listeners.expires_ms`
/// holds it (the server's: the listeners' and writers' hosts may disagree on the time).
macro_rules! server_ms {
    () => {
        "(extract(epoch FROM statement_timestamp()) * 1000)::bigint"
    };
}

/// A column that notifies the watchers of the change that made the agent `$agent` (an SQL
/// expression of text) version `$version` (of bigint; 0: deleted) while one listens: the
/// payload is the version, a space and the id (at most 20 + 1 + 255 bytes: within `NOTIFY`'s
/// 8000). Its value (false, or NULL when nobody listens) means nothing. A macro: the
/// statements are `concat!`ed literals.
///
/// A notifying transaction waits at its commit for the notification queue's lock, which
/// another notifying commit holds through its WAL flush. That wait is not for the agent's row,
/// which `busy_timeout_ms` bounds (the transaction's `lock_timeout`; 1 ms for 0): so once the
/// row is written, the column lifts `lock_timeout` for the rest of the transaction (the
/// client's `server_timeout_ms` still bounds the commit). The payload takes `left(.., 0)` of
/// that `set_config`, so the server cannot leave it unevaluated.
macro_rules! notify {
    ($version:literal, $agent:literal) => {
        concat!(
            "CASE WHEN EXISTS (SELECT 1 FROM agent_listeners WHERE expires_ms > ",
            server_ms!(),
            ") THEN pg_notify('agent_state_changes', ",
            $version,
            "::text || ' ' || ",
            $agent,
            " || left(set_config('lock_timeout', '0', true), 0)) IS NULL END"
        )
    };
}

pub(super) const HEAD: &str = "SELECT version, change_log, stamp FROM agent_state WHERE agent = $1";
/// The agent's row: its base (`value`, the state at version `base`), version, log setting,
/// stamp, base, tail (the bytes of the patches since the base), schema version, and those
/// patches, oldest first (see `delta`).
pub(super) const ROW: &str = "SELECT value, version, change_log, stamp, base, tail, schema,
        (SELECT array_agg(c.patch ORDER BY c.version) FROM agent_changes c
         WHERE c.agent = $1 AND c.version > s.base AND c.version <= s.version)
    FROM agent_state s WHERE agent = $1";
/// [`ROW`] locked, without the patches (read by [`PATCHES`] when the state is asked for).
pub(super) const ROW_FOR_UPDATE: &str =
    "SELECT value, version, change_log, stamp, base, tail, schema FROM agent_state
     WHERE agent = $1 FOR UPDATE";
/// The patches of the versions after $2 through $3, oldest first.
pub(super) const PATCHES: &str = "SELECT version, patch FROM agent_changes
    WHERE agent = $1 AND version > $2::bigint AND version <= $3::bigint ORDER BY version";
pub(super) const ENSURE_ROW: &str =
    "INSERT INTO agent_state (agent) VALUES ($1) ON CONFLICT (agent) DO NOTHING";
/// Writes the state ($2) as the base of its version ($3), its stamp ($4), the time of the write
/// ($5 ms; $6, the minute, rewritten only when later: an unchanged indexed column keeps the
/// update HOT), its size ($7) and schema version ($9); with $8 (the log is off and patches
/// were stored), deletes the patches before it.
pub(super) const WRITE_STATE: &str = concat!(
    "
WITH s AS (
    UPDATE agent_state SET value = $2, version = $3::bigint, stamp = $4::bigint,
        written_ms = $5::bigint, written_grain = greatest(written_grain, $6::bigint),
        base = $3::bigint, tail = 0, bytes = $7::bigint, schema = $9::integer
    WHERE agent = $1 RETURNING version
), d AS (
    DELETE FROM agent_changes WHERE agent = $1 AND $8::boolean AND version < $3::bigint
        AND EXISTS (SELECT 1 FROM s)
)
SELECT version, ",
    notify!("version", "$1::text"),
    " FROM s"
);
/// Writes version $2 as a patch ($5) on the base $11 of version $2 - 1 (stamped $12), with the
/// log off: the
/// head (stamp $3, time $4 ms and minute $6, size $7, schema version $13) and the patch's row
/// ($8 at_ms, $9 writer, $13 schema version, $14 the version a migration upgraded from), all or
/// nothing; nothing when the stored version, base or log setting moved (an optimistic write
/// sent without a lock).
pub(super) const WRITE_DELTA: &str = concat!(
    "
WITH s AS (
    UPDATE agent_state SET version = $2::bigint, stamp = $3::bigint, written_ms = $4::bigint,
        written_grain = greatest(written_grain, $6::bigint), bytes = $7::bigint,
        tail = tail + octet_length($5::text), schema = $13::integer
    WHERE agent = $1 AND version = $2::bigint - 1 AND change_log IS NULL AND base = $11::bigint
        AND stamp = $12::bigint
    RETURNING version
)
INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev, schema,
        migrated_from)
    SELECT $1, version, $8::bigint, $9::bigint, $5::text, NULL, $10::text, $13::integer,
        $14::integer FROM s
ON CONFLICT (agent, version) DO UPDATE SET at_ms = excluded.at_ms, writer = excluded.writer,
    patch = excluded.patch, next = NULL, prev = NULL, schema = excluded.schema,
    migrated_from = excluded.migrated_from
RETURNING version, ",
    notify!("version", "agent")
);
/// Makes $2 the base of the current version (see `delta`); with $3 (the log is off), drops the
/// patches.
pub(super) const REBASE: &str = "
WITH s AS (
    UPDATE agent_state SET value = $2, base = version, tail = 0 WHERE agent = $1 RETURNING version
)
DELETE FROM agent_changes WHERE agent = $1 AND $3::boolean AND EXISTS (SELECT 1 FROM s)";
pub(super) const SET_LOG: &str = "UPDATE agent_state SET change_log = $2 WHERE agent = $1";
pub(super) const CLEAR_LOG: &str = "DELETE FROM agent_changes WHERE agent = $1";
/// Appends a change ($2: its version; $10 its schema version, $11 the version a migration
/// upgraded from) and prunes: versions up to $8 (keep_last), and those older than $9 ms
/// (keep_seconds); never the change just appended. (The DELETE does not see the row the INSERT
/// adds: one snapshot for the whole statement.)
pub(super) const LOG_CHANGE: &str = "
WITH l AS (
    INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev, schema,
        migrated_from)
    VALUES ($1, $2::bigint, $3::bigint, $4::bigint, $5::text, $6::text, $7::text, $10::integer,
        $11::integer)
    ON CONFLICT (agent, version) DO UPDATE SET at_ms = excluded.at_ms, writer = excluded.writer,
        patch = excluded.patch, next = excluded.next, prev = excluded.prev,
        schema = excluded.schema, migrated_from = excluded.migrated_from
)
DELETE FROM agent_changes WHERE agent = $1 AND version < $2::bigint
    AND (version <= $8::bigint OR at_ms < $9::bigint)";
/// The changes after $2 that the retention ($3 keep_last, $4 keep_seconds in ms; NULL when
/// unset) keeps relative to the newest change: the rule pruning applies as each change is
/// logged, so what a retention setting changed since the last write is already in effect
/// (as on SQLite, which prunes in batches and hides the rest).
pub(super) const CHANGES_AFTER: &str =
    "SELECT c.version, c.at_ms, c.writer, c.patch, c.next, c.prev, c.schema, c.migrated_from
     FROM agent_changes c,
          (SELECT version AS v, at_ms AS t FROM agent_changes WHERE agent = $1
           ORDER BY version DESC LIMIT 1) n
     WHERE c.agent = $1 AND c.version > $2::bigint
       AND ($3::bigint IS NULL OR c.version > n.v - $3::bigint)
       AND ($4::bigint IS NULL OR c.at_ms >= n.t - $4::bigint OR c.version = n.v)
     ORDER BY c.version";
/// The change that made $2, if the retention keeps it (as in [`CHANGES_AFTER`]).
pub(super) const CHANGE_AT: &str =
    "SELECT c.version, c.at_ms, c.writer, c.patch, c.next, c.prev, c.schema, c.migrated_from
     FROM agent_changes c,
          (SELECT version AS v, at_ms AS t FROM agent_changes WHERE agent = $1
           ORDER BY version DESC LIMIT 1) n
     WHERE c.agent = $1 AND c.version = $2::bigint
       AND ($3::bigint IS NULL OR c.version > n.v - $3::bigint)
       AND ($4::bigint IS NULL OR c.at_ms >= n.t - $4::bigint OR c.version = n.v)";
/// The change that made $2, kept or not (this backend stores every change's state, so it
/// alone rebuilds the state at $2).
pub(super) const REPLAY_TO: &str =
    "SELECT version, at_ms, writer, patch, next, prev, schema, migrated_from FROM agent_changes
     WHERE agent = $1 AND version = $2::bigint";

/// Whether the store's tables are there, and the table of its listeners (see `schema`).
pub(super) const STORE_TABLES: &str =
    "SELECT to_regclass('agent_state_schema') IS NOT NULL, to_regclass('agent_listeners') IS NOT NULL";
/// Registers the listener $1, or renews its registration, until $2 ms from now on the server's
/// clock; true when it was registered and unexpired before (false: a new registration, or one
/// that lapsed, during which writers may have committed without notifying).
pub(super) const LISTENER_RENEW: &str = concat!(
    "WITH old AS (SELECT expires_ms FROM agent_listeners WHERE id = $1::bigint),
n AS (
    INSERT INTO agent_listeners (id, expires_ms) VALUES ($1::bigint, ",
    server_ms!(),
    " + $2::bigint)
    ON CONFLICT (id) DO UPDATE SET expires_ms = excluded.expires_ms
)
SELECT coalesce((SELECT expires_ms FROM old), 0) > ",
    server_ms!()
);
/// Forgets the listeners expired for more than a minute (processes that ended without
/// unregistering: killed, or cut off from the server).
pub(super) const LISTENERS_PRUNE: &str = concat!(
    "DELETE FROM agent_listeners WHERE expires_ms < ",
    server_ms!(),
    " - 60000"
);
/// Unregisters the listener $1.
pub(super) const LISTENER_DROP: &str = "DELETE FROM agent_listeners WHERE id = $1::bigint";
/// The agents with a state stored and their versions, by id in byte order (the index
/// `agent_state_by_id`); the watcher's reads add their bounds on the id (see `watch_reads`).
pub(super) const VERSIONS: &str =
    "SELECT agent, version FROM agent_state WHERE value IS NOT NULL AND version > 0";
/// The versions of those of the agents $1 (an array) with a state stored.
pub(super) const VERSIONS_OF: &str = "SELECT agent, version FROM agent_state
    WHERE agent = ANY($1::text[]) AND value IS NOT NULL AND version > 0";

/// The optimistic commit of version $3 ($4: its stamp; $5, $6: the time, $7 the size, $8 the
/// schema version) with the log off. (A first write, version 1 or
/// the first after a deletion, is always a locked one: its version depends on the agent's
/// tombstone, `agent_deleted`.)
pub(super) const NEXT_WRITE: &str = concat!(
    "
UPDATE agent_state SET value = $2, version = $3::bigint, stamp = $4::bigint,
    written_ms = $5::bigint, written_grain = greatest(written_grain, $6::bigint),
    base = $3::bigint, tail = 0, bytes = $7::bigint, schema = $8::integer
WHERE agent = $1 AND version = $3::bigint - 1 AND change_log IS NULL
RETURNING version, ",
    notify!("version", "agent")
);
/// [`NEXT_WRITE`] when patches are stored ($9: true), which it deletes. (A statement of its
/// own: a data-modifying `WITH` costs the server a third of a plain write's time, which a
/// write that has no patches to delete should not pay.)
pub(super) const NEXT_WRITE_DROPPING: &str = concat!(
    "
WITH s AS (
    UPDATE agent_state SET value = $2, version = $3::bigint, stamp = $4::bigint,
        written_ms = $5::bigint, written_grain = greatest(written_grain, $6::bigint),
        base = $3::bigint, tail = 0, bytes = $7::bigint, schema = $8::integer
    WHERE agent = $1 AND version = $3::bigint - 1 AND change_log IS NULL
    RETURNING version
), d AS (
    DELETE FROM agent_changes WHERE agent = $1 AND $9::boolean AND version < $3::bigint
        AND EXISTS (SELECT 1 FROM s)
)
SELECT version, ",
    notify!("version", "$1::text"),
    " FROM s"
);
/// The optimistic commit of version $3 with the log on ($4: the retention it was computed
/// with), its log entry ($5 at_ms, $6 writer, $7 patch, $8 next or NULL for $2, $9 prev) and
/// the pruning ($10, $11 as in [`LOG_CHANGE`]), its stamp ($12), the time ($13, $14 as in
/// [`WRITE_STATE`]), its size ($15), its schema version ($16, of the state and the entry) and
/// the version a migration upgraded from ($17, the entry's), all or nothing. (With the log on, every version's
/// state is stored: the log's entries hold it, see `delta`.)
pub(super) const LOGGED_WRITE: &str = concat!(
    "
WITH s AS (
    UPDATE agent_state SET value = $2, version = $3::bigint, stamp = $12::bigint,
        written_ms = $13::bigint, written_grain = greatest(written_grain, $14::bigint),
        base = $3::bigint, tail = 0, bytes = $15::bigint, schema = $16::integer
    WHERE agent = $1 AND version = $3::bigint - 1 AND change_log = $4::text
    RETURNING version
), l AS (
    INSERT INTO agent_changes (agent, version, at_ms, writer, patch, next, prev, schema,
        migrated_from)
    SELECT $1, version, $5::bigint, $6::bigint, $7::text, COALESCE($8::text, $2), $9::text,
        $16::integer, $17::integer FROM s
    ON CONFLICT (agent, version) DO UPDATE SET at_ms = excluded.at_ms, writer = excluded.writer,
        patch = excluded.patch, next = excluded.next, prev = excluded.prev,
        schema = excluded.schema, migrated_from = excluded.migrated_from
), d AS (
    DELETE FROM agent_changes WHERE agent = $1 AND EXISTS (SELECT 1 FROM s)
        AND version < $3::bigint AND (version <= $10::bigint OR at_ms < $11::bigint)
)
SELECT count(*), bool_and(",
    notify!("version", "$1::text"),
    ") FROM s"
);

pub(super) const UNKNOWN_OUTCOME: &str =
    "the connection was lost while committing: the outcome is unknown; read the state's version \
     to tell";

/// The version the first write of the agent whose id hashes to $1 takes: after its tombstone's.
pub(super) const FIRST_VERSION: &str =
    "SELECT version + 1 FROM agent_deleted WHERE id_hash = $1::bigint";

/// The columns of a listing's entry.
pub(super) const AGENT_COLUMNS: &str = "agent, version, bytes, written_ms";
/// A deletion: the agent's row, locked.
pub(super) const AGENT_FOR_DELETE: &str =
    "SELECT version, value IS NOT NULL, change_log IS NOT NULL
    FROM agent_state WHERE agent = $1 FOR UPDATE";
/// The idle agents ($1: the minute, $2: the time in ms, $3: how many), longest idle first.
/// Locked: one being written now is skipped, and one written since the statement began is
/// re-checked against its new time (and skipped).
pub(super) const IDLE_FOR_DELETE: &str = "SELECT agent, version, bytes, written_ms
    FROM agent_state WHERE written_grain <= $1::bigint AND written_ms < $2::bigint
        AND value IS NOT NULL
    ORDER BY written_grain, agent LIMIT $3::bigint FOR UPDATE SKIP LOCKED";
/// [`IDLE_FOR_DELETE`] for a dry run: nothing locked.
pub(super) const IDLE: &str = "SELECT agent, version, bytes, written_ms
    FROM agent_state WHERE written_grain <= $1::bigint AND written_ms < $2::bigint
        AND value IS NOT NULL
    ORDER BY written_grain, agent LIMIT $3::bigint";
/// Deletes the change logs of the agents $1 (an array).
pub(super) const DELETE_CHANGES: &str = "DELETE FROM agent_changes WHERE agent = ANY($1::text[])";
/// Deletes the rows of the agents $1 that hold no change-log setting, and empties those that
/// do (the setting stays: nothing stored, version 0, schema version 0); notifies the
/// watchers of each deletion (version 0).
pub(super) const DELETE_ROWS: &str = concat!(
    "
WITH d AS (DELETE FROM agent_state WHERE agent = ANY($1::text[]) AND change_log IS NULL),
e AS (
    UPDATE agent_state SET value = NULL, version = 0, stamp = 0, base = 0, tail = 0, bytes = 0,
        schema = 0
    WHERE agent = ANY($1::text[]) AND change_log IS NOT NULL
)
SELECT ",
    notify!("0", "a"),
    " FROM unnest($1::text[]) a"
);
/// The tombstones of deleted agents: the hashes of their ids ($1) and their last versions ($2).
pub(super) const TOMBSTONES: &str = "INSERT INTO agent_deleted (id_hash, version)
    SELECT * FROM unnest($1::bigint[], $2::bigint[])
    ON CONFLICT (id_hash) DO UPDATE SET version = greatest(agent_deleted.version, excluded.version)";

/// `sql`, one of the optimistic commits above ([`NEXT_WRITE`], [`NEXT_WRITE_DROPPING`],
/// [`WRITE_DELTA`], [`LOGGED_WRITE`]), with two parameters more, after its own:
/// `lock_timeout` and `synchronous_commit`, which its `UPDATE` of the agent's row sets for the
/// statement's own transaction (`set_config(.., true)`) in its condition. The condition is
/// evaluated on the row before the `UPDATE` may wait for the row's lock, and every other write
/// of the statement reads the `UPDATE`'s result first: the settings are in effect before any
/// lock wait, and at the commit. (The unnamed statement of `exec` mode, in autocommit: one
/// statement in place of `BEGIN`, `SET LOCAL` twice and `COMMIT`.) Made once per statement.
pub(super) fn with_settings(sql: &'static str) -> &'static str {
    static MADE: LazyLock<Mutex<HashMap<&'static str, &'static str>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    made.entry(sql).or_insert_with(|| {
        let n = last_param(sql);
        let condition = format!(
            "WHERE agent = $1 AND set_config('lock_timeout', ${}::text, true) IS NOT NULL \
             AND set_config('synchronous_commit', ${}::text, true) IS NOT NULL AND ",
            n + 1,
            n + 2
        );
        // Made for the four statements above, each of which has this condition (a test checks);
        // another statement would be refused by the server (two parameters too many).
        Box::leak(
            sql.replacen(UPDATE_CONDITION, &condition, 1)
                .into_boxed_str(),
        )
    })
}

/// The start of the condition of the optimistic commits' `UPDATE`, where
/// [`with_settings`] puts the settings.
const UPDATE_CONDITION: &str = "WHERE agent = $1 AND ";

/// The highest `$n` of `sql`.
fn last_param(sql: &str) -> usize {
    sql.split('$')
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_optimistic_commit_sets_the_settings_in_its_update_condition() {
        for (sql, own) in [
            (NEXT_WRITE, 8),
            (NEXT_WRITE_DROPPING, 9),
            (WRITE_DELTA, 14),
            (LOGGED_WRITE, 17),
        ] {
            assert_eq!(last_param(sql), own);
            let made = with_settings(sql);
            assert_eq!(last_param(made), own + 2, "{made}");
            let update = made.find("UPDATE agent_state").unwrap();
            let condition = made.find(UPDATE_CONDITION).unwrap();
            let lock = made.find("set_config('lock_timeout'").unwrap();
            let sync = made.find("set_config('synchronous_commit'").unwrap();
            assert!(
                update < condition && condition < lock && lock < sync,
                "{made}"
            );
            // The same text each time (made once).
            assert!(std::ptr::eq(made, with_settings(sql)));
        }
    }
}
