//! The read cache: what a handle last saw committed, and the cheap test that it still is.

use std::sync::Arc;

use crate::error::Result;
use crate::store::{Backend, Head, LogRetention, Mark, Txn};
use crate::value::snapshot::Snapshot;

/// The stored state as last confirmed by one handle.
#[derive(Clone)]
pub(super) struct Cache {
    /// The store's data version when the cache was last confirmed (plus one after our own
    /// commit, which moves it by exactly one).
    data_version: Option<u32>,
    /// The commit mark seen just before a version was last confirmed; while the mark is
    /// unchanged, no connection has committed and the cache is current.
    mark: Option<Mark>,
    /// `None`: nothing stored.
    stored: Option<Arc<Snapshot>>,
    /// The stored state's version (0: nothing stored).
    version: u64,
    /// The schema version the stored state was written under.
    schema: u32,
    /// The change log's retention; `None` when the log is off.
    log: Option<LogRetention>,
    /// The stored state's stamp ([`Head::stamp`]).
    stamp: u64,
    /// This handle committed `version` with the log on (so the log holds it), and that was
    /// the store's last commit when the cache was last confirmed by the mark or data version.
    own_logged: bool,
}

/// What is committed right now, as seen by one handle.
pub(super) struct Current {
    pub stored: Option<Arc<Snapshot>>,
    pub version: u64,
    /// The schema version `stored` was written under (0 when nothing is stored).
    pub schema: u32,
    pub log: Option<LogRetention>,
    /// The log holds the change that made `version`: this handle logged it, and nothing was
    /// committed to the store since (false when unknown).
    pub logged: bool,
}

/// Where a check of the cache runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Context {
    /// Outside any transaction.
    Autocommit,
    /// Inside this connection's write transaction: no other connection can commit, so the
    /// live commit mark describes exactly what the transaction sees.
    WriteTransaction,
    /// Inside this connection's read transaction (which has already read, see
    /// [`Txn::snapshot`]): others may commit meanwhile, so the live mark may be newer than what
    /// the transaction sees, and must not be recorded.
    ReadTransaction,
}

impl Cache {
    /// What [`Freshness::head`](crate::store::Freshness::head) reads while the cache is current.
    fn head(&self) -> Head {
        Head {
            version: self.version,
            log: self.log,
            stamp: self.stamp,
        }
    }

    /// The commit mark recorded when the cache was last confirmed: read before that
    /// confirmation, so while the live mark equals it, the cache is current.
    pub fn mark(&self) -> Option<Mark> {
        self.mark
    }

    fn current(&self) -> Current {
        Current {
            stored: self.stored.clone(),
            version: self.version,
            schema: self.schema,
            log: self.log,
            logged: self.own_logged,
        }
    }

    /// Records this handle's own commit of `stored` at `version`. The commit mark changed too;
    /// it is recorded again on the next check (recording it now could hide a commit that
    /// another process makes right after ours).
    pub fn committed(
        &mut self,
        stored: Arc<Snapshot>,
        version: u64,
        schema: u32,
        log: Option<LogRetention>,
        stamp: u64,
    ) {
        self.stored = Some(stored);
        self.version = version;
        self.schema = schema;
        self.log = log;
        self.stamp = stamp;
        self.own_logged = log.is_some();
        self.data_version = self.data_version.map(|v| v.wrapping_add(1));
        self.mark = None;
    }
}

/// What is committed now, from `cache` when no connection has committed since it was filled.
///
/// Three tests, cheapest first: the commit mark is unchanged (no commit anywhere, a few loads);
/// else the data version is unchanged (a function call, current inside a transaction; outside
/// one, [`Freshness::refresh`](crate::store::Freshness::refresh) runs first to bring it up to
/// date); else the agent's version and log setting are unchanged
/// ([`Freshness::head`](crate::store::Freshness::head), one small read or round trip); else the
/// entries are read and decoded again (in one read transaction). Inside an optimistic write,
/// the cache is used as it is (the commit checks the version).
pub(super) fn current(
    store: &dyn Backend,
    cache: &mut Option<Cache>,
    context: Context,
) -> Result<Current> {
    // An optimistic write checks the version at commit: the cache is as good as a read.
    if context == Context::WriteTransaction && store.optimistic() {
        if let Some(cache) = cache.as_ref() {
            // Unconfirmed: others may have committed since.
            return Ok(Current {
                logged: false,
                ..cache.current()
            });
        }
    }
    // Read the mark *before* the version: a commit landing in between then shows up as a mark
    // change next time, never as a missed update.
    let mark = store.commit_mark();
    if let Some(cache) = cache.as_ref() {
        if mark.is_some() && cache.mark == mark {
            return Ok(cache.current());
        }
    }
    if context == Context::Autocommit {
        store.refresh()?;
    }
    // A mark read before the transaction's snapshot (autocommit: the snapshot is taken after
    // it) or while no one else can commit (write transaction) may be recorded with what the
    // snapshot shows; one read during a read transaction may be newer than it.
    let mark = match context {
        Context::ReadTransaction => None,
        Context::Autocommit | Context::WriteTransaction => mark,
    };
    let version = store.data_version();
    if let Some(cache) = cache.as_mut() {
        if version.is_some() && cache.data_version == version {
            cache.mark = mark;
            return Ok(cache.current());
        }
        // Something was committed (or the backend cannot tell): to this agent? Its version
        // and log setting say, without transferring the state (other agents of the store, or
        // another handle's write of nothing new, leave them unchanged). Read after the data
        // version, so a commit in between shows up next time.
        if store.head()? == Some(cache.head()) {
            cache.mark = mark;
            cache.data_version = version;
            // Another handle committed meanwhile (to another agent, or the log setting off
            // and on again): whether the log still holds our change is no longer known.
            cache.own_logged = false;
            return Ok(cache.current());
        }
    }
    let fresh = match context {
        Context::WriteTransaction | Context::ReadTransaction => reread(store, mark, cache)?,
        Context::Autocommit => {
            let txn = Txn::read(store)?;
            reread(&*txn, mark, cache)?
        }
    };
    let current = fresh.current();
    *cache = Some(fresh);
    Ok(current)
}

/// True when the store still holds what `cache` says (its version and log setting, by
/// [`Freshness::head`](crate::store::Freshness::head)): what was computed from the cache was
/// computed from the latest state.
pub(super) fn confirmed(store: &dyn Backend, cache: &Option<Cache>) -> Result<bool> {
    let Some(cache) = cache else {
        return Ok(false);
    };
    Ok(store.head()? == Some(cache.head()))
}

/// Reads the state, its version and the log's retention (inside a transaction). A cache that
/// is behind (`old`) catches up by the patches committed after it, when the store still has
/// them all, instead of reading the whole state.
fn reread(store: &dyn Backend, mark: Option<Mark>, old: &Option<Cache>) -> Result<Cache> {
    let have = old
        .as_ref()
        .and_then(|c| c.stored.as_ref().map(|s| (c.version, s)));
    let (stored, version, schema) = match store.read_stored(have.map(|h| h.0))? {
        None => (None, 0, 0),
        Some(read) => {
            let (version, schema) = (read.version, read.schema);
            let state = crate::replay::stored_state(read, have.map(|h| h.1))?;
            (Some(state), version, schema)
        }
    };
    let log = store.log_retention()?;
    Ok(Cache {
        data_version: store.data_version(),
        mark,
        stored,
        version,
        schema,
        log,
        stamp: store.stamp(),
        own_logged: false,
    })
}
