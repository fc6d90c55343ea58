//! Delta storage on PostgreSQL (schema 4): which writes send only their patch.
//!
//! A state is stored as its base (`agent_state.value`, the state at version `base`) and the
//! patches of the versions after it (rows of `agent_changes` whose `next` is NULL). A write of a
//! state larger than [`SMALL_STATE`] sends only its patch and a constant: no state crosses the
//! network, and the server rewrites one small row version (a large base is TOASTed, and an
//! UPDATE that leaves it alone does not copy it). The full state is sent again as the new base
//! when the patches since the base would outweigh it, or number more than [`max_patches`] allows, and at
//! a replacement or an agent's first write.
//!
//! The decision needs the base and the patch bytes of the version the write follows: a locked
//! write reads them with the row; an optimistic one uses what this handle last read or wrote
//! ([`Known`]) and sends the base with the write, which then changes nothing when the stored
//! base moved (the agent retries under the row's lock). With the change log on, every version's
//! state is stored whole: the log's entries hold each state anyway (see `sql::LOGGED_WRITE`).
//!
//! A handle whose cache is behind reads the base and the patches again (not only the patches it
//! missed, as on SQLite): after a failover that lost the last versions, the same version
//! numbers come again with other states (see `super::stamp`), and a patch stored after such a
//! version would apply to a state it was not made from.

use super::conn::{
    bool_param, int4_param as int4, int8_param as int8, text_param as txt, Conn, Param,
};
use super::error::PgResult;
use super::sql::{LOGGED_WRITE, NEXT_WRITE, NEXT_WRITE_DROPPING, WRITE_DELTA};
use super::{PendingLog, Postgres};
use crate::error::Result;
use crate::store::{max_patches, LogRetention, NewChange, SMALL_STATE};

/// The head of a stored version: its base and the bytes of the patches since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Known {
    pub version: u64,
    pub base: u64,
    pub tail: u64,
    /// The stamp of the state at `version` (see `super::stamp`): an optimistic patch is
    /// written only onto that very state.
    pub stamp: i64,
}

/// A write to make (at commit, when optimistic).
pub(super) enum Pending {
    /// The full state, as the new base; `drop_patches`: the log is off and patches are stored.
    Full {
        value: String,
        version: u64,
        bytes: i64,
        drop_patches: bool,
        /// The schema version of the state (see `super::stored_schema`).
        schema: i32,
    },
    /// The patch on the base `base` of the version before, whose stamp is `after_stamp`.
    Patch {
        patch: String,
        version: u64,
        bytes: i64,
        base: i64,
        after_stamp: i64,
        at_ms: i64,
        writer: i64,
        /// The schema version of the state, and the version a migration upgraded from (the
        /// patch row's; see `super::stored_schema`).
        schema: i32,
        migrated_from: Option<i32>,
    },
}

impl Pending {
    /// What writing `change` (with the stamp `stamp`) stores, given `known`, the head of the
    /// version it follows when known; and the head after it.
    pub(super) fn of(
        change: &NewChange<'_>,
        log: Option<LogRetention>,
        known: Option<Known>,
        stamp: i64,
    ) -> Result<(Pending, Known)> {
        let bytes = change.next.len() as i64;
        let follows = known.filter(|k| k.version + 1 == change.version && k.version > 0);
        if let (None, Some(patch), false, Some(k)) = (log, change.patch, change.first, follows) {
            let tail = k.tail + patch.len() as u64;
            if change.next.len() > SMALL_STATE
                && tail <= change.next.len() as u64
                && change.version - k.base <= max_patches(change.next.len())
            {
                let pending = Pending::Patch {
                    patch: super::text(patch)?.to_string(),
                    version: change.version,
                    bytes,
                    base: k.base as i64,
                    after_stamp: k.stamp,
                    at_ms: change.at_ms,
                    writer: change.writer as i64,
                    schema: super::stored_schema(change.schema),
                    migrated_from: change.migrated_from.map(super::stored_schema),
                };
                let after = Known {
                    version: change.version,
                    base: k.base,
                    tail,
                    stamp,
                };
                return Ok((pending, after));
            }
        }
        // Unknown: there may be patches to drop (a DELETE that finds none costs an index probe).
        let drop_patches = log.is_none() && follows.is_none_or(|k| k.base < k.version);
        let pending = Pending::Full {
            value: super::text(change.next.json())?.to_string(),
            version: change.version,
            bytes,
            drop_patches,
            schema: super::stored_schema(change.schema),
        };
        let after = Known {
            version: change.version,
            base: change.version,
            tail: 0,
            stamp,
        };
        Ok((pending, after))
    }

    pub(super) fn version(&self) -> u64 {
        match self {
            Pending::Full { version, .. } | Pending::Patch { version, .. } => *version,
        }
    }

    /// The schema version of the state written (as stored).
    pub(super) fn schema(&self) -> i32 {
        match self {
            Pending::Full { schema, .. } | Pending::Patch { schema, .. } => *schema,
        }
    }

    /// [`WRITE_DELTA`]'s parameters for a patch of `agent` written as `head` (`None` for a
    /// full write).
    pub(super) fn delta_params<'a>(
        &'a self,
        agent: &'a String,
        head: &'a Head,
    ) -> Option<[Param<'a>; 14]> {
        const NO_PREV: Option<&str> = None;
        let Pending::Patch {
            patch,
            bytes,
            base,
            after_stamp,
            at_ms,
            writer,
            schema,
            migrated_from,
            ..
        } = self
        else {
            return None;
        };
        Some([
            txt(agent),
            int8(&head.version),
            int8(&head.stamp),
            int8(&head.now),
            txt(patch),
            int8(&head.grain),
            int8(bytes),
            int8(at_ms),
            int8(writer),
            txt(&NO_PREV),
            int8(base),
            int8(after_stamp),
            int4(schema),
            int4(migrated_from),
        ])
    }
}

/// The head columns a write sets: its version, the handle's stamp, the time (ms) and its minute.
pub(super) struct Head {
    pub version: i64,
    pub stamp: i64,
    pub now: i64,
    pub grain: i64,
}

impl Head {
    /// The head of `version`, written now by a handle stamping `stamp`.
    pub(super) fn now(version: u64, stamp: i64) -> Head {
        let now = crate::store::now_ms();
        Head {
            version: version as i64,
            stamp,
            now,
            grain: crate::store::grain_of(now),
        }
    }
}

impl Postgres {
    /// The optimistic commit: one transaction of one statement, in one round trip
    /// ([`Conn::commit_one`]). `Ok(false)`: the stored version or log setting moved, nothing
    /// written.
    pub(super) fn commit_optimistic(
        &self,
        conn: &mut Conn,
        pending: &Pending,
        log: Option<&PendingLog>,
    ) -> PgResult<bool> {
        let agent = &self.agent;
        let settings = self.settings;
        let head = Head::now(pending.version(), self.stamps.own());
        if let Some(params) = pending.delta_params(agent, &head) {
            return Ok(!conn.commit_one(settings, WRITE_DELTA, &params)?.is_empty());
        }
        let Head {
            version,
            stamp,
            now,
            grain,
        } = head;
        let rows = match (pending, log) {
            // Sent above.
            (Pending::Patch { .. }, _) => return Ok(false),
            (
                Pending::Full {
                    value,
                    bytes,
                    drop_patches,
                    schema,
                    ..
                },
                None,
            ) => {
                let params = [
                    txt(agent),
                    txt(value),
                    int8(&version),
                    int8(&stamp),
                    int8(&now),
                    int8(&grain),
                    int8(bytes),
                    int4(schema),
                    bool_param(drop_patches),
                ];
                if *drop_patches {
                    conn.commit_one(settings, NEXT_WRITE_DROPPING, &params)?
                } else {
                    conn.commit_one(settings, NEXT_WRITE, &params[..8])?
                }
            }
            (
                Pending::Full {
                    value,
                    bytes,
                    schema,
                    ..
                },
                Some(log),
            ) => {
                // The logged state is the state written: not sent twice.
                let next = (log.next != *value).then_some(log.next.as_str());
                let params: [Param<'_>; 17] = [
                    txt(agent),
                    txt(value),
                    int8(&version),
                    txt(&log.retention),
                    int8(&log.at_ms),
                    int8(&log.writer),
                    txt(&log.patch),
                    txt(&next),
                    txt(&log.prev),
                    int8(&log.below),
                    int8(&log.since),
                    int8(&stamp),
                    int8(&now),
                    int8(&grain),
                    int8(bytes),
                    int4(schema),
                    int4(&log.migrated_from),
                ];
                let rows = conn.commit_one(settings, LOGGED_WRITE, &params)?;
                return Ok(rows.first().is_some_and(|row| row.get::<_, i64>(0) > 0));
            }
        };
        Ok(!rows.is_empty())
    }
}
