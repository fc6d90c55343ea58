//! The accept pipeline: bytes and limits in, a checked state (or a precise error) out.
//!
//! Every value that enters an agent takes the same steps, in this order, so the error a bad
//! input earns does not depend on where it came from: the raw size against `max_value_bytes`,
//! strict JSON ([`json::parse`]), a plain object (not a scalar, array or tagged value), the
//! codec ([`codec::validate`]), then the encoded size. A merge patch stops after the codec (the
//! merged state's size is checked by [`Snapshot::merge`]); a state goes all the way.
//!
//! States read back from the store take [`decode_stored`]: the same checks, but any failure
//! is [`Error::Corrupt`] (the file was changed behind the library's back), not the caller's
//! fault.

use serde_json::Value;

use super::codec;
use super::json;
use super::snapshot::Snapshot;
use crate::error::{Error, Result};

/// Parses caller input (`what` names it in messages: "patch", "state", ...) into a
/// codec-checked plain object, refusing text over `max` bytes before parsing it.
pub fn parse_object(text: &[u8], max: usize, what: &str) -> Result<Value> {
    if text.len() > max {
        return Err(Error::TooLarge(format!(
            "the {what} is {} bytes, over max_value_bytes ({max})",
            text.len(),
        )));
    }
    let value = json::parse(text)?;
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    codec::validate(&value, 1)?;
    Ok(value)
}

/// Encodes a codec-checked value as a state, refusing anything but a plain object and an
/// encoding over `max` bytes.
pub fn encode_state(value: Value, max: usize, what: &str) -> Result<Snapshot> {
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    let snapshot = Snapshot::new(value);
    if snapshot.json().len() > max {
        return Err(Error::TooLarge(format!(
            "the encoded {what} would be {} bytes, over max_value_bytes ({max}); nothing was written",
            snapshot.json().len()
        )));
    }
    Ok(snapshot)
}

/// A state given as a value (the `initial_state` option): the codec, then [`encode_state`].
pub fn state_from_value(value: Value, max: usize, what: &str) -> Result<Snapshot> {
    codec::validate(&value, 1)?;
    encode_state(value, max, what)
}

/// Decodes a state read back from the store; any failure is [`Error::Corrupt`].
pub fn decode_stored(bytes: &[u8]) -> Result<Snapshot> {
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

/// Puts `context` in front of the message of an input error (other kinds pass unchanged).
pub fn in_context(e: Error, context: &str) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{context}: {m}")),
        Error::Json(m) => Error::Json(format!("{context}: {m}")),
        Error::Codec(m) => Error::Codec(format!("{context}: {m}")),
        Error::TooLarge(m) => Error::TooLarge(format!("{context}: {m}")),
        other => other,
    }
}

/// What a value that is not a plain object is, for messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a tagged value",
    }
}
