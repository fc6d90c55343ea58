//! Typed states through serde: [`Agent::get`] reads the state into any `Deserialize`,
//! [`Agent::set`], [`Agent::merge`] and [`Agent::replace`] write any `Serialize`, and
//! `serde_json::Value` is one such type. The bytes stored are the compact JSON serde writes,
//! checked and normalised by the storage codec like any other language's input, so a
//! `#[derive(Serialize)]` struct stores exactly what the other languages store for the same
//! members in the same order (Rust writes a struct's fields in declaration order). The codec's
//! extended types (dates, maps, sets, bytes, big integers, regular expressions, typed arrays)
//! are the types of [`crate::types`].
//!
//! # `Option` fields: skipped by `set`, deleting with `merge`
//!
//! serde writes `None` as `null`, and in an RFC 7396 merge patch `null` deletes the member.
//! A Rust patch struct is usually all `Option`s, meaning "only the fields I set", so:
//!
//! - [`Agent::set`] **skips** `None`: every `null` member of the serialized patch (at any depth
//!   of its objects; array elements are data and stay) is left out before the merge. It never
//!   deletes. This is TypeScript's `setState(patch)` with `undefined` members.
//! - [`Agent::merge`] sends the patch **as serialized**, so `null` deletes: a `None` field
//!   deletes its member. To say per field, use `Option<Option<T>>` with
//!   `#[serde(default, skip_serializing_if = "Option::is_none")]`: `None` leaves the member,
//!   `Some(None)` deletes it, `Some(Some(v))` sets it. `serde_json::json!({"note": null})` is a
//!   merge that deletes `note`.
//!
//! A float that is not finite (NaN, an infinity) has no JSON form: a value holding one is
//! refused with [`Error::Codec`] and nothing is written, as the other languages' bindings
//! refuse it (serde_json alone would write it as `null`).
//!
//! ```
//! use serde::Serialize;
//! use serde_json::json;
//! use agent_state::Agent;
//!
//! #[derive(Serialize, Default)]
//! struct JobPatch {
//!     step: Option<u32>,
//!     #[serde(default, skip_serializing_if = "Option::is_none")]
//!     note: Option<Option<String>>,
//! }
//!
//! let agent = Agent::builder().open(":memory:")?;
//! agent.replace(&json!({"status": "processing", "job": {"id": "j1", "step": 2, "note": "retrying"}}))?;
//! // `set`: None is skipped, whatever its annotation.
//! agent.set(&json!({"job": {"step": 3, "note": null}}))?;
//! assert_eq!(agent.get_value()?["job"], json!({"id": "j1", "step": 3, "note": "retrying"}));
//! // `merge`: null deletes; `Some(None)` is a null, `None` (skipped by serde) is no member.
//! let v = agent.merge(&json!({"job": JobPatch { step: Some(4), note: Some(None) }}))?;
//! assert_eq!(v.get::<serde_json::Value>()?["job"], json!({"id": "j1", "step": 4}));
//! # Ok::<(), agent_state::Error>(())
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::agent::{Agent, Versioned, Written};
use crate::error::{Detail, Error, Result};
use crate::types::finite;
use crate::value::codec;
use crate::value::snapshot::Snapshot;

impl Agent {
    /// The state (the initial state while nothing is stored) read into `T`. Never writes.
    ///
    /// Errors: [`Error::Serde`] when the state does not fit `T` (a member missing or of
    /// another type; the message names where), and those of [`Agent::get_state`].
    pub fn get<T: DeserializeOwned>(&self) -> Result<T> {
        decode(&*self.get_state()?)
    }

    /// The state as a `serde_json::Value` (tagged values as their JSON objects).
    pub fn get_value(&self) -> Result<Value> {
        Ok(self.get_state()?.to_value())
    }

    /// Merges `patch` (any `Serialize` that writes a JSON object) into the state in one
    /// transaction, **skipping `None`**: every `null` member is left out (see the module's
    /// text; [`Agent::merge`] deletes with `null`). Returns the state and version after it
    /// ([`Versioned::get`] reads it into a type).
    ///
    /// Errors: [`Error::Serde`] when serde cannot write the patch, and those of
    /// [`Agent::set_state`] ([`Error::InvalidArgument`] when it is not an object).
    pub fn set<P: Serialize + ?Sized>(&self, patch: &P) -> Result<Versioned> {
        self.set_if(patch, None)
    }

    /// [`Agent::set`] committed only at version `expected` (`None`: any), else
    /// [`Error::Conflict`] and nothing written.
    pub fn set_if<P: Serialize + ?Sized>(
        &self,
        patch: &P,
        expected: Option<u64>,
    ) -> Result<Versioned> {
        self.set_state_if(&skipping_none(patch)?, expected)
    }

    /// Merges `patch` as serde writes it, an RFC 7396 merge patch: a `null` member (a `None`
    /// field) **deletes** that member. See the module's text for `Option<Option<T>>`.
    ///
    /// Errors: those of [`Agent::set`].
    pub fn merge<P: Serialize + ?Sized>(&self, patch: &P) -> Result<Versioned> {
        self.merge_if(patch, None)
    }

    /// [`Agent::merge`] committed only at version `expected` (`None`: any).
    pub fn merge_if<P: Serialize + ?Sized>(
        &self,
        patch: &P,
        expected: Option<u64>,
    ) -> Result<Versioned> {
        self.set_state_if(&to_json("the patch", patch)?, expected)
    }

    /// Replaces the whole state with `state` (any `Serialize` that writes a JSON object; a
    /// `None` field is stored as `null`, as serde writes it).
    ///
    /// Errors: [`Error::Serde`], [`Error::InvalidArgument`] as [`Agent::set`], and those of
    /// [`Agent::replace_state`].
    pub fn replace<S: Serialize + ?Sized>(&self, state: &S) -> Result<Versioned> {
        self.replace_if(state, None)
    }

    /// [`Agent::replace`] committed only at version `expected` (`None`: any).
    pub fn replace_if<S: Serialize + ?Sized>(
        &self,
        state: &S,
        expected: Option<u64>,
    ) -> Result<Versioned> {
        self.replace_state_if(&to_json("the state", state)?, expected)
    }

    /// Read, change, write back, as one compare-and-set: `change` gets the state read into
    /// `T` and edits it; the result replaces the state only if no other writer committed
    /// since the read, else the read and `change` run again (so `change` may run more than
    /// once, and should do nothing but edit its argument). Returns what was written.
    ///
    /// Errors: those of [`Agent::get`] and [`Agent::replace`] but [`Error::Conflict`], which
    /// is retried.
    ///
    /// ```
    /// use agent_state::Agent;
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Default)]
    /// struct Counter { n: u64 }
    ///
    /// let agent = Agent::builder().initial_state(&Counter::default()).open(":memory:")?;
    /// let v = agent.update(|c: &mut Counter| c.n += 1)?;
    /// assert_eq!((v.version, v.get::<Counter>()?.n), (1, 1));
    /// # Ok::<(), agent_state::Error>(())
    /// ```
    pub fn update<T, F>(&self, mut change: F) -> Result<Versioned>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(&mut T),
    {
        loop {
            let read = self.get_state_versioned()?;
            let mut state: T = decode(&read.state)?;
            change(&mut state);
            match self.replace_if(&state, Some(read.version)) {
                Err(Error::Conflict { .. }) => continue,
                other => return other,
            }
        }
    }
}

impl Versioned {
    /// The state read into `T`.
    ///
    /// Errors: [`Error::Serde`] when it does not fit `T`.
    pub fn get<T: DeserializeOwned>(&self) -> Result<T> {
        decode(&self.state)
    }
}

impl Written {
    /// The state read into `T`.
    ///
    /// Errors: [`Error::Serde`] when it does not fit `T`.
    pub fn get<T: DeserializeOwned>(&self) -> Result<T> {
        decode(&self.state)
    }
}

/// `snapshot` read into `T`.
pub(crate) fn decode<T: DeserializeOwned>(snapshot: &Snapshot) -> Result<T> {
    serde_json::from_slice(snapshot.json()).map_err(|e| {
        Error::Serde(Detail::with_source(
            format!(
                "the state does not fit the type {}: {e}",
                std::any::type_name::<T>()
            ),
            e,
        ))
    })
}

/// The merge patch [`Agent::set`] sends for `patch`: its JSON without the `null` members.
pub(crate) fn skipping_none<P: Serialize + ?Sized>(patch: &P) -> Result<Vec<u8>> {
    finite::check("the patch", patch)?;
    let mut value = serde_json::to_value(patch).map_err(|e| serialize_error("the patch", e))?;
    if let Value::Object(map) = &mut value {
        if codec::tag_of(map).is_none() {
            skip_nulls(map);
        }
    }
    to_json("the patch", &value)
}

/// `value` as compact JSON text (the core checks it is an object, as for every language).
pub(crate) fn to_json<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<Vec<u8>> {
    finite::check(what, value)?;
    serde_json::to_vec(value).map_err(|e| serialize_error(what, e))
}

/// serde's failure to write `what`.
pub(crate) fn serialize_error(what: &str, e: serde_json::Error) -> Error {
    Error::Serde(Detail::with_source(
        format!("serde could not write {what} as JSON: {e}"),
        e,
    ))
}

/// Leaves out every `null` member of `map` and of the plain objects inside it (not inside
/// arrays or tagged values, which a merge replaces whole).
fn skip_nulls(map: &mut Map<String, Value>) {
    map.retain(|_, v| !v.is_null());
    for v in map.values_mut() {
        if let Value::Object(inner) = v {
            if codec::tag_of(inner).is_none() {
                skip_nulls(inner);
            }
        }
    }
}
