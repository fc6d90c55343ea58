//! The watcher's store-wide reads on PostgreSQL ([`WatchReads`]): the versions of the watched
//! agents, each read one statement (one snapshot) on a connection of the pool, whatever the
//! number of agents.

use tokio_postgres::types::Type;

use super::conn::{text_param as txt, Param};
use super::sql::{VERSIONS, VERSIONS_OF};
use super::Postgres;
use crate::error::Result;
use crate::store::{AgentQuery, StoreOptions, WatchReads};

/// The reads, on a handle of no agent (see [`Postgres::open_existing`]).
pub struct PgWatchReads(Postgres);

impl PgWatchReads {
    /// Opens the reads of the store at `uri`. Never creates it: no store there is
    /// [`Error::Storage`](crate::Error::Storage); the server's failures as for any open.
    pub fn open(uri: &str, options: &StoreOptions) -> Result<PgWatchReads> {
        Ok(PgWatchReads(Postgres::open_existing(uri, options)?))
    }
}

fn rows_to_versions(rows: &[tokio_postgres::Row]) -> Vec<(String, u64)> {
    rows.iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
        .collect()
}

impl WatchReads for PgWatchReads {
    /// The ids from `prefix` up to the first id past every id starting with it, on
    /// `agent_state_by_id` (byte order, `COLLATE "C"`, as a listing reads it); every agent
    /// for `""`.
    fn versions_with_prefix(&mut self, prefix: &str) -> Result<Vec<(String, u64)>> {
        let end = AgentQuery {
            prefix: Some(prefix.to_string()),
            after: None,
            limit: 1,
        }
        .prefix_end();
        let mut sql = VERSIONS.to_string();
        let mut params: Vec<Param<'_>> = Vec::new();
        if !prefix.is_empty() {
            params.push(txt(&prefix));
            sql += " AND agent COLLATE \"C\" >= $1";
        }
        if let Some(end) = &end {
            params.push(txt(end));
            sql += &format!(" AND agent COLLATE \"C\" < ${}", params.len());
        }
        sql += " ORDER BY agent COLLATE \"C\"";
        let rows = self
            .0
            .read("cannot read the watched agents' versions", |conn| {
                conn.query(&sql, &params)
            })?;
        Ok(rows_to_versions(&rows))
    }

    fn versions_of(&mut self, ids: &[&str]) -> Result<Vec<(String, u64)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = ids.to_vec();
        let rows = self
            .0
            .read("cannot read the watched agents' versions", |conn| {
                conn.query(VERSIONS_OF, &[(&ids, Type::TEXT_ARRAY)])
            })?;
        Ok(rows_to_versions(&rows))
    }
}
