//! The accept pipeline: bytes and limits in, a checked patch or state (or a precise error)
//! out. Three ways in: [`patch`] (a caller's merge patch), [`state`] (a whole state from a
//! caller, the `initial_state` option or an initial-state hook) and [`stored`] (a state read
//! back from the store).
//!
//! Every value that enters an agent takes the same steps, in this order, so the error a bad
//! input earns does not depend on where it came from: the raw size against `max_value_bytes`,
//! strict JSON ([`json::parse`]), a plain object (not a scalar, array or tagged value), the
//! codec ([`codec::validate`]), then the encoded size. A merge patch stops after the codec (the
//! merged state's size is checked by [`Snapshot::merge`]); a state goes all the way.
//!
//! States read back from the store take [`stored`]: the same checks, but any failure is
//! [`Error::Corrupt`] (the file was changed behind the library's back), not the caller's
//! fault.
//!
//! Text first tries the scanner (`scan`), which checks and encodes it in one pass
//! without building a value; whatever the scanner does not vouch for (an error of any kind,
//! tagged values) takes the steps above, so the verdict, the message and the bytes are the same
//! either way. Nothing outside this module knows which way an input went.

use serde_json::Value;

use super::codec;
use super::json;
use super::patch::Patch;
use super::scan;
use super::snapshot::Snapshot;
use crate::error::{Error, Result};

/// A whole state from outside, by where it comes from (which names it in messages).
pub enum StateInput<'a> {
    /// A caller's replacement (`replace_state`), as text. Its *encoded* size is not checked
    /// here but where the change is applied, after the expected version.
    Replacement(&'a [u8]),
    /// An initial-state hook's answer, as text.
    HookAnswer(&'a [u8]),
    /// The `initial_state` option, as a value.
    InitialOption(Value),
}

/// A caller's merge patch, checked as far as a patch can be (its merge checks the rest).
pub fn patch(text: &[u8], max: usize) -> Result<Patch> {
    if text.len() <= max {
        if let Some(scanned) = scan::scan(text) {
            return Ok(Patch::scanned(Snapshot::from_scanned(scanned)));
        }
    }
    parse_object(text, max, "patch").map(Patch::from_value)
}

/// A whole state, checked and encoded.
pub fn state(input: StateInput<'_>, max: usize) -> Result<Snapshot> {
    match input {
        StateInput::Replacement(text) => parse_text(text, max, "state"),
        StateInput::HookAnswer(text) => {
            let state = parse_text(text, max, "answer").map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(in_hook(m)),
                Error::Json(m) => Error::Json(in_hook(m)),
                Error::Codec(m) => Error::Codec(in_hook(m)),
                Error::TooLarge(m) => Error::TooLarge(in_hook(m)),
                other => other,
            })?;
            state.fits(max, "initial-state hook's answer")?;
            Ok(state)
        }
        StateInput::InitialOption(value) => {
            codec::validate(&value, 1)?;
            let state = plain_state(value, "initial_state")?;
            state.fits(max, "initial_state")?;
            Ok(state)
        }
    }
}

/// A state read back from the store; any failure is [`Error::Corrupt`].
pub fn stored(bytes: &[u8]) -> Result<Snapshot> {
    match scan::scan(bytes) {
        Some(scanned) => Ok(Snapshot::from_scanned(scanned)),
        None => stored_by_steps(bytes),
    }
}

/// An initial-state hook's answer's error, in context.
fn in_hook(message: String) -> String {
    format!("initial-state hook: {message}")
}

/// A state given as text, without the check of its encoded size: the input's own size, then
/// the scanner, or (when it does not vouch) the steps.
fn parse_text(text: &[u8], max: usize, what: &str) -> Result<Snapshot> {
    if text.len() <= max {
        if let Some(scanned) = scan::scan(text) {
            return Ok(Snapshot::from_scanned(scanned));
        }
    }
    plain_state(parse_object(text, max, what)?, what)
}

/// The steps for caller input (`what` names it in messages: "patch", "state", ...): a
/// codec-checked plain object, text over `max` bytes refused before it is parsed.
fn parse_object(text: &[u8], max: usize, what: &str) -> Result<Value> {
    if text.len() > max {
        return Err(Error::TooLarge(format!(
            "the {what} is {} bytes, over max_value_bytes ({max})",
            text.len(),
        )));
    }
    let value = json::parse(text)?;
    let value = plain(value, what)?;
    codec::validate(&value, 1)?;
    Ok(value)
}

/// [`stored`]'s steps for what the scanner does not vouch for: strict JSON, a plain object,
/// the codec.
fn stored_by_steps(bytes: &[u8]) -> Result<Snapshot> {
    let corrupt = |e: Error| Error::Corrupt(e.to_string());
    let value = json::parse(bytes).map_err(corrupt)?;
    if !codec::is_plain_object(&value) {
        return Err(corrupt(Error::InvalidArgument(
            "not a JSON object".to_string(),
        )));
    }
    codec::validate(&value, 1).map_err(corrupt)?;
    Ok(Snapshot::new(value))
}

/// `value` as a state, unless it is not a plain object.
fn plain_state(value: Value, what: &str) -> Result<Snapshot> {
    plain(value, what).map(Snapshot::new)
}

/// `value`, unless it is not a plain object.
fn plain(value: Value, what: &str) -> Result<Value> {
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    Ok(value)
}

/// What a value is, for messages ("an array", "a tagged value", ...).
pub(crate) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(map) if codec::tag_of(map).is_some() => "a tagged value",
        Value::Object(_) => "an object",
    }
}

/// The steps without the scanner, kept as the references the fast path is tested against
/// (here and by the fuzz targets, through `value::testing`).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod reference {
    use super::*;

    /// A caller's whole state as [`state`] checks a replacement, its encoded size included
    /// (what `replace_state` answers).
    pub(crate) fn fast_state(text: &[u8], max: usize) -> Result<Snapshot> {
        let state = super::state(StateInput::Replacement(text), max)?;
        state.fits(max, "state")?;
        Ok(state)
    }

    /// [`fast_state`] by the steps alone: parse, a plain object, the codec, the encoding.
    pub(crate) fn state(text: &[u8], max: usize) -> Result<Snapshot> {
        let state = plain_state(parse_object(text, max, "state")?, "state")?;
        state.fits(max, "state")?;
        Ok(state)
    }

    /// [`stored`](super::stored) by the steps alone.
    pub fn stored(bytes: &[u8]) -> Result<Snapshot> {
        stored_by_steps(bytes)
    }
}

#[cfg(test)]
mod tests;
