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
