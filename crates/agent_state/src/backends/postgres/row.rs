//! The agent's row on PostgreSQL as the store's traits use it: read with its patches (see
//! `delta`), and a pending write made under the row's lock.

use super::conn::{
    bool_param as boolean, int4_param as int4, int8_param as int8, text_param as txt,
};
use super::sql::{PATCHES, ROW, WRITE_DELTA, WRITE_STATE};
use super::{delta, Kind, Postgres};
use crate::error::Result;

/// The agent's row as a read sees it: its base, version, stamp, base version, patch bytes and
/// patches (see `super::delta`).
pub(super) struct RowRead {
    pub value: Option<String>,
    pub version: i64,
    pub stamp: i64,
    pub base: i64,
    pub tail: i64,
    /// The state's schema version as stored (see `super::read_schema`).
    pub schema: i32,
    pub patches: Option<Vec<Option<String>>>,
}

impl Postgres {
    /// The agent's row: inside a locked or read transaction, as it was read there; otherwise
    /// read now (with its patches, in one round trip).
    pub(super) fn read_row(&self) -> Result<RowRead> {
        let kept = self.txn.borrow().as_ref().and_then(|o| {
            // An optimistic write reads afresh (its reads are not one snapshot).
            if o.kind == Kind::Optimistic {
                return None;
            }
            let (value, head, base) = (o.value.clone()?, o.head.as_ref()?, o.base?);
            Some(RowRead {
                value,
                version: head.0,
                stamp: head.2,
                base: base.0,
                tail: base.1,
                schema: o.schema?,
                patches: o.patches.clone(),
            })
        });
        if let Some(kept) = kept {
            return Ok(kept);
        }
        let agent = &self.agent;
        let in_txn = self.txn.borrow().is_some();
        let row = if in_txn {
            self.in_txn("cannot read the state", |open| {
                let row = open.conn.query_opt(ROW, &[txt(agent)])?;
                open.keep_row(row.as_ref());
                Ok(row)
            })?
        } else {
            self.autocommit("cannot read the state", |conn| {
                conn.query_opt(ROW, &[txt(agent)])
            })?
        };
        Ok(match row {
            None => RowRead {
                value: None,
                version: 0,
                stamp: 0,
                base: 0,
                tail: 0,
                schema: 0,
                patches: Some(Vec::new()),
            },
            Some(r) => RowRead {
                value: r.get(0),
                version: r.get(1),
                stamp: r.get(3),
                base: r.get(4),
                tail: r.get(5),
                schema: r.get(6),
                patches: Some(
                    r.get::<_, Option<Vec<Option<String>>>>(7)
                        .unwrap_or_default(),
                ),
            },
        })
    }

    /// The patches of the versions after `base` through `version`, in the open transaction.
    pub(super) fn read_patches(&self, base: i64, version: i64) -> Result<Vec<Option<String>>> {
        let agent = &self.agent;
        let rows = self.in_txn("cannot read the state's patches", |open| {
            open.conn
                .query(PATCHES, &[txt(agent), int8(&base), int8(&version)])
        })?;
        Ok(rows.iter().map(|r| r.get(1)).collect())
    }

    /// Makes `pending` in the locked transaction.
    pub(super) fn write_locked(&self, pending: &delta::Pending) -> Result<()> {
        let agent = &self.agent;
        let head = delta::Head::now(pending.version(), self.stamps.own());
        let delta::Head {
            version: v,
            stamp,
            now,
            grain,
        } = head;
        self.in_txn("cannot write the state", |open| {
            // The row is locked (begin_write): it is there, and one row is written.
            match pending {
                delta::Pending::Full {
                    value,
                    bytes,
                    drop_patches,
                    schema,
                    ..
                } => {
                    open.conn.query(
                        WRITE_STATE,
                        &[
                            txt(agent),
                            txt(value),
                            int8(&v),
                            int8(&stamp),
                            int8(&now),
                            int8(&grain),
                            int8(bytes),
                            boolean(drop_patches),
                            int4(schema),
                        ],
                    )?;
                    open.value = Some(Some(value.clone()));
                    open.base = Some((v, 0));
                    open.patches = Some(Vec::new());
                }
                delta::Pending::Patch { .. } => {
                    if let Some(params) = pending.delta_params(agent, &head) {
                        open.conn.query(WRITE_DELTA, &params)?;
                    }
                    // The transaction's view of the state is now unknown without its patches.
                    open.value = None;
                    open.base = None;
                    open.patches = None;
                }
            }
            if let Some(head) = open.head.as_mut() {
                head.0 = v;
                head.2 = stamp;
            }
            open.schema = Some(pending.schema());
            Ok(())
        })?;
        self.stamps.wrote(v);
        Ok(())
    }
}
