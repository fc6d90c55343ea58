//! RFC 6902 JSON Patch on values: a list of operations (`add`, `remove`, `replace`, `move`,
//! `copy`, `test`) applied in order, all or nothing.
//!
//! This is the reference implementation, on [`serde_json::Value`]: it says exactly what a patch
//! means, and whatever faster path applies patches to stored encodings is tested against it.
//! Two steps, as for merge patches: [`JsonPatch::from_value`] checks the document's shape (an
//! array of operation objects, each with its members, each pointer well formed) without a
//! target, so a malformed patch is refused before anything is read; [`JsonPatch::apply`] then
//! runs the operations against a document and either returns the result of all of them or
//! says which one failed and why, leaving the document as it was.
//!
//! The failures are of three kinds ([`PatchErrorKind`]), because a caller acts on them
//! differently: a malformed patch is a bug in the caller; a path that does not exist (or an
//! index out of range, a move into its own child) means the document is not what the patch
//! expected; a `test` that does not hold is the patch's own compare-and-set saying no.
//!
//! Values are compared by JSON equality for `test`: objects member-wise in any order, arrays
//! element-wise, numbers by their value (`1`, `1.0` and `10e-1` are equal), strings by their
//! characters. The result is plain JSON: whether it is a state the codec accepts (sizes,
//! tagged values) is the caller's check, as for any new state.

use std::fmt;

use serde_json::{Map, Value};

use crate::pointer::{array_index, Index, Pointer};

/// A checked JSON Patch: its operations, in order.
///
/// Immutable once built; `Send + Sync`. Applying it never changes it.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPatch {
    ops: Vec<Operation>,
}

/// One operation of a patch.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Operation {
    /// Adds `value` at `path`: a new member, an element inserted before the index (or
    /// appended, for `-`), or the whole document for `""`. A member that exists is replaced.
    Add {
        /// Where.
        path: Pointer,
        /// What.
        value: Value,
    },
    /// Removes the value at `path`, which must exist.
    Remove {
        /// Where.
        path: Pointer,
    },
    /// Replaces the value at `path`, which must exist.
    Replace {
        /// Where.
        path: Pointer,
        /// The new value.
        value: Value,
    },
    /// Removes the value at `from` and adds it at `path`; `from` must exist and must not be a
    /// proper prefix of `path` (a value cannot move into itself).
    Move {
        /// Where the value is.
        from: Pointer,
        /// Where it goes.
        path: Pointer,
    },
    /// Adds a copy of the value at `from` at `path`.
    Copy {
        /// Where the value is.
        from: Pointer,
        /// Where the copy goes.
        path: Pointer,
    },
    /// Succeeds when the value at `path` equals `value` (JSON equality), else the whole patch
    /// fails with [`PatchErrorKind::TestFailed`].
    Test {
        /// Where.
        path: Pointer,
        /// The value expected there.
        value: Value,
    },
}

/// Which kind of failure a [`PatchError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PatchErrorKind {
    /// The patch is not a JSON Patch: not an array, an element not an object, an unknown or
    /// missing `op`, a missing `path`, `from` or `value`, a pointer that does not parse.
    Malformed,
    /// An operation cannot apply to the document: a path (or `from`) that does not exist, an
    /// index out of range or not an index, a parent that is neither object nor array, a move
    /// into its own child, removing the whole document.
    NotApplicable,
    /// A `test` operation's value is not the document's.
    TestFailed,
}

/// Why a patch was refused or could not be applied: its kind, and which operation (its index in
/// the patch, its `op` and `path`) when one is to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError {
    /// What kind of failure.
    pub kind: PatchErrorKind,
    /// The operation's index in the patch (from 0); `None` when the patch as a whole is
    /// malformed (not an array).
    pub index: Option<usize>,
    /// The operation's `op`, when it has a known one.
    pub op: Option<&'static str>,
    /// The operation's `path` as written, when it has one.
    pub path: Option<String>,
    /// What went wrong, in words.
    pub reason: String,
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.index, self.op, &self.path) {
            (Some(i), Some(op), Some(path)) => write!(f, "operation {i} ({op} {path:?}): ")?,
            (Some(i), Some(op), None) => write!(f, "operation {i} ({op}): ")?,
            (Some(i), None, _) => write!(f, "operation {i}: ")?,
            (None, _, _) => {}
        }
        f.write_str(&self.reason)
    }
}

impl std::error::Error for PatchError {}

impl Operation {
    /// The operation's `op`, as RFC 6902 spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Add { .. } => "add",
            Operation::Remove { .. } => "remove",
            Operation::Replace { .. } => "replace",
            Operation::Move { .. } => "move",
            Operation::Copy { .. } => "copy",
            Operation::Test { .. } => "test",
        }
    }

    /// The operation's `path`.
    pub fn path(&self) -> &Pointer {
        match self {
            Operation::Add { path, .. }
            | Operation::Remove { path }
            | Operation::Replace { path, .. }
            | Operation::Move { path, .. }
            | Operation::Copy { path, .. }
            | Operation::Test { path, .. } => path,
        }
    }
}

impl JsonPatch {
    /// Checks `patch` (a parsed JSON document) and returns it as operations, or the first
    /// reason it is not a JSON Patch ([`PatchErrorKind::Malformed`]). Members an operation
    /// does not define are ignored, as RFC 6902 requires.
    pub fn from_value(patch: &Value) -> Result<JsonPatch, PatchError> {
        let Value::Array(items) = patch else {
            return Err(PatchError {
                kind: PatchErrorKind::Malformed,
                index: None,
                op: None,
                path: None,
                reason: format!(
                    "a JSON Patch is an array of operations, not {}",
                    kind_of(patch)
                ),
            });
        };
        let ops = items
            .iter()
            .enumerate()
            .map(|(index, item)| operation(index, item))
            .collect::<Result<_, _>>()?;
        Ok(JsonPatch { ops })
    }

    /// The operations, in order.
    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }

    /// Applies every operation, in order, to a copy of `doc` and returns the result; on the
    /// first that fails, the error names it and `doc` is untouched.
    pub fn apply(&self, doc: &Value) -> Result<Value, PatchError> {
        let mut out = doc.clone();
        for (index, op) in self.ops.iter().enumerate() {
            apply_one(&mut out, op).map_err(|(kind, reason)| PatchError {
                kind,
                index: Some(index),
                op: Some(op.name()),
                path: Some(op.path().to_string()),
                reason,
            })?;
        }
        Ok(out)
    }
}

/// A value as compact JSON text, for messages.
fn text(value: &Value) -> String {
    String::from_utf8_lossy(&crate::json::to_vec(value)).into_owned()
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One element of a patch, checked.
fn operation(index: usize, item: &Value) -> Result<Operation, PatchError> {
    let malformed = |op: Option<&'static str>, path: Option<String>, reason: String| PatchError {
        kind: PatchErrorKind::Malformed,
        index: Some(index),
        op,
        path,
        reason,
    };
    let Value::Object(members) = item else {
        return Err(malformed(
            None,
            None,
            format!("an operation is an object, not {}", kind_of(item)),
        ));
    };
    let op = match members.get("op") {
        Some(Value::String(op)) => match op.as_str() {
            "add" => "add",
            "remove" => "remove",
            "replace" => "replace",
            "move" => "move",
            "copy" => "copy",
            "test" => "test",
            other => {
                return Err(malformed(
                    None,
                    None,
                    format!("unknown op {other:?} (one of add, remove, replace, move, copy, test)"),
                ))
            }
        },
        Some(other) => {
            return Err(malformed(
                None,
                None,
                format!("\"op\" is a string, not {}", kind_of(other)),
            ))
        }
        None => return Err(malformed(None, None, "\"op\" is missing".into())),
    };
    let path_text = match members.get("path") {
        Some(Value::String(p)) => p.clone(),
        Some(other) => {
            return Err(malformed(
                Some(op),
                None,
                format!("\"path\" is a string, not {}", kind_of(other)),
            ))
        }
        None => return Err(malformed(Some(op), None, "\"path\" is missing".into())),
    };
    let pointer = |member: &str, text: &str| {
        Pointer::parse(text).map_err(|e| {
            malformed(
                Some(op),
                Some(path_text.clone()),
                format!("\"{member}\": {e}"),
            )
        })
    };
    let path = pointer("path", &path_text)?;
    let from = || match members.get("from") {
        Some(Value::String(f)) => pointer("from", f),
        Some(other) => Err(malformed(
            Some(op),
            Some(path_text.clone()),
            format!("\"from\" is a string, not {}", kind_of(other)),
        )),
        None => Err(malformed(
            Some(op),
            Some(path_text.clone()),
            "\"from\" is missing".into(),
        )),
    };
    // `"value": null` is a value; only an absent member is missing.
    let value = || {
        members.get("value").cloned().ok_or_else(|| {
            malformed(
                Some(op),
                Some(path_text.clone()),
                "\"value\" is missing".into(),
            )
        })
    };
    Ok(match op {
        "add" => Operation::Add {
            path,
            value: value()?,
        },
        "remove" => Operation::Remove { path },
        "replace" => Operation::Replace {
            path,
            value: value()?,
        },
        "move" => Operation::Move {
            from: from()?,
            path,
        },
        "copy" => Operation::Copy {
            from: from()?,
            path,
        },
        _ => Operation::Test {
            path,
            value: value()?,
        },
    })
}

type Failure = (PatchErrorKind, String);

fn not_applicable(reason: impl Into<String>) -> Failure {
    (PatchErrorKind::NotApplicable, reason.into())
}

fn apply_one(doc: &mut Value, op: &Operation) -> Result<(), Failure> {
    match op {
        Operation::Add { path, value } => add(doc, path, value.clone()),
        Operation::Remove { path } => remove(doc, path).map(drop),
        Operation::Replace { path, value } => {
            let slot = path
                .get_mut(doc)
                .ok_or_else(|| not_applicable("the path does not exist"))?;
            *slot = value.clone();
            Ok(())
        }
        Operation::Move { from, path } => {
            if from == path {
                // RFC 6902: from must exist; moving a value onto itself changes nothing.
                return from
                    .get(doc)
                    .map(drop)
                    .ok_or_else(|| not_applicable("\"from\" does not exist"));
            }
            if from.is_proper_prefix_of(path) {
                return Err(not_applicable(format!(
                    "cannot move {from} into its own child {path}"
                )));
            }
            let value = remove(doc, from)
                .map_err(|(kind, reason)| (kind, format!("\"from\": {reason}")))?;
            add(doc, path, value)
        }
        Operation::Copy { from, path } => {
            let value = from
                .get(doc)
                .cloned()
                .ok_or_else(|| not_applicable("\"from\" does not exist"))?;
            add(doc, path, value)
        }
        Operation::Test { path, value } => {
            let actual = path
                .get(doc)
                .ok_or_else(|| not_applicable("the path does not exist"))?;
            if json_equal(actual, value) {
                Ok(())
            } else {
                Err((
                    PatchErrorKind::TestFailed,
                    format!(
                        "the test failed: the value is {}, not {}",
                        text(actual),
                        text(value)
                    ),
                ))
            }
        }
    }
}

/// The container a last token is applied to, with that token.
fn parent<'a, 'p>(
    doc: &'a mut Value,
    path: &'p Pointer,
) -> Result<(&'a mut Value, &'p str), Failure> {
    let Some((parent_path, last)) = path.split_last() else {
        unreachable!("the whole document has no parent; callers handle the root first")
    };
    let parent = parent_path.get_mut(doc).ok_or_else(|| {
        not_applicable(format!(
            "the parent {:?} does not exist",
            parent_path.to_string()
        ))
    })?;
    Ok((parent, last))
}

fn add(doc: &mut Value, path: &Pointer, value: Value) -> Result<(), Failure> {
    if path.is_root() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = parent(doc, path)?;
    match parent {
        Value::Object(map) => {
            // An existing member is replaced in its place; a new one goes last.
            map.insert(last.to_owned(), value);
            Ok(())
        }
        Value::Array(items) => match array_index(last) {
            Some(Index::End) => {
                items.push(value);
                Ok(())
            }
            Some(Index::At(i)) if i <= items.len() => {
                items.insert(i, value);
                Ok(())
            }
            Some(Index::At(i)) => Err(not_applicable(format!(
                "index {i} is past the end of an array of {} elements",
                items.len()
            ))),
            None => Err(not_applicable(format!(
                "{last:?} is not an array index (0, digits without a leading zero, or -)"
            ))),
        },
        other => Err(not_applicable(format!(
            "the parent is {}, which has no members",
            kind_of(other)
        ))),
    }
}

fn remove(doc: &mut Value, path: &Pointer) -> Result<Value, Failure> {
    if path.is_root() {
        return Err(not_applicable("cannot remove the whole document"));
    }
    let (parent, last) = parent(doc, path)?;
    match parent {
        // shift_remove keeps the order of the remaining members.
        Value::Object(map) => map
            .shift_remove(last)
            .ok_or_else(|| not_applicable("the path does not exist")),
        Value::Array(items) => match array_index(last) {
            Some(Index::At(i)) if i < items.len() => Ok(items.remove(i)),
            _ => Err(not_applicable("the path does not exist")),
        },
        _ => Err(not_applicable("the path does not exist")),
    }
}

/// JSON equality: objects member-wise in any order, arrays element-wise, numbers by value.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            decimal(&x.to_string()).same_value(&decimal(&y.to_string()))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => objects_equal(x, y),
        _ => a == b,
    }
}

fn objects_equal(x: &Map<String, Value>, y: &Map<String, Value>) -> bool {
    x.len() == y.len()
        && x.iter()
            .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
}

/// A number's exact value: sign, significant digits without leading or trailing zeros, and the
/// power of ten of the last one (`-12.50e1` is `-`, `125`, `0`). Zero has no digits.
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i128,
}

impl Decimal {
    /// The same number (zero is zero whatever its sign).
    fn same_value(&self, other: &Decimal) -> bool {
        if self.digits.is_empty() || other.digits.is_empty() {
            return self.digits.is_empty() && other.digits.is_empty();
        }
        self.negative == other.negative
            && self.exponent == other.exponent
            && self.digits == other.digits
    }
}

/// Reads a JSON number's text exactly (no rounding through a double).
fn decimal(text: &str) -> Decimal {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, "0"),
    };
    // Exponents beyond i128 saturate: such numbers are never equal to a number a state holds
    // (the codec refuses what is outside the double range).
    let exp: i128 = exp.parse().unwrap_or(if exp.starts_with('-') {
        i128::MIN / 2
    } else {
        i128::MAX / 2
    });
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = int.chars().chain(frac.chars()).collect();
    let mut exponent = exp - frac.len() as i128;
    while digits.ends_with('0') {
        digits.pop();
        exponent += 1;
    }
    let digits = digits.trim_start_matches('0').to_owned();
    Decimal {
        negative,
        digits,
        exponent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, patch: Value) -> Result<Value, PatchError> {
        JsonPatch::from_value(&patch)?.apply(&doc)
    }

    #[test]
    fn every_operation_applies_in_order() {
        let doc = json!({"status": "idle", "messages": [{"id": 1}], "draft": {"text": "hi"}});
        let out = run(
            doc,
            json!([
                {"op": "add", "path": "/messages/-", "value": {"id": 2}},
                {"op": "add", "path": "/messages/0", "value": {"id": 0}},
                {"op": "replace", "path": "/status", "value": "busy"},
                {"op": "move", "from": "/draft/text", "path": "/last"},
                {"op": "copy", "from": "/messages/2", "path": "/newest"},
                {"op": "remove", "path": "/draft"},
                {"op": "test", "path": "/newest/id", "value": 2.0}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"status": "busy", "messages": [{"id": 0}, {"id": 1}, {"id": 2}],
                   "last": "hi", "newest": {"id": 2}})
        );
        // Member order: replaced members keep their place, new ones go last.
        assert_eq!(
            text(&out),
            r#"{"status":"busy","messages":[{"id":0},{"id":1},{"id":2}],"last":"hi","newest":{"id":2}}"#
        );
    }

    #[test]
    fn a_failure_names_the_operation_and_leaves_the_document() {
        let doc = json!({"a": [1, 2]});
        let patch = JsonPatch::from_value(&json!([
            {"op": "add", "path": "/b", "value": 1},
            {"op": "remove", "path": "/a/2"}
        ]))
        .unwrap();
        let err = patch.apply(&doc).unwrap_err();
        assert_eq!(err.kind, PatchErrorKind::NotApplicable);
        assert_eq!(
            (err.index, err.op, err.path.as_deref()),
            (Some(1), Some("remove"), Some("/a/2"))
        );
        assert_eq!(
            err.to_string(),
            "operation 1 (remove \"/a/2\"): the path does not exist"
        );
        assert_eq!(doc, json!({"a": [1, 2]}));
    }

    #[test]
    fn a_failed_test_is_its_own_kind() {
        let err = run(
            json!({"v": 1}),
            json!([{"op": "test", "path": "/v", "value": 2}]),
        )
        .unwrap_err();
        assert_eq!(err.kind, PatchErrorKind::TestFailed);
        assert!(err.to_string().contains("the value is 1, not 2"), "{err}");
    }

    #[test]
    fn malformed_patches_are_refused_before_any_document() {
        let cases = [
            (json!({"op": "add"}), None, "a JSON Patch is an array"),
            (json!([1]), Some(0), "an operation is an object"),
            (json!([{"path": "/a"}]), Some(0), "\"op\" is missing"),
            (
                json!([{"op": "frob", "path": "/a"}]),
                Some(0),
                "unknown op \"frob\"",
            ),
            (
                json!([{"op": 1, "path": "/a"}]),
                Some(0),
                "\"op\" is a string",
            ),
            (
                json!([{"op": "add", "value": 1}]),
                Some(0),
                "\"path\" is missing",
            ),
            (
                json!([{"op": "add", "path": "/a"}]),
                Some(0),
                "\"value\" is missing",
            ),
            (
                json!([{"op": "test", "path": "/a"}]),
                Some(0),
                "\"value\" is missing",
            ),
            (
                json!([{"op": "move", "path": "/a"}]),
                Some(0),
                "\"from\" is missing",
            ),
            (
                json!([{"op": "copy", "from": 5, "path": "/a"}]),
                Some(0),
                "\"from\" is a string",
            ),
            (
                json!([{"op": "remove", "path": "/a~2"}]),
                Some(0),
                "is not a JSON Pointer",
            ),
            (
                json!([{"op": "remove", "path": "a"}]),
                Some(0),
                "is not a JSON Pointer",
            ),
        ];
        for (patch, index, want) in cases {
            let err = JsonPatch::from_value(&patch).unwrap_err();
            assert_eq!(err.kind, PatchErrorKind::Malformed, "{patch}");
            assert_eq!(err.index, index, "{patch}");
            assert!(err.to_string().contains(want), "{patch}: {err}");
        }
        // `"value": null` is a value, and unknown members are ignored.
        let ok = run(
            json!({}),
            json!([{"op": "add", "path": "/a", "value": null, "extra": 1}]),
        );
        assert_eq!(ok.unwrap(), json!({"a": null}));
    }

    #[test]
    fn paths_that_cannot_apply() {
        let doc = json!({"a": {"b": 1}, "list": [1, 2], "n": 5});
        let cases = [
            (
                json!([{"op": "add", "path": "/x/y", "value": 1}]),
                "the parent \"/x\" does not exist",
            ),
            (
                json!([{"op": "add", "path": "/list/3", "value": 1}]),
                "index 3 is past the end",
            ),
            (
                json!([{"op": "add", "path": "/list/01", "value": 1}]),
                "is not an array index",
            ),
            (
                json!([{"op": "add", "path": "/n/x", "value": 1}]),
                "the parent is a number",
            ),
            (
                json!([{"op": "replace", "path": "/zz", "value": 1}]),
                "the path does not exist",
            ),
            (
                json!([{"op": "remove", "path": "/list/-"}]),
                "the path does not exist",
            ),
            (
                json!([{"op": "remove", "path": ""}]),
                "cannot remove the whole document",
            ),
            (
                json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]),
                "into its own child",
            ),
            (
                json!([{"op": "move", "from": "/q", "path": "/r"}]),
                "\"from\": the path does not exist",
            ),
            (
                json!([{"op": "copy", "from": "/q", "path": "/r"}]),
                "\"from\" does not exist",
            ),
            (
                json!([{"op": "test", "path": "/q", "value": 1}]),
                "the path does not exist",
            ),
        ];
        for (patch, want) in cases {
            let err = run(doc.clone(), patch.clone()).unwrap_err();
            assert_eq!(err.kind, PatchErrorKind::NotApplicable, "{patch}");
            assert!(err.to_string().contains(want), "{patch}: {err}");
        }
    }

    #[test]
    fn json_equality_is_by_value() {
        let eq = |a: &str, b: &str| {
            json_equal(
                &crate::json::parse(a.as_bytes()).unwrap(),
                &crate::json::parse(b.as_bytes()).unwrap(),
            )
        };
        assert!(eq("1", "1.0"));
        assert!(eq("1", "10e-1"));
        assert!(eq("-0", "0"));
        assert!(eq("0.0", "0e5"));
        assert!(eq(
            "123456789012345678901234567890",
            "1.2345678901234567890123456789e29"
        ));
        assert!(!eq("1", "-1"));
        assert!(!eq("1", "1.0000000000000000000001"));
        assert!(!eq("100", "10"));
        assert!(eq(
            r#"{"a":1,"b":[1,{"c":2}]}"#,
            r#"{"b":[1.0,{"c":2}],"a":1}"#
        ));
        assert!(!eq(r#"{"a":1}"#, r#"{"a":1,"b":2}"#));
        assert!(!eq("[1,2]", "[2,1]"));
        assert!(!eq(r#""1""#, "1"));
        assert!(!eq("null", "false"));
    }
}
