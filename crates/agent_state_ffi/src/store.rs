//! A store's agents as a whole: `agent_store_list`, `agent_store_delete`,
//! `agent_store_expire`. Each opens a connection of its own to the store (no handle).

use std::ffi::{c_char, c_int};
use std::time::Duration;

use agent_state::agents::{self, AgentQuery};
use agent_state::Error;

use super::args::{open_args, optional_text, BufferOut, NumberOut};
use super::boundary;
use super::buffer::AgentBuffer;
use super::status::AgentStatus;

/// Lists the agents with a state stored in the store at `path` (a SQLite file or a
/// PostgreSQL URI, as for `agent_open`), ordered by id (byte order of the UTF-8), as one JSON
/// array in `*out`: `[{"id":"...","version":N,"bytes":N,"written_at":MS},...]` (`bytes`: the
/// stored state's size; `written_at`: its last write, milliseconds since the Unix epoch, by the
/// writer's clock). At most `limit` (1 to 10000) entries, those with an id after `after` (NULL:
/// from the first) that start with `prefix` (NULL: any). For the next page pass the last id as
/// `after`; a page costs what it holds, whatever the store holds. A SQLite file's single agent
/// (opened without `agent_id`) is listed with the id `""`. Agents opened but never written, and
/// deleted ones, are not listed.
///
/// `options_json`: NULL, or the options of `agent_open` (`busy_timeout_ms`,
/// `server_timeout_ms`, `max_connections`, `read_only` and the connection's are used; the
/// agent's own, such as `agent_id`, are not). The store must exist: listing never creates one.
/// Ownership: the strings are only read during the call; release `*out` with
/// `agent_buffer_free`.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL or empty `path`, NULL `out`, `limit` out of range,
/// `prefix` or `after` longer than 255 bytes or not UTF-8, bad option), `AGENT_ERR_JSON`,
/// `AGENT_ERR_STORAGE` (no store there, a store of an older schema opened `read_only`),
/// `AGENT_ERR_BUSY`, `AGENT_ERR_UNAVAILABLE`, `AGENT_ERR_AUTH`, `AGENT_ERR_CANCELLED` (see
/// `agent_cancel_bind`).
/// Thread-safety: any thread, also while handles to the store are in use.
#[no_mangle]
pub unsafe extern "C" fn agent_store_list(
    path: *const c_char,
    options_json: *const c_char,
    prefix: *const c_char,
    after: *const c_char,
    limit: u32,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_store_list", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        // SAFETY: NULL or NUL-terminated strings, per the caller.
        let (path, options) = unsafe { open_args(path, options_json) }?;
        let query = AgentQuery {
            // SAFETY: NULL or NUL-terminated, per the caller.
            prefix: unsafe { optional_text(prefix, "prefix") }?,
            // SAFETY: NULL or NUL-terminated, per the caller.
            after: unsafe { optional_text(after, "after") }?,
            limit: limit as usize,
        };
        let mut json = agents::entries_json(&agents::list_agents(&path, &options, &query)?);
        json.push(0);
        out.bytes_with_nul(json);
        Ok(())
    })
}

/// Deletes the agent `agent_id` of the store at `path`: its state, its versions and its change
/// log, in one transaction (its change-log setting stays). `*out_deleted_version` (may be NULL)
/// receives the version it had, or 0 when nothing was stored (nothing done: not an error).
/// `if_version`: -1 for any version, else delete only if the state is still at that version
/// (0: nothing stored), `AGENT_ERR_CONFLICT` otherwise, nothing deleted.
///
/// Handles open to the agent, in this process or another, find it gone at their next call:
/// a read returns their initial state at version 0; with the change log on, their hooks get
/// the deletion as one change (by `agent_poll`, or ahead of their next write) from the last
/// state they saw to their initial state, `patch` NULL, `version` 0. The agent's next first
/// write takes the version after the one it was deleted at (a tombstone keeps a 64-bit hash
/// of the id, not the id, and that version), so a compare-and-set against a version read
/// before the deletion never succeeds after it.
///
/// Erasure: on SQLite, once the call returns `AGENT_OK`, no byte of the deleted state or of its
/// history is left in the database file or its WAL (freed pages are zeroed, `secure_delete`,
/// and the WAL is emptied into the file). If another connection's read outlasts
/// `busy_timeout_ms` meanwhile, the call returns `AGENT_ERR_BUSY` after the deletion committed:
/// call it again to finish the erasure. On PostgreSQL the rows are deleted; what VACUUM, WAL
/// archives and backups keep is the server's (the book's `docs/src/guides/erasure-retention.md`).
/// `agent_id` `""` is a SQLite file's single agent. `options_json` as for `agent_store_list`.
/// Errors: `AGENT_ERR_INVALID_ARGUMENT` (NULL or empty `path`, NULL `agent_id`, an id longer
/// than 255 bytes or not UTF-8, `if_version` below -1, bad option), `AGENT_ERR_JSON`,
/// `AGENT_ERR_CONFLICT`, `AGENT_ERR_STORAGE` (no store there, opened `read_only`),
/// `AGENT_ERR_BUSY`, `AGENT_ERR_UNAVAILABLE`, `AGENT_ERR_AUTH`, `AGENT_ERR_CANCELLED`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_store_delete(
    path: *const c_char,
    options_json: *const c_char,
    agent_id: *const c_char,
    if_version: i64,
    out_deleted_version: *mut u64,
) -> AgentStatus {
    boundary::run("agent_store_delete", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { NumberOut::new(out_deleted_version) };
        // SAFETY: NULL or NUL-terminated strings, per the caller.
        let (path, options) = unsafe { open_args(path, options_json) }?;
        // SAFETY: NULL or NUL-terminated, per the caller.
        let id = unsafe { optional_text(agent_id, "agent_id") }?
            .ok_or_else(|| Error::InvalidArgument("agent_id is NULL".into()))?;
        let if_version = match if_version {
            -1 => None,
            v if v >= 0 => Some(v as u64),
            v => {
                return Err(Error::InvalidArgument(format!(
                    "if_version must be -1 (any) or a version, got {v}"
                )))
            }
        };
        let deleted = agents::delete_agent(&path, &options, &id, if_version)?;
        out.set(deleted.unwrap_or(0));
        Ok(())
    })
}

/// Deletes, as `agent_store_delete` does, at most `limit` (1 to 10000) agents of the store at
/// `path` whose state was last written more than `idle_ms` milliseconds ago, the longest idle
/// first, in one transaction, and lists them in `*out` (the JSON array of `agent_store_list`);
/// with `dry_run` non-zero, deletes nothing and lists those it would delete. An agent written
/// during the call is not deleted. A call costs what it deletes, whatever the store holds: run
/// it until it lists fewer than `limit` (a cron job, a timer).
/// `options_json` as for `agent_store_list`. Ownership: release `*out` with
/// `agent_buffer_free`.
/// Errors: as `agent_store_delete` (but `AGENT_ERR_CONFLICT`), and `AGENT_ERR_INVALID_ARGUMENT`
/// for NULL `out` or `limit` out of range.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn agent_store_expire(
    path: *const c_char,
    options_json: *const c_char,
    idle_ms: u64,
    limit: u32,
    dry_run: c_int,
    out: *mut AgentBuffer,
) -> AgentStatus {
    boundary::run("agent_store_expire", || {
        // SAFETY: NULL or writable, per the caller.
        let out = unsafe { BufferOut::new(out) };
        out.required()?;
        // SAFETY: NULL or NUL-terminated strings, per the caller.
        let (path, options) = unsafe { open_args(path, options_json) }?;
        let expired = agents::expire_agents(
            &path,
            &options,
            Duration::from_millis(idle_ms),
            limit as usize,
            dry_run != 0,
        )?;
        let mut json = agents::entries_json(&expired);
        json.push(0);
        out.bytes_with_nul(json);
        Ok(())
    })
}
