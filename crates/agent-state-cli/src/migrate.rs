//! `migrate`: upgrade every agent of a store to a schema version, with declarative steps.
//!
//! The library does the migrating: an agent opened with `schema_version: N` and the steps
//! (`schema_steps`) upgrades an older state on its first read, once, in its own transaction, and
//! refuses a newer one (AGENT_ERR_NEWER_SCHEMA). So the command lists the store's agents by id,
//! a batch at a time (`list_agents` with `after`), opens each and reads it; a hook on the handle
//! tells a migration (a change of kind `Migration`) from a state that was already current.
//!
//! Resuming is rescanning: no checkpoint is kept, since an agent already at N costs a read and
//! nothing is written for it, and a checkpoint would skip agents an older program wrote (at an
//! older version) below it after the interruption. SIGINT and SIGTERM set a flag that is looked
//! at between agents: the agent being migrated is finished (its migration is one transaction
//! either way), then the summary is printed and the command exits 130 or 143.
//!
//! `--dry-run` opens read-only (the library then reads every state as stored) and upgrades each
//! state in memory with `Agent::upgrade_state`, writing nothing.

use std::io::{self, IsTerminal};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_state::agents::{self, AgentQuery, MAX_LIST_LIMIT};
use agent_state::{Agent, ChangeKind, Error, OpenOptions, StateChange, StateChangedHook};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Map, Value};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::args::Global;
use crate::failure::{Failure, Status};
use crate::open::{connection_options, from_map, is_server, schema_options, Access};
use crate::output::Output;

/// The most failures the summary lists (the counts cover them all).
const FAILURES_SHOWN: usize = 10;
/// Without a terminal, a progress line after each batch, and at least this often.
const LINE_EVERY: Duration = Duration::from_secs(2);

/// What `migrate` was asked to do.
#[derive(Debug, Clone)]
pub struct Migration {
    /// The schema version to upgrade to.
    pub to: u64,
    /// Write nothing.
    pub dry_run: bool,
    /// How many ids one listing reads.
    pub batch: u64,
    /// Start after this id.
    pub after: Option<String>,
    /// Only ids starting with this.
    pub prefix: Option<String>,
    /// With `dry_run`: how many changes the summary shows.
    pub sample: u64,
}

/// What happened to one agent.
enum Outcome {
    Migrated,
    Current,
    Failed(Error),
}

/// Notes whether the handle's own read committed a migration (its hooks see it).
#[derive(Default)]
struct Migrated(AtomicU32);

impl StateChangedHook for Migrated {
    fn on_state_changed(&self, change: &StateChange) -> Result<(), String> {
        if let ChangeKind::Migration { from } = change.kind {
            // Stored as from + 1 so that 0 means "no migration".
            self.0.store(from.saturating_add(1), Ordering::SeqCst);
        }
        Ok(())
    }
}

/// The counts, the first failures and the dry run's sample.
#[derive(Default)]
struct Tally {
    migrated: u64,
    current: u64,
    failed: u64,
    failures: Vec<Value>,
    first_failure: Option<(Status, String, String)>,
    sample: Vec<Value>,
    last: Option<String>,
}

impl Tally {
    fn done(&self) -> u64 {
        self.migrated + self.current + self.failed
    }
}

/// The signals that stop the run between two agents.
struct Stop {
    int: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
}

impl Stop {
    fn register() -> Result<Stop, Failure> {
        let stop = Stop {
            int: Arc::new(AtomicBool::new(false)),
            term: Arc::new(AtomicBool::new(false)),
        };
        for (signal, flag, code) in [(SIGINT, &stop.int, 130), (SIGTERM, &stop.term, 143)] {
            // The first signal sets the flag; a second one, while it is set, exits at once
            // (the migration under way is one transaction: the store loses nothing).
            signal_hook::flag::register_conditional_shutdown(signal, code, Arc::clone(flag))
                .and_then(|_| signal_hook::flag::register(signal, Arc::clone(flag)))
                .map_err(|e| {
                    Failure::new(
                        Status::STORAGE,
                        format!("cannot handle signal {signal}: {e}"),
                    )
                })?;
        }
        Ok(stop)
    }

    /// The signal received, with its exit code.
    fn received(&self) -> Option<(&'static str, u8)> {
        if self.int.load(Ordering::SeqCst) {
            Some(("SIGINT", 130))
        } else if self.term.load(Ordering::SeqCst) {
            Some(("SIGTERM", 143))
        } else {
            None
        }
    }
}

/// Progress on stderr: a bar on a terminal, else a plain line after each batch (and at least
/// every [`LINE_EVERY`]).
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
    total: u64,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("migrate [{bar:20}] {pos}/{len}, {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            started: now,
            last_line: now,
            total,
        }
    }

    /// After each agent; `batch_end` after the last agent of a batch.
    fn update(&mut self, tally: &Tally, batch_end: bool) {
        let done = tally.done();
        // Agents written during the run may make more than were counted at the start.
        self.total = self.total.max(done);
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / seconds;
        if let Some(bar) = &self.bar {
            bar.set_length(self.total);
            bar.set_message(format!(
                "{} migrated, {} current, {} failed, {rate:.0}/s",
                tally.migrated, tally.current, tally.failed
            ));
            bar.set_position(done);
            return;
        }
        if batch_end || self.last_line.elapsed() >= LINE_EVERY {
            self.last_line = Instant::now();
            eprintln!(
                "agent-state migrate: {done}/{} agents ({} migrated, {} current, {} failed), \
                 {:.0}/s",
                self.total, tally.migrated, tally.current, tally.failed, rate
            );
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

pub fn migrate(store: &Path, global: &Global, out: Output, m: &Migration) -> Result<(), Failure> {
    if global.steps.is_none() {
        return Err(Failure::invalid(
            "migrate needs --steps FILE: the steps that upgrade a state from each version to \
             the next (a JSON array of {\"from\": K, \"ops\": [...]})",
        ));
    }
    if global.schema_version.is_some() {
        return Err(Failure::invalid(
            "migrate takes the schema version to upgrade to as --to N, not --schema-version",
        ));
    }
    if global.change_log.is_some() || global.store_max_value_bytes.is_some() {
        return Err(Failure::invalid(
            "--change-log and --store-max-value-bytes change settings; `migrate` only upgrades \
             states (set them with a command that writes a state)",
        ));
    }
    if global.read_only && !m.dry_run {
        return Err(Failure::invalid(
            "--read-only: a read-only handle reads every state as stored and migrates nothing; \
             use --dry-run to see what would be migrated",
        ));
    }
    if let (Some(id), true) = (&global.agent, m.after.is_some() || m.prefix.is_some()) {
        return Err(Failure::invalid(format!(
            "--agent {id:?} migrates that one agent; --after and --prefix select agents of the \
             whole store"
        )));
    }
    let access = if m.dry_run {
        Access::Read
    } else {
        Access::Write
    };
    // The agents' options, checked once before anything is listed: a bad steps file or
    // version fails here (AGENT_ERR_INVALID_ARGUMENT), not once per agent.
    let mut agent_map = connection_options(global, access);
    if let Some(bytes) = global.max_value_bytes {
        agent_map.insert("max_value_bytes".into(), bytes.into());
    }
    schema_options(&mut agent_map, global, Some(m.to))?;
    from_map(agent_map.clone())?;
    let server = is_server(store);
    let list_options = from_map(connection_options(global, Access::Read))?;

    let stop = Stop::register()?;
    let batch = usize::try_from(m.batch)
        .unwrap_or(MAX_LIST_LIMIT)
        .clamp(1, MAX_LIST_LIMIT);
    let total = match &global.agent {
        Some(_) => 1,
        None => count(store, &list_options, m)?,
    };
    let mut progress = Progress::new(total);
    let mut tally = Tally::default();
    let mut query = AgentQuery {
        prefix: m.prefix.clone(),
        after: m.after.clone(),
        limit: batch,
    };
    let mut interrupted = None;
    'batches: loop {
        let ids: Vec<String> = match &global.agent {
            Some(id) if tally.done() == 0 => vec![id.clone()],
            Some(_) => vec![],
            None => agents::list_agents(store, &list_options, &query)
                .map_err(|e| Failure::context("listing the store's agents", e))?
                .into_iter()
                .map(|info| info.id)
                .collect(),
        };
        for (i, id) in ids.iter().enumerate() {
            let outcome = one(store, &agent_map, server, id, m, &mut tally)?;
            match outcome {
                Outcome::Migrated => tally.migrated += 1,
                Outcome::Current => tally.current += 1,
                Outcome::Failed(e) => {
                    tally.failed += 1;
                    let status = Status::of(&e);
                    if tally.failures.len() < FAILURES_SHOWN {
                        tally.failures.push(json!({
                            "id": id,
                            "status": status.name(),
                            "message": e.to_string(),
                        }));
                    }
                    if tally.first_failure.is_none() {
                        tally.first_failure = Some((status, id.clone(), e.to_string()));
                    }
                }
            }
            tally.last = Some(id.clone());
            progress.update(&tally, i + 1 == ids.len());
            if let Some(signal) = stop.received() {
                interrupted = Some(signal);
                break 'batches;
            }
        }
        match ids.last() {
            Some(last) if ids.len() == batch && global.agent.is_none() => {
                query.after = Some(last.clone())
            }
            _ => break,
        }
    }
    progress.finish();

    let mut summary = Map::new();
    summary.insert("to".into(), m.to.into());
    summary.insert("dry_run".into(), m.dry_run.into());
    summary.insert("migrated".into(), tally.migrated.into());
    summary.insert("current".into(), tally.current.into());
    summary.insert("failed".into(), tally.failed.into());
    summary.insert("failures".into(), Value::Array(tally.failures.clone()));
    summary.insert(
        "interrupted".into(),
        interrupted.map_or(Value::Null, |(name, _)| name.into()),
    );
    summary.insert(
        "last".into(),
        tally.last.clone().map_or(Value::Null, Value::from),
    );
    if m.dry_run {
        summary.insert("sample".into(), Value::Array(tally.sample.clone()));
    }
    out.document(&agent_state::value::json::to_vec(&Value::Object(summary)))?;

    if let Some((name, code)) = interrupted {
        let last = tally.last.as_deref().unwrap_or("");
        return Err(Failure::Exit {
            code,
            message: format!(
                "agent-state: migrate: interrupted by {name} after {} agents (the last: {last:?}); \
                 run the same command again to go on (agents already at {} are counted as \
                 current, not written), or add --after {last:?} to skip those done",
                tally.done(),
                m.to
            ),
        });
    }
    let done = tally.done();
    match tally.first_failure {
        None => Ok(()),
        Some((status, id, message)) => Err(Failure::new(
            status,
            format!(
                "migrate: {} of {} agents failed (left as they were); the first, {id:?}: \
                 {message}",
                tally.failed, done
            ),
        )),
    }
}

/// How many agents there are after `after` (with the prefix) (one listing pass over the ids).
fn count(store: &Path, options: &OpenOptions, m: &Migration) -> Result<u64, Failure> {
    let mut query = AgentQuery {
        prefix: m.prefix.clone(),
        after: m.after.clone(),
        limit: MAX_LIST_LIMIT,
    };
    let mut total = 0u64;
    loop {
        let page = agents::list_agents(store, options, &query)
            .map_err(|e| Failure::context("listing the store's agents", e))?;
        total += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == MAX_LIST_LIMIT => query.after = Some(last.id.clone()),
            _ => return Ok(total),
        }
    }
}

/// Opens agent `id` and reads it (a dry run: upgrades it in memory). An error of the agent
/// (its state, its steps) is its outcome; only a bug in building the options fails the run.
fn one(
    store: &Path,
    base: &Map<String, Value>,
    server: bool,
    id: &str,
    m: &Migration,
    tally: &mut Tally,
) -> Result<Outcome, Failure> {
    let mut map = base.clone();
    // "" is a SQLite file's single agent, opened without an agent_id.
    if !id.is_empty() || server {
        map.insert("agent_id".into(), id.into());
    }
    let options = from_map(map)?;
    let agent = match Agent::open_with(store, &options) {
        Ok(agent) => agent,
        Err(e) => return Ok(Outcome::Failed(e)),
    };
    let outcome = if m.dry_run {
        dry(&agent, id, m, tally)
    } else {
        wet(&agent)
    };
    let _ = agent.close();
    Ok(outcome)
}

/// Reads the agent through a handle of version N: the library migrates an older state.
fn wet(agent: &Agent) -> Outcome {
    let seen = Arc::new(Migrated::default());
    if let Err(e) = agent.on_state_changed(Arc::clone(&seen) as Arc<dyn StateChangedHook>) {
        return Outcome::Failed(e);
    }
    match agent.get_state_versioned() {
        Ok(_) if seen.0.load(Ordering::SeqCst) != 0 => Outcome::Migrated,
        Ok(_) => Outcome::Current,
        Err(e) => Outcome::Failed(e),
    }
}

/// A read-only handle reads the state as stored; it is upgraded in memory, nothing written.
fn dry(agent: &Agent, id: &str, m: &Migration, tally: &mut Tally) -> Outcome {
    let (_, state, schema) = match crate::state::stored(agent) {
        Ok(found) => found,
        Err(e) => return Outcome::Failed(e),
    };
    let after = match agent.upgrade_state(state.json(), schema) {
        Ok(after) => after,
        Err(e) => return Outcome::Failed(e),
    };
    if u64::from(schema) == m.to {
        return Outcome::Current;
    }
    if (tally.sample.len() as u64) < m.sample {
        let before = state.to_value();
        let after = after.to_value();
        tally.sample.push(json!({
            "id": id,
            "from": schema,
            "patch": merge_diff(&before, &after),
            "before": before,
            "after": after,
        }));
    }
    Outcome::Migrated
}

/// The RFC 7396 merge patch that turns `before` into `after` (members removed are null,
/// objects compared member by member, anything else replaced whole).
fn merge_diff(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut patch = Map::new();
            for (key, old) in b {
                match a.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) if new != old => {
                        patch.insert(key.clone(), merge_diff(old, new));
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in a {
                if !b.contains_key(key) {
                    patch.insert(key.clone(), new.clone());
                }
            }
            Value::Object(patch)
        }
        _ => after.clone(),
    }
}
