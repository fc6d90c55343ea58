//! `NativeAgent`: one core handle, as the package's `Agent` holds it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_state::{Agent, Held, OpenOptions, Ticket};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::cancel::{token, CancelToken};
use crate::error::{guarded, invalid, IntoNapi};
use crate::hooks::{ChangeQueue, InitialSource, JsStep, JsValidator, JsWake, PendingChange};
use crate::task::spawn;

/// A state with its version, as a read returns it. `ticket` (0: none) names the read for
/// [`NativeAgent::is_current`]. `state` is `None` when the caller said it holds the state of
/// that version (`known`): the text, as large as the state, then need not cross into
/// JavaScript.
#[napi(object)]
pub struct Versioned {
    pub version: f64,
    pub state: Option<String>,
    pub ticket: u32,
}

/// The state's text unless the caller holds that version already (a stored one: version 0 is
/// the initial state, which a hook may answer differently each time).
fn unless_known(held: &Held, known: Option<u64>) -> Result<Option<String>> {
    if held.version() > 0 && known == Some(held.version()) {
        Ok(None)
    } else {
        text(held.state().json()).map(Some)
    }
}

/// What a write returns: the new version, and the state's JSON text unless the caller said it
/// holds the state the write started from (`known`: then the state is its own merge, and the
/// text, as large as the state, need not cross into JavaScript).
#[napi(object)]
pub struct Written {
    pub version: f64,
    pub state: Option<String>,
}

fn written(v: agent_state::Written, known: Option<u64>) -> Result<Written> {
    // Versions grow by one per commit: a commit at `known + 1` was the only one since the
    // caller's state, and a write that committed nothing at `known` left it as it was. A write
    // that committed nothing at another version found another handle's state, whose text the
    // caller needs.
    let derivable = known
        .is_some_and(|k| (v.committed && v.version == k + 1) || (!v.committed && v.version == k));
    Ok(Written {
        version: v.version as f64,
        state: if derivable {
            None
        } else {
            Some(text(v.state.json())?)
        },
    })
}

/// A state as stored at a version, with the schema version it was written under.
#[napi(object)]
pub struct StoredState {
    pub state: String,
    pub schema: u32,
}

/// The last read that can be validated later without waiting, and its number.
#[derive(Default)]
struct LastRead {
    number: u32,
    ticket: Option<Ticket>,
}

/// One open handle. Closed by `close()` or when JavaScript collects it (the core handle is
/// dropped then, which closes its store; a pool job still running keeps it until it ends).
#[napi]
pub struct NativeAgent {
    agent: Arc<Agent>,
    changes: Arc<ChangeQueue>,
    initial: Arc<InitialSource>,
    last_read: Arc<Mutex<LastRead>>,
    watching: bool,
}

fn text(bytes: &[u8]) -> Result<String> {
    // The core hands out compact JSON that it checked as UTF-8 on the way in.
    String::from_utf8(bytes.to_vec()).map_err(|_| invalid("the stored state is not UTF-8"))
}

/// A version from JavaScript: a safe integer, or a bigint for the versions past 2^53 that a
/// u64 can hold (compare-and-set with such a version is a conflict, never a refusal).
pub type VersionArg = Either<f64, BigInt>;

fn version_arg(what: &str, value: Option<VersionArg>) -> Result<Option<u64>> {
    match value {
        None => Ok(None),
        Some(Either::A(v)) if v >= 0.0 && v.fract() == 0.0 && v <= 9_007_199_254_740_991.0 => {
            Ok(Some(v as u64))
        }
        Some(Either::A(v)) => Err(invalid(format!(
            "{what} must be a whole number of at least 0, got {v}"
        ))),
        Some(Either::B(big)) => match big.get_u64() {
            (false, v, true) => Ok(Some(v)),
            _ => Err(invalid(format!(
                "{what} must be a whole number from 0 to 2^64 - 1"
            ))),
        },
    }
}

fn versioned(v: agent_state::Versioned) -> Result<Versioned> {
    Ok(Versioned {
        version: v.version as f64,
        state: Some(text(v.state.json())?),
        ticket: 0,
    })
}

/// Opens a handle on a pool thread: `path` is a file or a `postgres://` URI, `options` the core's
/// options as JSON (snake_case names, as in C), `initial` the initial state's JSON text.
#[napi]
pub fn open_agent<'env>(
    env: &'env Env,
    path: String,
    options: String,
    initial: String,
    cancel: Option<&CancelToken>,
) -> Result<PromiseRaw<'env, OpenedAgent>> {
    spawn(env, token(cancel), move || {
        let options = OpenOptions::from_json(options.as_bytes()).into_napi()?;
        let path = PathBuf::from(path);
        // Option "watch": the store's watcher pushes other handles' and processes' changes to
        // the hooks (the JavaScript ones register once this promise resolves).
        let agent = Agent::open_shared_with(&path, &options).into_napi()?;
        let initial = Arc::new(InitialSource::new(initial.into_bytes()));
        agent
            .set_initial_state_hook(Some(initial.clone()))
            .into_napi()?;
        Ok(OpenedAgent {
            agent: Some(agent),
            initial,
        })
    })
}

/// What `open_agent`'s job hands back; `NativeAgent::from_opened` takes it on the JavaScript
/// thread (a class instance cannot be made on a pool thread).
#[napi]
pub struct OpenedAgent {
    agent: Option<Arc<Agent>>,
    initial: Arc<InitialSource>,
}

#[napi]
impl NativeAgent {
    /// The handle an `open_agent` job opened (once; a second call is an error).
    #[napi(factory)]
    pub fn from_opened(opened: &mut OpenedAgent) -> Result<NativeAgent> {
        let agent = opened
            .agent
            .take()
            .ok_or_else(|| invalid("this opened handle was taken already"))?;
        Ok(NativeAgent {
            agent,
            changes: Arc::new(ChangeQueue::default()),
            initial: Arc::clone(&opened.initial),
            last_read: Arc::default(),
            watching: false,
        })
    }

    /// The initial state's JSON text for the writes that follow (used when nothing is stored).
    #[napi]
    pub fn set_initial(&self, initial: String) -> Result<()> {
        guarded("setInitial", || {
            self.initial.set(initial.into_bytes());
            Ok(())
        })
    }

    /// Starts queueing this handle's committed changes for `take_changes` (once is enough).
    #[napi]
    pub fn watch_changes(&mut self) -> Result<()> {
        guarded("watchChanges", || {
            if !self.watching {
                self.agent
                    .on_state_changed(self.changes.clone())
                    .into_napi()?;
                self.watching = true;
            }
            Ok(())
        })
    }

    /// Calls `wake` (on the JavaScript thread) when changes are queued while the package is not
    /// in a call that takes them: with the open option `watch`, the store's watcher delivers
    /// other handles' and processes' changes on its own thread.
    #[napi]
    pub fn wake_on_changes(&self, wake: JsWake) -> Result<()> {
        guarded("wakeOnChanges", || {
            self.changes.set_wake(wake);
            Ok(())
        })
    }

    /// The changes committed since the last call, oldest first (in commit order).
    #[napi]
    pub fn take_changes(&self) -> Result<Vec<PendingChange>> {
        guarded("takeChanges", || self.changes.take())
    }

    /// Sets (or, with `null`, removes) the validator: a JavaScript function called on the
    /// JavaScript thread with `(next, prev, patch, version)` as JSON texts, answering `""` to
    /// let the change commit or the reason to reject it.
    #[napi]
    pub fn set_validator(&self, validator: Option<JsValidator>) -> Result<()> {
        guarded("setValidator", || {
            let validator = validator.map(|f| Arc::new(crate::hooks::Validate::new(f)) as _);
            self.agent.set_validator(validator).into_napi()
        })
    }

    /// The schema version this handle declares (the open option `schema_version`).
    #[napi]
    pub fn schema_version(&self) -> u32 {
        self.agent.schema_version()
    }

    /// Sets (or, with `null`, removes) the schema step of code from version `from` to
    /// `from + 1`: a JavaScript function called on the JavaScript thread with
    /// `[state JSON text, from]` while the pool thread that migrates waits inside the write
    /// transaction, answering `{state}` (the upgraded JSON text) or `{error}`.
    #[napi]
    pub fn set_schema_step(&self, from: u32, step: Option<JsStep>) -> Result<()> {
        guarded("setSchemaStep", || {
            let step = step.map(|f| Arc::new(crate::hooks::Step::new(f)) as _);
            self.agent.set_schema_step(from, step).into_napi()
        })
    }

    /// The state at `version` as stored (not upgraded), with its schema version, on a pool
    /// thread.
    #[napi]
    pub fn state_at_stored<'env>(
        &self,
        env: &'env Env,
        version: VersionArg,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, StoredState>> {
        let version = version_arg("version", Some(version))?.unwrap_or(0);
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            let (state, schema) = agent.state_at_stored(version).into_napi()?;
            Ok(StoredState {
                state: text(state.json())?,
                schema,
            })
        })
    }

    /// `state` (JSON text) stored under schema version `from`, upgraded to this handle's version
    /// without writing, on a pool thread (steps of code run on the JavaScript thread meanwhile).
    #[napi]
    pub fn upgrade_state<'env>(
        &self,
        env: &'env Env,
        state: String,
        from: u32,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, String>> {
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            text(
                agent
                    .upgrade_state(state.as_bytes(), from)
                    .into_napi()?
                    .json(),
            )
        })
    }

    /// Reads the state and version on a pool thread; `known`: the version of the state the
    /// caller holds (see [`Versioned`]).
    #[napi]
    pub fn read<'env>(
        &self,
        env: &'env Env,
        cancel: Option<&CancelToken>,
        known: Option<VersionArg>,
    ) -> Result<PromiseRaw<'env, Versioned>> {
        let known = version_arg("known", known)?;
        let agent = Arc::clone(&self.agent);
        let last_read = Arc::clone(&self.last_read);
        spawn(env, token(cancel), move || {
            let (held, ticket): (Arc<Held>, Option<Ticket>) = agent.read_ticketed().into_napi()?;
            let mut last = last_read.lock().unwrap_or_else(|p| p.into_inner());
            let number = match ticket {
                Some(ticket) => {
                    last.number = last.number.wrapping_add(1).max(1);
                    last.ticket = Some(ticket);
                    last.number
                }
                None => 0,
            };
            drop(last);
            Ok(Versioned {
                version: held.version() as f64,
                state: unless_known(&held, known)?,
                ticket: number,
            })
        })
    }

    /// True when the read that returned `ticket` is still the stored state: nothing was
    /// committed since, by any connection, and the handle is open. Never waits.
    #[napi]
    pub fn is_current(&self, ticket: u32) -> Result<bool> {
        guarded("isCurrent", || {
            if ticket == 0 {
                return Ok(false);
            }
            let last = self.last_read.lock().unwrap_or_else(|p| p.into_inner());
            Ok(last.number == ticket
                && last
                    .ticket
                    .as_ref()
                    .is_some_and(|t| self.agent.is_current(t)))
        })
    }

    /// Merges `patch` (JSON text) on a pool thread; only at version `expected` when given.
    /// `known`: the version of the state the caller holds (see [`Written`]).
    #[napi]
    pub fn set_state<'env>(
        &self,
        env: &'env Env,
        patch: String,
        expected: Option<VersionArg>,
        known: Option<VersionArg>,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, Written>> {
        self.write(
            env,
            Agent::set_state_written,
            patch,
            expected,
            known,
            cancel,
        )
    }

    /// Replaces the state with `next` (JSON text) on a pool thread; only at version `expected`
    /// when given; `known` as for `set_state`.
    #[napi]
    pub fn replace_state<'env>(
        &self,
        env: &'env Env,
        next: String,
        expected: Option<VersionArg>,
        known: Option<VersionArg>,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, Written>> {
        self.write(
            env,
            Agent::replace_state_written,
            next,
            expected,
            known,
            cancel,
        )
    }

    /// Applies `operations` (an RFC 6902 JSON Patch: the JSON text of an array of operations)
    /// on a pool thread, all or nothing; only at version `expected` when given. The result
    /// always carries the state's text: the package does not derive the next state from the
    /// operations itself (that would take a second implementation of RFC 6902 on its side).
    #[napi]
    pub fn patch_state<'env>(
        &self,
        env: &'env Env,
        operations: String,
        expected: Option<VersionArg>,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, Written>> {
        self.write(
            env,
            Agent::patch_state_written,
            operations,
            expected,
            None,
            cancel,
        )
    }

    /// The compact JSON text of the part of the state at `pointer` (an RFC 6901 JSON Pointer;
    /// `""` is the whole state), read on a pool thread.
    #[napi]
    pub fn get_path<'env>(
        &self,
        env: &'env Env,
        pointer: String,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, String>> {
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            text(&agent.get_path(&pointer).into_napi()?)
        })
    }

    /// The last `n` elements of the array at `pointer`, as the JSON text of an array (oldest
    /// first), read on a pool thread.
    #[napi]
    pub fn get_tail<'env>(
        &self,
        env: &'env Env,
        pointer: String,
        n: f64,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, String>> {
        if !(n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0) {
            return Err(invalid(format!(
                "n must be a whole number of at least 0, got {n}"
            )));
        }
        // Past usize (a 32-bit build) every array is shorter anyway.
        let n = usize::try_from(n as u64).unwrap_or(usize::MAX);
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            text(&agent.get_tail(&pointer, n).into_napi()?)
        })
    }

    /// The change log after version `after`, as the C ABI's JSON array.
    #[napi]
    pub fn changes_since<'env>(
        &self,
        env: &'env Env,
        after: VersionArg,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, String>> {
        let after = version_arg("after", Some(after))?.unwrap_or(0);
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            text(&agent.changes_since(after).into_napi()?)
        })
    }

    /// The state at `version`, from the change log.
    #[napi]
    pub fn state_at<'env>(
        &self,
        env: &'env Env,
        version: VersionArg,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, String>> {
        let version = version_arg("version", Some(version))?.unwrap_or(0);
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            text(agent.state_at(version).into_napi()?.json())
        })
    }

    /// Replaces the state with the state at `version`, as a new change.
    #[napi]
    pub fn restore<'env>(
        &self,
        env: &'env Env,
        version: VersionArg,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, Versioned>> {
        let version = version_arg("version", Some(version))?.unwrap_or(0);
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            versioned(agent.restore(version).into_napi()?)
        })
    }

    /// Queues the changes other handles committed (with the change log on) for `take_changes`;
    /// resolves to how many.
    #[napi]
    pub fn poll<'env>(
        &self,
        env: &'env Env,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, u32>> {
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            let n = agent.poll().into_napi()?;
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        })
    }

    /// [`NativeAgent::set_state`] on the calling (JavaScript) thread, blocking it: for the
    /// benchmark that measures what the Promise costs; the package never calls it.
    #[napi]
    pub fn set_state_blocking(
        &self,
        patch: String,
        expected: Option<VersionArg>,
        known: Option<VersionArg>,
    ) -> Result<Written> {
        guarded("setStateBlocking", || {
            let expected = version_arg("expected", expected)?;
            let known = version_arg("known", known)?;
            let result = self
                .agent
                .set_state_written(patch.as_bytes(), expected)
                .into_napi()?;
            written(result, known)
        })
    }

    /// A read on the calling (JavaScript) thread, blocking it: for the benchmarks only.
    #[napi]
    pub fn read_blocking(&self, known: Option<VersionArg>) -> Result<Versioned> {
        guarded("readBlocking", || {
            let known = version_arg("known", known)?;
            let held = self.agent.read().into_napi()?;
            Ok(Versioned {
                version: held.version() as f64,
                state: unless_known(&held, known)?,
                ticket: 0,
            })
        })
    }

    /// The size cap in force for this handle, in bytes.
    #[napi]
    pub fn max_value_bytes(&self) -> f64 {
        self.agent.max_value_bytes() as f64
    }

    /// True until the handle is closed.
    #[napi]
    pub fn is_open(&self) -> bool {
        self.agent.is_open()
    }

    /// Closes the handle on a pool thread (its store's connection goes then).
    #[napi]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let agent = Arc::clone(&self.agent);
        spawn(env, None, move || agent.close().into_napi())
    }
}

/// The addon's private helpers of `NativeAgent` (not exported to JavaScript).
impl NativeAgent {
    /// One write (`how`: a merge, a replacement or a JSON Patch) as a pool job.
    fn write<'env>(
        &self,
        env: &'env Env,
        how: fn(&Agent, &[u8], Option<u64>) -> agent_state::Result<agent_state::Written>,
        input: String,
        expected: Option<VersionArg>,
        known: Option<VersionArg>,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'env, Written>> {
        let expected = version_arg("expected", expected)?;
        let known = version_arg("known", known)?;
        let agent = Arc::clone(&self.agent);
        spawn(env, token(cancel), move || {
            written(how(&agent, input.as_bytes(), expected).into_napi()?, known)
        })
    }
}
