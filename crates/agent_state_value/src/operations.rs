//! RFC 6902 JSON Patch on a state, and reads of one place of a state by an RFC 6901 JSON
//! Pointer.
//!
//! A JSON Patch says what to change where (`add` a message at `/messages/-`, `remove`
//! `/todo/3`, `test` that `/status` is still `"draft"`), where a merge patch can only say what
//! the changed members become: appending to an array by merge patch means sending the whole
//! array. The operations' meaning is [`JsonPatch::apply`]'s (the reference, on values); here it
//! is applied to a [`Snapshot`], and the result checked as any new state is (the codec, a plain
//! object at the top, the size cap).
//!
//! Reads of one place ([`Snapshot::path_json`], [`Snapshot::tail_json`]) return the encoding of
//! that part only: a client that wants the last message of a long conversation does not pay
//! for the conversation's encoding.

use serde_json::Value;

use crate::accept::describe;
use crate::codec;
use crate::error::{Error, Result};
use crate::json;
use crate::json_patch::JsonPatch;
use crate::patch::Patch;
use crate::pointer::Pointer;
use crate::snapshot::Snapshot;

impl Snapshot {
    /// Applies `patch`, whichever kind it is: an RFC 7396 merge patch ([`Snapshot::merge`]) or
    /// an RFC 6902 JSON Patch ([`Snapshot::apply_operations`]). `self` is unchanged either way.
    pub fn apply(&self, patch: &Patch, max_bytes: usize) -> Result<Snapshot> {
        match patch.operations() {
            Some(operations) => self.apply_operations(operations, max_bytes),
            None => self.merge(patch, max_bytes),
        }
    }

    /// Applies the operations of a JSON Patch, in order, all or nothing, and returns the next
    /// state: [`Error::Patch`] naming the operation that failed (malformed, not applicable, or
    /// a `test` that does not hold); [`Error::InvalidArgument`] or [`Error::Codec`] when the
    /// result is not a plain object the codec accepts (an `add` of `""` with an array, an
    /// object left shaped like a malformed tagged value); [`Error::TooLarge`] over
    /// `max_bytes`. `self` is unchanged either way.
    pub fn apply_operations(&self, operations: &JsonPatch, max_bytes: usize) -> Result<Snapshot> {
        // On the state's tree when it can (the common operations below the root): only the
        // path's objects and arrays are rebuilt. Otherwise, and for every failure, on values.
        if let Some(next) = self.apply_on_tree(operations, max_bytes) {
            return next;
        }
        let next = operations.apply(&self.to_value()).map_err(Error::Patch)?;
        match &next {
            Value::Object(map) if codec::tag_of(map).is_some() => {
                return Err(Error::Codec(format!(
                    "after the JSON Patch the state would be the tagged value {{{:?}: ...}}, not \
                     a plain object",
                    map.keys().next().map(String::as_str).unwrap_or_default()
                )))
            }
            Value::Object(_) => {}
            other => {
                return Err(Error::InvalidArgument(format!(
                    "after the JSON Patch the state would be {}, not a JSON object",
                    describe(other)
                )))
            }
        }
        codec::validate(&next, 1)?;
        let next = Snapshot::new(next);
        next.fits(max_bytes, "state")?;
        Ok(next)
    }

    /// The compact JSON encoding of the value at `pointer` (the whole state for `""`), or
    /// [`Error::NoSuchPath`] when the state has nothing there.
    pub fn path_json(&self, pointer: &Pointer) -> Result<Vec<u8>> {
        if pointer.is_root() {
            return Ok(self.json().to_vec());
        }
        // The encoding of that part only, read off the state's tree.
        self.json_at(pointer.tokens())
            .ok_or_else(|| no_such_path(pointer))
    }

    /// The last `n` elements of the array at `pointer`, as a JSON array (all of them when it
    /// has fewer): [`Error::NoSuchPath`] when the state has nothing there,
    /// [`Error::InvalidArgument`] when what is there is not an array.
    pub fn tail_json(&self, pointer: &Pointer, n: usize) -> Result<Vec<u8>> {
        if pointer.is_root() {
            return Err(Error::InvalidArgument(
                "the state is an object, not an array: no tail".to_string(),
            ));
        }
        // The encodings of those elements only, read off the state's tree.
        match self.tail_at(pointer.tokens(), n) {
            None => Err(no_such_path(pointer)),
            Some(Ok(out)) => Ok(out),
            Some(Err(value)) => Err(Error::InvalidArgument(format!(
                "the value at {:?} is {}, not an array: no tail",
                pointer.to_string(),
                describe(value)
            ))),
        }
    }
}

fn no_such_path(pointer: &Pointer) -> Error {
    Error::NoSuchPath(format!(
        "the state has no value at {:?}",
        pointer.to_string()
    ))
}

/// A caller's JSON Patch, checked as far as it can be without the state: its size against
/// `max`, strict JSON, an array of well-formed operations, each value one the codec accepts at
/// the place it goes.
pub fn accept(text: &[u8], max: usize) -> Result<Patch> {
    if text.len() > max {
        return Err(Error::TooLarge(format!(
            "the JSON Patch is {} bytes, over max_value_bytes ({max})",
            text.len()
        )));
    }
    let value = json::parse(text)?;
    let operations = JsonPatch::from_value(&value).map_err(Error::Patch)?;
    for (index, op) in operations.operations().iter().enumerate() {
        let carried = match op {
            crate::json_patch::Operation::Add { value, .. }
            | crate::json_patch::Operation::Replace { value, .. }
            | crate::json_patch::Operation::Test { value, .. } => value,
            _ => continue,
        };
        // The value sits one level below the place's parent: a state's member is at level 2.
        codec::validate(carried, op.path().tokens().len() + 1).map_err(|e| match e {
            Error::Codec(m) => Error::Codec(format!(
                "operation {index} ({} {:?}): {m}",
                op.name(),
                op.path().to_string()
            )),
            other => other,
        })?;
    }
    Ok(Patch::json_patch(operations, value))
}

/// A patch read back from the store (the change log, delta storage), as its writer applied it:
/// a JSON Patch when it is an array, a merge patch when it is an object; anything else is
/// [`Error::Corrupt`].
pub fn stored(text: &[u8]) -> Result<Patch> {
    let corrupt = |e: Error| Error::Corrupt(e.to_string());
    let value = json::parse(text).map_err(corrupt)?;
    match value {
        Value::Object(_) => Ok(Patch::from_value(value)),
        Value::Array(_) => {
            let operations = JsonPatch::from_value(&value).map_err(|e| corrupt(Error::Patch(e)))?;
            Ok(Patch::json_patch(operations, value))
        }
        other => Err(Error::Corrupt(format!(
            "a stored patch is {}, neither a merge patch nor a JSON Patch",
            describe(&other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_patch::PatchErrorKind;

    fn state(text: &str) -> Snapshot {
        crate::accept::stored(text.as_bytes()).unwrap()
    }

    fn apply(state_text: &str, ops: &str) -> Result<String> {
        let patch = accept(ops.as_bytes(), 1 << 20)?;
        let next = state(state_text).apply(&patch, 1 << 20)?;
        Ok(String::from_utf8(next.json().to_vec()).unwrap())
    }

    #[test]
    fn appends_removes_and_tests() {
        assert_eq!(
            apply(
                r#"{"m":[1,2]}"#,
                r#"[{"op":"add","path":"/m/-","value":3}]"#
            )
            .unwrap(),
            r#"{"m":[1,2,3]}"#
        );
        assert_eq!(
            apply(
                r#"{"m":[1,2],"s":"a"}"#,
                r#"[{"op":"test","path":"/s","value":"a"},{"op":"remove","path":"/m/0"}]"#
            )
            .unwrap(),
            r#"{"m":[2],"s":"a"}"#
        );
        let Err(Error::Patch(e)) =
            apply(r#"{"s":"a"}"#, r#"[{"op":"test","path":"/s","value":"b"}]"#)
        else {
            panic!("a failed test is a patch error")
        };
        assert_eq!(e.kind, PatchErrorKind::TestFailed);
        assert_eq!((e.index, e.path.as_deref()), (Some(0), Some("/s")));
    }

    #[test]
    fn the_result_must_be_a_plain_object_the_codec_accepts() {
        assert!(matches!(
            apply(r#"{"a":1}"#, r#"[{"op":"replace","path":"","value":[1]}]"#),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            apply(
                r#"{"d":{"$date":"2026-01-01T00:00:00.000Z"}}"#,
                r#"[{"op":"replace","path":"/d/$date","value":5}]"#
            ),
            Err(Error::Codec(_))
        ));
        assert!(matches!(
            apply(
                r#"{"a":1}"#,
                r#"[{"op":"replace","path":"","value":{"$set":[1]}}]"#
            ),
            Err(Error::Codec(_))
        ));
    }

    #[test]
    fn bad_patches_are_refused_before_the_state_is_read() {
        for (ops, what) in [
            (r#"{"op":"add"}"#, "not an array"),
            (r#"[{"op":"frob","path":"/a"}]"#, "unknown op"),
            (r#"[{"op":"add","path":"/a~2","value":1}]"#, "bad escape"),
        ] {
            assert!(
                matches!(accept(ops.as_bytes(), 1 << 20), Err(Error::Patch(_))),
                "{what}"
            );
        }
        assert!(matches!(
            accept(
                br#"[{"op":"add","path":"/a","path":"/b","value":1}]"#,
                1 << 20
            ),
            Err(Error::Codec(_))
        ));
        assert!(matches!(
            accept(br#"[{"op":"add","path":"/a","value":1}]"#, 10),
            Err(Error::TooLarge(_))
        ));
    }

    #[test]
    fn reads_of_one_path_and_tails() {
        let s = state(r#"{"m":[{"t":"a"},{"t":"b"},{"t":"c"}],"x/y":{"~":1}}"#);
        let at = |p: &str| s.path_json(&Pointer::parse(p).unwrap());
        assert_eq!(at("/m/1").unwrap(), br#"{"t":"b"}"#);
        assert_eq!(at("/x~1y/~0").unwrap(), b"1");
        assert!(matches!(at("/m/3"), Err(Error::NoSuchPath(_))));
        assert!(matches!(at("/m/-"), Err(Error::NoSuchPath(_))));
        let tail = |p: &str, n| s.tail_json(&Pointer::parse(p).unwrap(), n);
        assert_eq!(tail("/m", 2).unwrap(), br#"[{"t":"b"},{"t":"c"}]"#);
        assert_eq!(
            tail("/m", 9).unwrap(),
            br#"[{"t":"a"},{"t":"b"},{"t":"c"}]"#
        );
        assert_eq!(tail("/m", 0).unwrap(), b"[]");
        assert!(matches!(tail("/x~1y", 1), Err(Error::InvalidArgument(_))));
        // Tagged values are JSON like any other, to a pointer as to a JSON Patch.
        let s = state(r#"{"at":{"$date":"2026-01-01T00:00:00.000Z"}}"#);
        let at = |p: &str| s.path_json(&Pointer::parse(p).unwrap());
        assert_eq!(
            at("/at").unwrap(),
            br#"{"$date":"2026-01-01T00:00:00.000Z"}"#
        );
        assert_eq!(at("/at/$date").unwrap(), br#""2026-01-01T00:00:00.000Z""#);
    }
}
