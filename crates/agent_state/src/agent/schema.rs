//! Schema evolution: the schema version a handle declares, the steps that upgrade an older
//! state to it, and the rules a stored state's version is held to.
//!
//! An agent's state outlives the code that wrote it, so every state is stored with the schema
//! version of the program that wrote it (the open option `schema_version`; 0 when it declares
//! none). A handle that finds a state of an older version upgrades it **on first touch**, once:
//! the read or write that finds it first commits a migration (its own change, of kind
//! [`ChangeKind::Migration`](crate::ChangeKind::Migration), logged and delivered to hooks like
//! any other), made in one write transaction from the latest state, checked by the codec, the
//! size cap and the validator, and written only if the state is still the one it was computed
//! from, so two processes that find the same old state migrate it once. A handle that finds a
//! **newer** state fails closed ([`Error::NewerSchema`]): an old deployment still running after
//! a new one wrote must neither read the state into the old shape nor write over it. A
//! `read_only` handle writes nothing and reads every state as stored.
//!
//! Steps upgrade one version each (`k` to `k + 1`): declarative ones come with the open options
//! (`schema_steps`, so every language and the command have them without code), steps of code
//! are registered on the handle ([`Agent::set_schema_step`]). A missing step, a failing one, or
//! a result the codec, the cap or the validator refuses fails the migration with
//! [`Error::Migration`], naming the step; the stored state is left as it was.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{lock, Agent};
use crate::error::{Error, Result};
use crate::hooks::SchemaStep;
use crate::value::accept::{self, StateInput};
use crate::value::schema_steps::DeclarativeStep;
use crate::value::snapshot::Snapshot;

/// What a handle declares: its schema version and the steps that lead to it.
pub(super) struct Plan {
    /// The schema version of the states this handle reads and writes.
    pub version: u32,
    /// The declarative steps, by the version each upgrades from.
    declarative: BTreeMap<u32, DeclarativeStep>,
    /// The steps of code, by the version each upgrades from.
    code: Mutex<BTreeMap<u32, Arc<dyn SchemaStep>>>,
}

impl Plan {
    pub fn new(version: u32, steps: &[DeclarativeStep]) -> Plan {
        Plan {
            version,
            declarative: steps.iter().map(|s| (s.from, s.clone())).collect(),
            code: Mutex::new(BTreeMap::new()),
        }
    }
}

/// How a handle must treat a stored state of schema version `stored`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    /// Read and written as it is.
    Current,
    /// Upgraded first (a migration is committed, then the call goes on).
    Older,
    /// Refused ([`Error::NewerSchema`]).
    Newer,
}

impl Agent {
    /// The schema version this handle declares (the open option `schema_version`).
    pub fn schema_version(&self) -> u32 {
        self.schema.version
    }

    /// Sets (or, with `None`, removes) the step of code that upgrades a state from schema
    /// version `from` to `from + 1`. Register steps right after opening, before the first read
    /// or write: a state is upgraded when the handle first touches it.
    ///
    /// Errors: [`Error::InvalidArgument`] when `from` is not below the handle's schema version,
    /// or when the open options already give a declarative step from `from` (one step per
    /// version); [`Error::Closed`].
    pub fn set_schema_step(&self, from: u32, step: Option<Arc<dyn SchemaStep>>) -> Result<()> {
        if from >= self.schema.version {
            return Err(Error::InvalidArgument(format!(
                "a schema step from version {from} upgrades past this handle's schema_version \
                 {} (steps go from 0 up to schema_version - 1)",
                self.schema.version
            )));
        }
        if self.schema.declarative.contains_key(&from) {
            return Err(Error::InvalidArgument(format!(
                "the open options already give a declarative step from version {from} \
                 (schema_steps): one step per version"
            )));
        }
        let old = {
            let guard = self.lock_inner()?;
            guard.as_ref().ok_or(Error::Closed)?;
            let mut code = lock(&self.schema.code);
            match step {
                Some(step) => code.insert(from, step),
                None => code.remove(&from),
            }
        };
        // Dropped outside every lock: dropping may run its owner's finalizer.
        drop(old);
        Ok(())
    }

    /// `state`, stored under schema version `from`, upgraded to this handle's version by its
    /// steps, without writing anything: for a state read from the history ([`Agent::state_at`],
    /// the change log) that a caller wants in the current shape. A state of this handle's
    /// version is returned as it is.
    ///
    /// Errors: [`Error::NewerSchema`] when `from` is above the handle's version;
    /// [`Error::Migration`] as a migration would fail; the JSON and codec errors of `state`.
    pub fn upgrade_state(&self, state: &[u8], from: u32) -> Result<Arc<Snapshot>> {
        self.refuse_reentry()?;
        let state = Arc::new(accept::state(
            StateInput::Replacement(state),
            crate::options::MAX_MAX_VALUE_BYTES,
        )?);
        match self.fit(from) {
            Fit::Current => Ok(state),
            Fit::Newer => Err(self.newer(from)),
            Fit::Older => self.upgrade(from, &state),
        }
    }

    /// How this handle treats a stored state of schema version `stored`.
    pub(super) fn fit(&self, stored: u32) -> Fit {
        use std::cmp::Ordering::*;
        match stored.cmp(&self.schema.version) {
            Equal => Fit::Current,
            Less => Fit::Older,
            Greater => Fit::Newer,
        }
    }

    /// The error of a state stored under a newer schema version.
    pub(super) fn newer(&self, stored: u32) -> Error {
        let declared = self.schema.version;
        Error::NewerSchema {
            stored,
            declared,
            message: format!(
                "the state is stored under schema version {stored}, newer than this handle's \
                 schema_version {declared}: a newer program wrote it, and this one must neither \
                 read it into its older shape nor write over it (run the newer program, or open \
                 read_only to read it as stored)"
            ),
        }
    }

    /// `state` (stored under `from`, older than the handle's version) upgraded step by step.
    /// Steps of code run as the validator does, under the handle's lock.
    pub(super) fn upgrade(&self, from: u32, state: &Arc<Snapshot>) -> Result<Arc<Snapshot>> {
        let mut current = Arc::clone(state);
        for k in from..self.schema.version {
            let failed = |reason: String| Error::Migration {
                from: k,
                message: format!("schema step {k} -> {}: {reason}", k + 1),
            };
            let code = lock(&self.schema.code).get(&k).cloned();
            let text = match (code, self.schema.declarative.get(&k)) {
                (Some(step), _) => self
                    .locked_hook(|| step.upgrade(k, &current))
                    .map_err(|reason| failed(format!("the step failed: {reason}")))?,
                (None, Some(step)) => {
                    let value = step
                        .apply(&current.to_value())
                        .map_err(|e| failed(e.to_string()))?;
                    crate::value::json::to_vec(&value)
                }
                (None, None) => {
                    return Err(failed(format!(
                        "no step is given (a declarative one in schema_steps with \"from\": {k}, \
                         or one of code set with set_schema_step)"
                    )))
                }
            };
            let next = accept::state(StateInput::Replacement(&text), self.cap.bytes)
                .map_err(|e| failed(format!("its result is refused: {}", Error::from(e))))?;
            if next.len() > self.cap.bytes {
                return Err(failed(format!(
                    "its result is {} bytes, over {}",
                    next.len(),
                    self.cap.describe()
                )));
            }
            current = Arc::new(next);
        }
        Ok(current)
    }
}
