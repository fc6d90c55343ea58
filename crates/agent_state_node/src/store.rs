//! A store's agents, without a handle: list, delete, expire (the core's `agents` module), each
//! on a pool thread.

use std::path::PathBuf;
use std::time::Duration;

use agent_state::{AgentQuery, OpenOptions};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::cancel::{token, CancelToken};
use crate::error::{invalid, IntoNapi};
use crate::task::spawn;

fn options(text: &str) -> Result<OpenOptions> {
    OpenOptions::from_json(text.as_bytes()).into_napi()
}

/// A count or a version from JavaScript: a safe integer of at least 0.
pub(crate) fn count(what: &str, value: f64) -> Result<usize> {
    if value >= 0.0 && value.fract() == 0.0 && value <= 9_007_199_254_740_991.0 {
        Ok(value as usize)
    } else {
        Err(invalid(format!(
            "{what} must be a whole number of at least 0, got {value}"
        )))
    }
}

fn json(entries: &[agent_state::AgentInfo]) -> String {
    String::from_utf8_lossy(&agent_state::agents::entries_json(entries)).into_owned()
}

/// One page of the store's agents, as a JSON array of `{"agent_id", "version", "updated_at_ms"}`.
#[napi]
pub fn list_agents<'env>(
    env: &'env Env,
    path: String,
    options_json: String,
    prefix: Option<String>,
    after: Option<String>,
    limit: f64,
    cancel: Option<&CancelToken>,
) -> Result<PromiseRaw<'env, String>> {
    let limit = count("limit", limit)?;
    spawn(env, token(cancel), move || {
        let query = AgentQuery {
            prefix,
            after,
            limit,
        };
        let entries =
            agent_state::list_agents(&PathBuf::from(path), &options(&options_json)?, &query)
                .into_napi()?;
        Ok(json(&entries))
    })
}

/// Deletes one agent's state (and change log); resolves to the version it had, or `null` when
/// nothing was stored. With `if_version`, only at that version (else a conflict).
#[napi]
pub fn delete_agent<'env>(
    env: &'env Env,
    path: String,
    options_json: String,
    id: String,
    if_version: Option<f64>,
    cancel: Option<&CancelToken>,
) -> Result<PromiseRaw<'env, Option<f64>>> {
    let if_version = if_version.map(|v| count("ifVersion", v)).transpose()?;
    spawn(env, token(cancel), move || {
        let deleted = agent_state::delete_agent(
            &PathBuf::from(path),
            &options(&options_json)?,
            &id,
            if_version.map(|v| v as u64),
        )
        .into_napi()?;
        Ok(deleted.map(|v| v as f64))
    })
}

/// Deletes (or with `dry_run` lists) up to `limit` agents not written for `idle_ms`.
#[napi]
pub fn expire_agents<'env>(
    env: &'env Env,
    path: String,
    options_json: String,
    idle_ms: f64,
    limit: f64,
    dry_run: bool,
    cancel: Option<&CancelToken>,
) -> Result<PromiseRaw<'env, String>> {
    let idle = count("idleMs", idle_ms)?;
    let limit = count("limit", limit)?;
    spawn(env, token(cancel), move || {
        let entries = agent_state::expire_agents(
            &PathBuf::from(path),
            &options(&options_json)?,
            Duration::from_millis(idle as u64),
            limit,
            dry_run,
        )
        .into_napi()?;
        Ok(json(&entries))
    })
}
