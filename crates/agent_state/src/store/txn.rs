//! A transaction that rolls back unless committed.

use std::ops::Deref;

use super::Backend;
use crate::error::Result;

/// An open transaction on a [`Backend`]; dropping it without [`Txn::commit`] rolls it back,
/// so every early return and `?` inside a transaction ends it. Read transactions are simply
/// dropped.
#[must_use = "a transaction dropped at once is rolled back at once"]
pub struct Txn<'a> {
    store: &'a dyn Backend,
    open: bool,
}

impl<'a> Txn<'a> {
    /// A read transaction whose snapshot is taken at its first read.
    pub fn read(store: &'a dyn Backend) -> Result<Txn<'a>> {
        store.begin_read()?;
        Ok(Txn { store, open: true })
    }

    /// A read transaction whose snapshot is taken now: what a commit mark or data version read
    /// afterwards says can be compared with what the transaction reads.
    pub fn snapshot(store: &'a dyn Backend) -> Result<Txn<'a>> {
        let txn = Txn::read(store)?;
        txn.refresh()?;
        Ok(txn)
    }

    /// A write transaction (the store's write lock is taken now).
    pub fn write(store: &'a dyn Backend) -> Result<Txn<'a>> {
        store.begin_write()?;
        Ok(Txn { store, open: true })
    }

    /// A write transaction that takes no lock where the backend offers that (see
    /// [`Transactions::optimistic`](super::Transactions::optimistic)); a locked one elsewhere.
    pub fn optimistic_write(store: &'a dyn Backend) -> Result<Txn<'a>> {
        // Under a cancel token, the lock is taken first: the optimistic commit sends the write
        // and its commit in one round trip, so a wait for the row inside it could not be
        // cancelled without leaving the outcome unknown; under the lock, every wait comes
        // before the commit is sent.
        if crate::cancel::current().is_some() {
            return Txn::write(store);
        }
        store.begin_optimistic_write()?;
        Ok(Txn { store, open: true })
    }

    /// Commits (a failed commit is rolled back by the store).
    pub fn commit(mut self) -> Result<()> {
        self.open = false;
        self.store.commit()
    }
}

impl<'a> Deref for Txn<'a> {
    type Target = dyn Backend + 'a;
    fn deref(&self) -> &Self::Target {
        self.store
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if self.open {
            self.store.rollback();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::backends;
    use crate::error::Error;
    use crate::store::{self, StoreOptions, Synchronous};

    fn memory() -> Box<dyn Backend> {
        let options = StoreOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(1),
            server_timeout: Duration::from_secs(1),
            read_only: false,
            agent_id: None,
            max_connections: 1,
        };
        backends::open(Path::new(":memory:"), &options).unwrap()
    }

    fn stored_version(store: &dyn Backend) -> Option<u64> {
        let txn = Txn::read(store).unwrap();
        txn.read_stored(None).unwrap().map(|r| r.version)
    }

    /// Writes `{}` as version 1, the agent's first change.
    fn write_first(txn: &Txn<'_>) -> crate::error::Result<()> {
        let next = crate::value::snapshot::Snapshot::new(serde_json::json!({}));
        txn.write_change(
            &store::NewChange {
                prev_logged: false,
                first: true,
                version: 1,
                at_ms: 0,
                writer: 1,
                patch: None,
                schema: 0,
                migrated_from: None,
                prev: None,
                next: &next,
            },
            None,
        )
    }

    #[test]
    fn a_dropped_write_is_rolled_back_and_a_committed_one_stays() {
        let store = memory();
        {
            let txn = Txn::write(&*store).unwrap();
            write_first(&txn).unwrap();
        }
        assert_eq!(stored_version(&*store), None);
        let txn = Txn::write(&*store).unwrap();
        write_first(&txn).unwrap();
        txn.commit().unwrap();
        assert_eq!(stored_version(&*store), Some(1));
    }

    #[test]
    fn an_error_inside_a_write_rolls_it_back() {
        let store = memory();
        let attempt = || -> crate::error::Result<()> {
            let txn = Txn::write(&*store)?;
            write_first(&txn)?;
            Err(Error::Conflict {
                expected: 1,
                actual: 2,
                message: "stop".into(),
            })?;
            txn.commit()
        };
        assert!(matches!(attempt(), Err(Error::Conflict { .. })));
        assert_eq!(stored_version(&*store), None);
        // The connection is usable again: no transaction was left open.
        let txn = Txn::write(&*store).unwrap();
        txn.commit().unwrap();
    }
}
