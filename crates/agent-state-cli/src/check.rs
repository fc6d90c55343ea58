//! `check`: is this a sound agent store? Everything read-only; a JSON report on stdout.
//!
//! 1. `integrity`: SQLite's `PRAGMA integrity_check`. The library has no call for it, so this
//!    one check opens the file itself, read-only, with rusqlite (already the library's SQLite
//!    binding, same bundled SQLite); everything else goes through the library's public API.
//!    A PostgreSQL server has no such file check: the report says it was skipped.
//! 2. `schema`: the library opens it read-only, which refuses a file that is not an agent
//!    store or comes from a newer release.
//! 3. `state`: the stored state decodes (`get_state`).
//! 4. `change_log`: with the log on, every retained logged state decodes (`state_at`).

use std::path::Path;

use agent_state::{Agent, Error};
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

use crate::args::Global;
use crate::changelog;
use crate::failure::{Failure, Status};
use crate::open::{is_server, open, shown, Access};
use crate::output::Output;

/// How long the integrity check waits for a writer's lock (as the library's default).
const BUSY_TIMEOUT_MS: u64 = 5000;

/// The first failure seen, which sets the exit code.
struct Verdict(Option<(Status, String)>);

impl Verdict {
    fn fail(&mut self, status: Status, what: &str, message: &str) {
        self.0
            .get_or_insert_with(|| (status, format!("check failed: {what}: {message}")));
    }
}

pub fn check(store: &Path, global: &Global, out: Output) -> Result<(), Failure> {
    let mut verdict = Verdict(None);
    let integrity = integrity(store, global, &mut verdict);
    let (schema, state, change_log) = match open(store, global, Access::Read) {
        Err(failure) => {
            let message = match &failure {
                Failure::Failed { status, message } => {
                    verdict.fail(*status, "schema", message);
                    message.clone()
                }
                Failure::OutputClosed | Failure::Exit { .. } => String::new(),
            };
            let skipped = json!({ "ok": false, "error": "not checked: the store did not open" });
            (
                json!({ "ok": false, "error": message }),
                skipped.clone(),
                skipped,
            )
        }
        Ok(agent) => {
            let (state, version) = state(&agent, &mut verdict);
            let log = change_log(&agent, version, &mut verdict);
            (json!({ "ok": true }), state, log)
        }
    };
    let report = json!({
        "store": shown(store),
        "ok": verdict.0.is_none(),
        "integrity": integrity,
        "schema": schema,
        "state": state,
        "change_log": change_log,
    });
    out.document(&agent_state::value::json::to_vec(&report))?;
    match verdict.0 {
        None => Ok(()),
        Some((status, message)) => Err(Failure::new(status, message)),
    }
}

fn integrity(store: &Path, global: &Global, verdict: &mut Verdict) -> Value {
    if is_server(store) {
        // rusqlite would take the URI for a file name; the server checks its own pages.
        return json!({ "ok": true, "skipped": "a PostgreSQL server: no SQLite file to check" });
    }
    let rows = (|| -> rusqlite::Result<Vec<String>> {
        // Read-only and without CREATE: a missing file is an error here too, never a new one.
        let conn = Connection::open_with_flags(
            store,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let ms = global.busy_timeout_ms.unwrap_or(BUSY_TIMEOUT_MS);
        conn.busy_timeout(std::time::Duration::from_millis(ms))?;
        let mut statement = conn.prepare("PRAGMA integrity_check")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect()
    })();
    match rows {
        Ok(rows) if rows == ["ok"] => json!({ "ok": true }),
        Ok(problems) => {
            let first = problems.first().cloned().unwrap_or_default();
            verdict.fail(Status::STORAGE, "integrity", &first);
            json!({ "ok": false, "problems": problems })
        }
        Err(e) => {
            let message = format!("{}: {e}", store.display());
            let status = Status::of(&Error::from(e));
            verdict.fail(status, "integrity", &message);
            json!({ "ok": false, "error": message })
        }
    }
}

/// The state's report, and its version when it decoded.
fn state(agent: &Agent, verdict: &mut Verdict) -> (Value, Option<u64>) {
    match agent.get_state_versioned() {
        Ok(current) => (
            json!({ "ok": true, "version": current.version, "bytes": current.state.json().len() }),
            Some(current.version),
        ),
        Err(e) => {
            verdict.fail(Status::of(&e), "state", &e.to_string());
            (json!({ "ok": false, "error": e.to_string() }), None)
        }
    }
}

fn change_log(agent: &Agent, version: Option<u64>, verdict: &mut Verdict) -> Value {
    let Some(version) = version else {
        return json!({ "ok": false, "error": "not checked: the state did not decode" });
    };
    match changelog::enabled(agent, version) {
        Ok(false) => return json!({ "ok": true, "enabled": false }),
        Ok(true) => {}
        Err(failure) => return failed(verdict, failure),
    }
    // Newest first, down to the oldest retained: retention drops only the oldest changes, so
    // the first gap ends the retained range. The current version was checked as the state.
    let mut checked = 0u64;
    let mut oldest = version;
    let mut errors = Vec::new();
    for v in (1..version).rev() {
        match agent.state_at(v) {
            Ok(_) => checked += 1,
            Err(Error::Gap { .. }) => break,
            Err(e) => {
                verdict.fail(
                    Status::of(&e),
                    &format!("change_log version {v}"),
                    &e.to_string(),
                );
                errors.push(json!({ "version": v, "error": e.to_string() }));
            }
        }
        oldest = v;
    }
    json!({
        "ok": errors.is_empty(),
        "enabled": true,
        "oldest_retained": if version == 0 { Value::Null } else { oldest.into() },
        "checked": checked + u64::from(version > 0),
        "errors": errors,
    })
}

fn failed(verdict: &mut Verdict, failure: Failure) -> Value {
    match failure {
        Failure::Failed { status, message } => {
            verdict.fail(status, "change_log", &message);
            json!({ "ok": false, "error": message })
        }
        Failure::OutputClosed | Failure::Exit { .. } => json!({ "ok": false }),
    }
}
