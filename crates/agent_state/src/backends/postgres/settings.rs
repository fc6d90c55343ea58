//! The store's settings: table `agent_settings(name, value)`, one row per setting, in the
//! tables a new database is created with; a database created by an older release gets it when
//! a setting is first recorded (and reads without it as "nothing recorded"), so recording a
//! setting never changes the schema version.

use super::conn::text_param as txt;
use super::Postgres;
use crate::error::Result;
use crate::store::StoreSettings;

/// The setting `store_max_value_bytes` records.
const CAP: &str = "max_value_bytes";

/// SQLSTATE undefined_table: a database whose tables an older release created.
const NO_TABLE: &str = "42P01";

impl StoreSettings for Postgres {
    /// One round trip, outside a transaction.
    fn stored_cap(&self) -> Result<Option<usize>> {
        let bytes = self.autocommit("cannot read the store's settings", |conn| {
            match conn.query_opt(
                "SELECT value FROM agent_settings WHERE name = $1",
                &[txt(&CAP)],
            ) {
                Ok(row) => Ok(row.map(|r| r.get::<_, i64>(0))),
                Err(e) if e.code().map(|c| c.code()) == Some(NO_TABLE) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        Ok(bytes.and_then(|n| usize::try_from(n).ok()))
    }

    /// One simple query: its statements run in one implicit transaction.
    fn set_stored_cap(&self, bytes: usize) -> Result<()> {
        self.refuse_writes()?;
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS agent_settings (name text PRIMARY KEY, value bigint NOT NULL);
             INSERT INTO agent_settings (name, value) VALUES ('{CAP}', {bytes})
             ON CONFLICT (name) DO UPDATE SET value = excluded.value"
        );
        self.autocommit("cannot write the store's settings", |conn| {
            conn.batch_execute(&sql)
        })
    }
}
