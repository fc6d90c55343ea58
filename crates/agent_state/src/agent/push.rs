//! Pushed changes: the store's watcher tells a handle that its agent changed, and the handle's
//! own `poll` delivers what other handles and processes committed to its hooks, so hooks see
//! every commit without the program calling `poll`.
//!
//! The watcher's callback only queues a poll on the worker pool (a slow hook never stalls the
//! store's watcher thread, which every watch of the store shares). Polls take turns on the
//! handle's lock and number their events for the hooks' turnstile, so deliveries stay in commit
//! order and each change is delivered once, whichever worker runs them; a poll with nothing new
//! delivers nothing (this handle's own commits wake it too, and find nothing to deliver).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::cache::{self, Context};
use super::{lock, Agent, Inner};
use crate::error::{Error, Result};
use crate::options::OpenOptions;
use crate::watch::{Selector, Watch, WatchOptions};

impl Agent {
    /// Pushes changes that other handles and processes commit to this handle's on_state_changed
    /// hooks, in commit order and once each (the guarantees of [`Agent::poll`], which the push
    /// runs), without the program calling `poll`: the store's watcher (one thread per store per
    /// process, see [`crate::watch`]) notices each commit of this agent and a worker thread of
    /// [`crate::work`] delivers it. What [`crate::options::OpenOptions::watch`] asks for.
    ///
    /// `location` and `options` must be those this handle was opened with (its connection
    /// options reach the store the same way). The watcher holds this handle weakly: dropping
    /// the last `Arc` or [`Agent::close`] stops the pushes. Calling it again while pushing does
    /// nothing. Thread-safe.
    ///
    /// Failures of a pushed poll have nobody to be reported to: changes pruned from the log
    /// before delivery ([`Error::Gap`]) are skipped as a poll skips them (the state is current);
    /// a poll that fails otherwise (the store unavailable for a moment) moves nothing, so the
    /// next commit's push (or the program's own `poll`) delivers those changes too; a hook's
    /// failure is the hook's, as in `poll`.
    ///
    /// Errors, nothing started: [`Error::InvalidArgument`] when the agent's change log is off
    /// (open it with option `change_log`); [`Error::Closed`]; those of [`Watch::with_callback`]
    /// (an in-memory store cannot be watched: [`Error::InvalidArgument`]).
    pub fn push_changes(self: &Arc<Self>, location: &Path, options: &OpenOptions) -> Result<()> {
        let mut pushed = lock(&self.pushed);
        if pushed.is_some() {
            return Ok(());
        }
        self.require_log()?;
        // A SQLite file's single agent (opened without agent_id) is the file's agent "".
        let id = options.agent_id.clone().unwrap_or_default();
        let weak = Arc::downgrade(self);
        let queued = Arc::new(AtomicBool::new(false));
        let callback = move |_: &crate::watch::WatchEvent| push(&weak, &queued);
        let watch = Watch::with_callback(
            location,
            options,
            Selector::Ids(vec![id]),
            WatchOptions::default(),
            Box::new(callback),
        )?;
        *pushed = Some(watch);
        Ok(())
    }

    /// Stops the pushes (from `close`).
    pub(super) fn stop_pushing(&self) {
        let watch = lock(&self.pushed).take();
        if let Some(watch) = watch {
            watch.close();
        }
    }

    /// [`Error::InvalidArgument`] unless the agent's change log is on: a push is a `poll`,
    /// which reads the log.
    fn require_log(&self) -> Result<()> {
        let mut guard = self.lock_inner()?;
        let Inner { store, view } = guard.as_mut().ok_or(Error::Closed)?;
        let current = cache::current(&**store, &mut view.cache, Context::Autocommit)?;
        if current.log.is_none() {
            return Err(Error::InvalidArgument(
                "option \"watch\" pushes changes from the change log, which is off for this \
                 agent: open it with the change_log option too"
                    .to_string(),
            ));
        }
        Ok(())
    }
}

/// The watcher's callback: queues one poll on the worker pool unless one is queued and has not
/// started (it will see this change too, since it reads the store after it starts).
fn push(agent: &Weak<Agent>, queued: &Arc<AtomicBool>) {
    if queued.swap(true, Ordering::AcqRel) {
        return;
    }
    let job_agent = Weak::clone(agent);
    let job_queued = Arc::clone(queued);
    let spawned = crate::work::spawn(None, move || {
        job_queued.store(false, Ordering::Release);
        if let Some(agent) = job_agent.upgrade() {
            // Nobody to report to (see push_changes): a gap was skipped, any other failure
            // moved nothing and the next push retries it.
            let _ = agent.poll();
        }
    });
    if spawned.is_err() {
        // No worker could start: the next change's push tries again and delivers this one too.
        queued.store(false, Ordering::Release);
    }
}
