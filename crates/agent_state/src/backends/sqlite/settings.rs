//! The store's settings: table `agent_settings(name, value)`, one row per setting.
//!
//! The table is created when a setting is first recorded (stores of every schema read without
//! it as "nothing recorded"), so recording a setting never changes the schema version and an
//! older release still opens the file (it ignores the table, and with it the setting).

use rusqlite::OptionalExtension;

use super::Sqlite;
use crate::error::Result;

/// The setting `store_max_value_bytes` records.
const CAP: &str = "max_value_bytes";

impl Sqlite {
    pub(super) fn stored_cap(&self) -> Result<Option<usize>> {
        let fail = |e| self.storage_err("cannot read the store's settings", e);
        let conn = self.conn()?;
        let exists: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'agent_settings'",
            )?
            .query_row([], |r| r.get(0))
            .map_err(fail)?;
        if exists == 0 {
            return Ok(None);
        }
        let bytes: Option<i64> = conn
            .prepare_cached("SELECT value FROM agent_settings WHERE name = ?1")?
            .query_row([CAP], |r| r.get(0))
            .optional()
            .map_err(fail)?;
        Ok(bytes.and_then(|n| usize::try_from(n).ok()))
    }

    pub(super) fn set_stored_cap(&self, bytes: usize) -> Result<()> {
        let fail = |e| self.storage_err("cannot write the store's settings", e);
        self.begin_write()?;
        let written = (|| -> Result<()> {
            let conn = self.conn()?;
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS agent_settings (name TEXT PRIMARY KEY NOT NULL, value)",
            )
            .map_err(fail)?;
            conn.prepare_cached(
                "INSERT INTO agent_settings (name, value) VALUES (?1, ?2)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            )?
            .execute(rusqlite::params![CAP, bytes as i64])
            .map_err(fail)?;
            Ok(())
        })();
        match written {
            Ok(()) => self.commit(),
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }
}
