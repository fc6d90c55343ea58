//! The database's agents as a whole ([`Agents`]): a listing paged through the ids in byte
//! order (the index `agent_state_by_id`), a deletion in one locked transaction, and expiry of
//! the idle agents (the index `agent_state_idle`), each agent of a batch locked and re-checked.
//!
//! **Deletion and concurrent writers.** The deletion locks the agent's row first, so a write
//! holding it finishes first (and is deleted with the rest); a write that comes after waits
//! for the deletion to commit, then finds no row, and its first write reads the agent's
//! tombstone afterwards, already there (first writes always take the row's lock, see `sql`). A
//! serialization failure or deadlock (40001, 40P01) is retried, as writes are.

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::conn::{int8_param as int8, text_param as txt, Param};
use super::sql::*;
use super::{Kind, Postgres};
use crate::error::{Error, Result};
use crate::store::{grain_of, id_hash, AgentInfo, AgentQuery, Agents, Transactions};

/// How many times a deletion that lost a race to a serialization failure or a deadlock is made
/// again.
const RETRIES: u32 = 10;

fn info(row: &Row) -> AgentInfo {
    AgentInfo {
        id: row.get(0),
        version: row.get::<_, i64>(1) as u64,
        bytes: row.get::<_, i64>(2) as u64,
        written_ms: row.get(3),
    }
}

impl Postgres {
    /// Runs `f` in a locked transaction (`BEGIN` with the handle's settings), committed when it
    /// succeeds, made again when the server aborted it to resolve a conflict.
    fn deleting<T>(&self, f: impl Fn(&Postgres) -> Result<T>) -> Result<T> {
        self.refuse_writes()?;
        for _ in 0..RETRIES {
            self.begin(Kind::Locked, |open| open.conn.begin(self.settings))?;
            let attempt = f(self).and_then(|v| self.commit().map(|()| v));
            match attempt {
                Err(Error::Stale(_)) => self.rollback(),
                other => {
                    self.rollback();
                    return other;
                }
            }
        }
        Err(Error::Busy(
            "the server aborted the deletion 10 times in a row to resolve conflicts with other \
             transactions (SQLSTATE 40001 or 40P01); nothing was deleted, try again"
                .to_string()
                .into(),
        ))
    }

    /// Inside the open transaction: deletes the agents `ids` (their rows locked), whose
    /// versions are `versions`, leaving their tombstones.
    fn delete_rows(&self, ids: &Vec<String>, versions: &Vec<i64>) -> Result<()> {
        let array = || -> Param<'_> { (ids, Type::TEXT_ARRAY) };
        let hashes: Vec<i64> = ids.iter().map(|id| id_hash(id)).collect();
        self.in_txn("cannot delete the agent", |open| {
            open.conn.execute(DELETE_CHANGES, &[array()])?;
            open.conn.execute(DELETE_ROWS, &[array()])?;
            open.conn.execute(
                TOMBSTONES,
                &[(&hashes, Type::INT8_ARRAY), (versions, Type::INT8_ARRAY)],
            )
        })
    }
}

impl Agents for Postgres {
    fn list_agents(&self, query: &AgentQuery) -> Result<Vec<AgentInfo>> {
        let mut sql = format!("SELECT {AGENT_COLUMNS} FROM agent_state WHERE value IS NOT NULL");
        let start = query
            .start()
            .map(|(s, exclusive)| (s.to_string(), exclusive));
        let end = query.prefix_end();
        let limit = query.limit as i64;
        let mut params: Vec<Param<'_>> = Vec::new();
        if let Some((start, exclusive)) = &start {
            params.push(txt(start));
            let op = if *exclusive { ">" } else { ">=" };
            sql += &format!(" AND agent COLLATE \"C\" {op} ${}", params.len());
        }
        if let Some(end) = &end {
            params.push(txt(end));
            sql += &format!(" AND agent COLLATE \"C\" < ${}", params.len());
        }
        params.push(int8(&limit));
        sql += &format!(" ORDER BY agent COLLATE \"C\" LIMIT ${}", params.len());
        let rows = self.read("cannot list the agents", |conn| conn.query(&sql, &params))?;
        Ok(rows.iter().map(info).collect())
    }

    fn delete_agent(&self, id: &str, allow: &dyn Fn(u64) -> Result<()>) -> Result<Option<u64>> {
        let id = id.to_string();
        self.deleting(|store| {
            let row = store.in_txn("cannot delete the agent", |open| {
                open.conn.query_opt(AGENT_FOR_DELETE, &[txt(&id)])
            })?;
            let stored = row
                .as_ref()
                .filter(|r| r.get::<_, bool>(1))
                .map(|r| r.get::<_, i64>(0) as u64);
            allow(stored.unwrap_or(0))?;
            let Some(version) = stored else {
                return Ok(None);
            };
            store.delete_rows(&vec![id.clone()], &vec![version as i64])?;
            Ok(Some(version))
        })
    }

    fn expire_agents(&self, before_ms: i64, limit: usize, dry_run: bool) -> Result<Vec<AgentInfo>> {
        let grain = grain_of(before_ms);
        let limit = limit as i64;
        if dry_run {
            let rows = self.read("cannot list the idle agents", |conn| {
                conn.query(IDLE, &[int8(&grain), int8(&before_ms), int8(&limit)])
            })?;
            return Ok(rows.iter().map(info).collect());
        }
        self.deleting(|store| {
            let rows = store.in_txn("cannot list the idle agents", |open| {
                open.conn.query(
                    IDLE_FOR_DELETE,
                    &[int8(&grain), int8(&before_ms), int8(&limit)],
                )
            })?;
            let expired: Vec<AgentInfo> = rows.iter().map(info).collect();
            if !expired.is_empty() {
                let ids = expired.iter().map(|a| a.id.clone()).collect();
                let versions = expired.iter().map(|a| a.version as i64).collect();
                store.delete_rows(&ids, &versions)?;
            }
            Ok(expired)
        })
    }
}
