//! Declarative schema steps: data, given in the open options JSON, that upgrades a state stored
//! under schema version `k` to version `k + 1`, so every language binding and the command get
//! migrations without code.
//!
//! A step is `{"from": K, "ops": [ ... ]}`; its operations run in order on a copy of the state,
//! all or nothing ([`DeclarativeStep::apply`]). The operations are written for old data that is
//! not uniform (states written by several releases, by hand, by hooks): each says what to do
//! *where* a member is present or missing.
//!
//! - `merge` (`{"op":"merge","value":{..}}`, optionally with a `path`): an RFC 7396 merge patch
//!   at the path (the whole state by default), creating missing parent objects.
//! - `default`: sets a value only where the path has none (an existing `null` is a value).
//! - `set`: sets a value, replacing what is there.
//! - `remove`: removes a member where present.
//! - `rename` (`"to"`: the new member name, not a pointer): renames a member in place, keeping
//!   its position among its siblings.
//! - `move` (`"from"` → `"path"`): moves a member, creating the target's missing parents.
//!
//! Why lenient about absent paths but strict about conflicts: a member that is missing is the
//! ordinary shape of old data (a state written before the member existed, or by a release that
//! left it out), and the step's intent is clear either way, so `remove`, `rename` and `move` do
//! nothing there and `default` fills in. A conflict is different: renaming onto a member that
//! exists, moving onto one, or walking a path through an array or a scalar means the data does
//! not have the shape the step was written for, and any choice (overwrite, keep, merge) would
//! silently lose or invent data. A migration fails closed: the step fails, names the operation
//! and the places, and the stored state stays as it was.
//!
//! Paths are RFC 6901 JSON Pointers ([`Pointer`]) that name object members only; a tagged value
//! of the codec (`{"$date": ..}`) is a leaf, not an object to walk into. The root `""` is only
//! valid for `merge`, and the state stays a plain object. Values in a step are checked by the
//! codec when the step is parsed, and the upgraded state is checked again as a whole, since a
//! rename, move or removal can leave an object shaped like a malformed tagged value, or a move
//! can nest a value too deep.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::codec;
use crate::merge::merge_patch;
use crate::pointer::Pointer;

/// One declarative step: the operations that upgrade a state from schema version `from` to
/// `from + 1`.
///
/// Built only by [`DeclarativeStep::from_value`] (or [`parse_steps`]), so its operations are
/// checked: pointers well formed, values codec-valid, the root used only by `merge`. Owns its
/// operations; immutable once built and `Send + Sync`. Applying it never changes it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclarativeStep {
    /// The schema version a state must be stored under for this step to apply; the result is
    /// version `from + 1` (so `from` is below `u32::MAX`).
    pub from: u32,
    ops: Vec<StepOp>,
}

/// One operation of a step. Every path names an object member (never the root, except for
/// `Merge`); see the module documentation for the JSON forms.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StepOp {
    /// Merges `value` (RFC 7396) into the value at `path`, creating missing parent objects; a
    /// value there that is not a plain object is replaced. At the root, `value` is a plain
    /// object.
    Merge {
        /// Where (the root `""` for the whole state).
        path: Pointer,
        /// The merge patch (never `null`).
        value: Value,
    },
    /// Sets `value` at `path` only where the path has no value (an existing `null` stays),
    /// creating missing parent objects.
    Default {
        /// Where.
        path: Pointer,
        /// The value for states that have none.
        value: Value,
    },
    /// Sets `value` at `path`, replacing any value there (in its place), creating missing
    /// parent objects.
    Set {
        /// Where.
        path: Pointer,
        /// The new value.
        value: Value,
    },
    /// Removes the member at `path` where present.
    Remove {
        /// Where.
        path: Pointer,
    },
    /// Renames the member at `path` to `to` in the same object, keeping its position; nothing
    /// where absent; fails when a member `to` exists already.
    Rename {
        /// The member to rename.
        path: Pointer,
        /// Its new name (a member name, not a pointer).
        to: String,
    },
    /// Moves the member at `from` to `path`, creating the target's missing parent objects;
    /// nothing where `from` is absent; fails when `path` exists already.
    Move {
        /// Where the value is.
        from: Pointer,
        /// Where it goes (never inside `from`).
        path: Pointer,
    },
}

impl StepOp {
    /// The operation's `op`, as the JSON form spells it.
    pub fn name(&self) -> &'static str {
        match self {
            StepOp::Merge { .. } => "merge",
            StepOp::Default { .. } => "default",
            StepOp::Set { .. } => "set",
            StepOp::Remove { .. } => "remove",
            StepOp::Rename { .. } => "rename",
            StepOp::Move { .. } => "move",
        }
    }

    /// The operation's `path` (for `Move`, the target).
    pub fn path(&self) -> &Pointer {
        match self {
            StepOp::Merge { path, .. }
            | StepOp::Default { path, .. }
            | StepOp::Set { path, .. }
            | StepOp::Remove { path }
            | StepOp::Rename { path, .. }
            | StepOp::Move { path, .. } => path,
        }
    }
}

/// Why steps were refused or a step could not be applied: which step (its `from`), which
/// operation (its index, `op` and `path`) when one is to blame, and what is wrong.
///
/// Displays as `schema step 1 -> 2, operation 3 (rename "/user/nick"): "/user/name" exists
/// already`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    /// The operation's index in the step's `ops` (from 0); `None` when the step or the list as
    /// a whole is to blame.
    pub index: Option<usize>,
    /// The step's `from`, when it is known (parsed).
    pub from: Option<u32>,
    /// The operation's `op`, when it has a known one.
    pub op: Option<&'static str>,
    /// The operation's `path` as written, when it has one.
    pub path: Option<String>,
    /// What is wrong, in words.
    pub reason: String,
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.from {
            // u64: a hand-made error with `u32::MAX` still displays.
            Some(k) => write!(f, "schema step {k} -> {}", u64::from(k) + 1)?,
            None => f.write_str("schema step")?,
        }
        if let Some(i) = self.index {
            write!(f, ", operation {i}")?;
            match (self.op, &self.path) {
                (Some(op), Some(path)) => write!(f, " ({op} {path:?})")?,
                (Some(op), None) => write!(f, " ({op})")?,
                _ => {}
            }
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for StepError {}

impl DeclarativeStep {
    /// Parses `{"from": K, "ops": [ ... ]}`: `K` a whole number below `u32::MAX`, each element
    /// of `ops` one operation (module documentation). Members the step or an operation does not
    /// define are refused (a misspelt member must not be silently ignored by a migration), as
    /// are unknown ops, missing or mistyped members, malformed pointers, the root path outside
    /// `merge`, a `move` into itself, and values the codec refuses.
    pub fn from_value(v: &Value) -> Result<DeclarativeStep, StepError> {
        let error = |from: Option<u32>, reason: String| StepError {
            index: None,
            from,
            op: None,
            path: None,
            reason,
        };
        let Value::Object(members) = v else {
            return Err(error(
                None,
                format!("a step is an object, not {}", kind_of(v)),
            ));
        };
        if let Some(name) = members.keys().find(|k| *k != "from" && *k != "ops") {
            return Err(error(
                None,
                format!("unknown member {name:?} (a step has \"from\" and \"ops\")"),
            ));
        }
        let from = match members.get("from") {
            Some(Value::Number(n)) => match n.as_u64().and_then(|k| u32::try_from(k).ok()) {
                Some(k) if k < u32::MAX => k,
                _ => {
                    return Err(error(
                        None,
                        format!(
                            "\"from\" is a whole number from 0 to {}, not {n}",
                            u32::MAX - 1
                        ),
                    ))
                }
            },
            Some(other) => {
                return Err(error(
                    None,
                    format!("\"from\" is a number, not {}", kind_of(other)),
                ))
            }
            None => return Err(error(None, "\"from\" is missing".into())),
        };
        let items = match members.get("ops") {
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(error(
                    Some(from),
                    format!("\"ops\" is an array, not {}", kind_of(other)),
                ))
            }
            None => return Err(error(Some(from), "\"ops\" is missing".into())),
        };
        let ops = items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                operation(item).map_err(|(op, path, reason)| StepError {
                    index: Some(index),
                    from: Some(from),
                    op,
                    path,
                    reason,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(DeclarativeStep { from, ops })
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[StepOp] {
        &self.ops
    }

    /// Runs every operation, in order, on a copy of `state` (a plain JSON object) and returns
    /// the upgraded state; on the first failure the error names the operation, and `state` is
    /// untouched (it is only read). Fails as well when `state` is not a plain object, or when
    /// the result is not a state the codec accepts (index `None`).
    pub fn apply(&self, state: &Value) -> Result<Value, StepError> {
        let whole = |reason: String| StepError {
            index: None,
            from: Some(self.from),
            op: None,
            path: None,
            reason,
        };
        if !codec::is_plain_object(state) {
            return Err(whole(format!(
                "a state is a plain object, not {}",
                kind_of(state)
            )));
        }
        let mut out = state.clone();
        for (index, op) in self.ops.iter().enumerate() {
            apply_one(&mut out, op).map_err(|reason| StepError {
                index: Some(index),
                from: Some(self.from),
                op: Some(op.name()),
                path: Some(op.path().to_string()),
                reason,
            })?;
        }
        if !codec::is_plain_object(&out) {
            return Err(whole(format!(
                "the upgraded state is {}, not a plain object",
                kind_of(&out)
            )));
        }
        codec::validate(&out, 1)
            .map_err(|e| whole(format!("the upgraded state cannot be stored: {e}")))?;
        Ok(out)
    }
}

/// Parses the open option's value: an array of steps ([`DeclarativeStep::from_value`]), in the
/// order given; no two may have the same `from`. An empty array is no steps.
pub fn parse_steps(v: &Value) -> Result<Vec<DeclarativeStep>, StepError> {
    let Value::Array(items) = v else {
        return Err(StepError {
            index: None,
            from: None,
            op: None,
            path: None,
            reason: format!("the schema steps are an array of steps, not {}", kind_of(v)),
        });
    };
    let mut seen: HashMap<u32, usize> = HashMap::new();
    let mut steps = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let step = DeclarativeStep::from_value(item).map_err(|mut e| {
            if e.from.is_none() {
                e.reason = format!("element {position} of the list: {}", e.reason);
            }
            e
        })?;
        if let Some(first) = seen.insert(step.from, position) {
            return Err(StepError {
                index: None,
                from: Some(step.from),
                op: None,
                path: None,
                reason: format!(
                    "two steps have \"from\" {} (elements {first} and {position} of the list)",
                    step.from
                ),
            });
        }
        steps.push(step);
    }
    Ok(steps)
}

/// A parse failure of one operation: its `op` (when known), its `path` text (when read), why.
type OpFailure = (Option<&'static str>, Option<String>, String);

fn operation(item: &Value) -> Result<StepOp, OpFailure> {
    let Value::Object(members) = item else {
        return Err((
            None,
            None,
            format!("an operation is an object, not {}", kind_of(item)),
        ));
    };
    let op: &'static str = match members.get("op") {
        Some(Value::String(op)) => match op.as_str() {
            "merge" => "merge",
            "default" => "default",
            "set" => "set",
            "remove" => "remove",
            "rename" => "rename",
            "move" => "move",
            other => {
                return Err((
                    None,
                    None,
                    format!(
                        "unknown op {other:?} (one of merge, default, set, remove, rename, move)"
                    ),
                ))
            }
        },
        Some(other) => {
            return Err((
                None,
                None,
                format!("\"op\" is a string, not {}", kind_of(other)),
            ))
        }
        None => return Err((None, None, "\"op\" is missing".into())),
    };
    let allowed: &[&str] = match op {
        "merge" => &["op", "path", "value"],
        "default" | "set" => &["op", "path", "value"],
        "remove" => &["op", "path"],
        "rename" => &["op", "path", "to"],
        _ => &["op", "from", "path"],
    };
    // The path as written, for errors, once it is known to be a string.
    let path_text = match members.get("path") {
        Some(Value::String(p)) => Some(p.clone()),
        _ => None,
    };
    let fail = |reason: String| (Some(op), path_text.clone(), reason);
    if let Some(name) = members.keys().find(|k| !allowed.contains(&k.as_str())) {
        let list = allowed
            .iter()
            .map(|m| format!("{m:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(fail(format!("unknown member {name:?} (a {op} has {list})")));
    }
    let pointer = |member: &str| -> Result<Option<Pointer>, OpFailure> {
        match members.get(member) {
            Some(Value::String(text)) => Pointer::parse(text)
                .map(Some)
                .map_err(|e| fail(format!("{member:?}: {e}"))),
            Some(other) => Err(fail(format!(
                "{member:?} is a string, not {}",
                kind_of(other)
            ))),
            None => Ok(None),
        }
    };
    let required = |member: &str| -> Result<Pointer, OpFailure> {
        let pointer = pointer(member)?.ok_or_else(|| fail(format!("{member:?} is missing")))?;
        if pointer.is_root() {
            return Err(fail(format!(
                "{member:?} is the whole state (\"\"), which only a merge may name"
            )));
        }
        Ok(pointer)
    };
    // `"value": null` is a value; only an absent member is missing. Values are checked by the
    // codec at the depth they will have in the state.
    let value = |path: &Pointer| -> Result<Value, OpFailure> {
        let value = members
            .get("value")
            .cloned()
            .ok_or_else(|| fail("\"value\" is missing".into()))?;
        codec::validate(&value, path.tokens().len().saturating_add(1))
            .map_err(|e| fail(format!("\"value\": {e}")))?;
        Ok(value)
    };
    Ok(match op {
        "merge" => {
            let path = pointer("path")?.unwrap_or_else(Pointer::root);
            let value = value(&path)?;
            if path.is_root() && !codec::is_plain_object(&value) {
                return Err(fail(format!(
                    "a merge into the whole state has a plain object as \"value\", not {} (the \
                     state stays an object)",
                    kind_of(&value)
                )));
            }
            if value.is_null() {
                return Err(fail(
                    "a merge's \"value\" is not null (to delete a member, use remove)".into(),
                ));
            }
            StepOp::Merge { path, value }
        }
        "default" => {
            let path = required("path")?;
            let value = value(&path)?;
            StepOp::Default { path, value }
        }
        "set" => {
            let path = required("path")?;
            let value = value(&path)?;
            StepOp::Set { path, value }
        }
        "remove" => StepOp::Remove {
            path: required("path")?,
        },
        "rename" => {
            let path = required("path")?;
            let to = match members.get("to") {
                Some(Value::String(to)) => to.clone(),
                Some(other) => {
                    return Err(fail(format!(
                        "\"to\" is a string (the new member name), not {}",
                        kind_of(other)
                    )))
                }
                None => return Err(fail("\"to\" is missing".into())),
            };
            StepOp::Rename { path, to }
        }
        _ => {
            let from = required("from")?;
            let path = required("path")?;
            if from == path {
                return Err(fail(format!("\"from\" and \"path\" are both {from:?}")));
            }
            if from.is_proper_prefix_of(&path) {
                return Err(fail(format!(
                    "cannot move \"{from}\" into its own child \"{path}\""
                )));
            }
            StepOp::Move { from, path }
        }
    })
}

/// Runs one operation on `state` (a plain object); the failure's reason.
fn apply_one(state: &mut Value, op: &StepOp) -> Result<(), String> {
    match op {
        StepOp::Merge { path, value } => {
            let Some((parent_path, last)) = path.split_last() else {
                return merge_patch(state, value, 1).map_err(|e| e.to_string());
            };
            let depth = path.tokens().len().saturating_add(1);
            let parent = parent_of(state, path, &parent_path, true)?
                .ok_or_else(|| "the parent could not be created".to_string())?;
            match parent.get_mut(last) {
                Some(slot) => merge_patch(slot, value, depth).map_err(|e| e.to_string()),
                None => {
                    let mut slot = Value::Null;
                    merge_patch(&mut slot, value, depth).map_err(|e| e.to_string())?;
                    parent.insert(last.to_owned(), slot);
                    Ok(())
                }
            }
        }
        StepOp::Default { path, value } => {
            let (parent, last) = member_of(state, path, true)?;
            if let Some(parent) = parent {
                if !parent.contains_key(last) {
                    parent.insert(last.to_owned(), value.clone());
                }
            }
            Ok(())
        }
        StepOp::Set { path, value } => {
            let (parent, last) = member_of(state, path, true)?;
            if let Some(parent) = parent {
                // An existing member is replaced in its place.
                parent.insert(last.to_owned(), value.clone());
            }
            Ok(())
        }
        StepOp::Remove { path } => {
            let (parent, last) = member_of(state, path, false)?;
            if let Some(parent) = parent {
                // shift_remove keeps the order of the remaining members.
                parent.shift_remove(last);
            }
            Ok(())
        }
        StepOp::Rename { path, to } => {
            let (parent, last) = member_of(state, path, false)?;
            let Some(parent) = parent else {
                return Ok(());
            };
            if !parent.contains_key(last) || last == to {
                return Ok(());
            }
            if parent.contains_key(to) {
                let target = sibling(path, to);
                return Err(format!("{target:?} exists already"));
            }
            // Rebuilt so the member keeps its position among its siblings.
            let old = std::mem::take(parent);
            for (name, member) in old {
                if name == last {
                    parent.insert(to.clone(), member);
                } else {
                    parent.insert(name, member);
                }
            }
            Ok(())
        }
        StepOp::Move { from, path } => {
            if from == path || from.is_proper_prefix_of(path) {
                // Refused when parsed; kept so a hand-built step cannot lose the value.
                return Err(format!(
                    "cannot move \"{from}\" into itself or its own child \"{path}\""
                ));
            }
            let (source, last) = member_of(state, from, false)?;
            let Some(value) = source.and_then(|parent| parent.shift_remove(last)) else {
                return Ok(());
            };
            let (target, last) = member_of(state, path, true)?;
            let Some(target) = target else {
                return Err("the target's parent could not be created".into());
            };
            if target.contains_key(last) {
                return Err(format!(
                    "cannot move \"{from}\" onto \"{path}\": \"{path}\" exists already"
                ));
            }
            target.insert(last.to_owned(), value);
            Ok(())
        }
    }
}

/// A JSON object (with its members in order).
type Object = Map<String, Value>;

/// The object holding the member `path` names (never the root), and the member's name; the
/// object is `None` when a parent is missing and `create` is false.
fn member_of<'a, 'p>(
    state: &'a mut Value,
    path: &'p Pointer,
    create: bool,
) -> Result<(Option<&'a mut Object>, &'p str), String> {
    let Some((last, _)) = path.tokens().split_last() else {
        return Err("the whole state names no member".into());
    };
    let parent_path = path
        .split_last()
        .map(|(parent, _)| parent)
        .unwrap_or_else(Pointer::root);
    Ok((parent_of(state, path, &parent_path, create)?, last.as_str()))
}

/// Walks `parent_path` (a prefix of `path`, which is only named in errors) from `state` through
/// plain objects. A missing member is created as an empty object when `create`, else the walk
/// ends with `None`; a member that is not a plain object fails the walk.
fn parent_of<'a>(
    state: &'a mut Value,
    path: &Pointer,
    parent_path: &Pointer,
    create: bool,
) -> Result<Option<&'a mut Object>, String> {
    if !codec::is_plain_object(state) {
        return Err(format!(
            "the state is {}, not a plain object",
            kind_of(state)
        ));
    }
    let Value::Object(top) = state else {
        return Ok(None); // Not reached: checked just above.
    };
    let mut at = top;
    for (i, token) in parent_path.tokens().iter().enumerate() {
        if !at.contains_key(token) {
            if !create {
                return Ok(None);
            }
            at.insert(token.clone(), Value::Object(Map::new()));
        }
        let Some(next) = at.get_mut(token) else {
            return Ok(None);
        };
        // Checked on a shared view first: only plain objects are walked into.
        if !codec::is_plain_object(next) {
            let prefix = render(&parent_path.tokens()[..=i]);
            return Err(format!(
                "{path}: steps name object members; {prefix} is {}",
                kind_of(next)
            ));
        }
        let Value::Object(map) = next else {
            return Ok(None); // Not reached: checked just above.
        };
        at = map;
    }
    Ok(Some(at))
}

/// The pointer to the member `name` next to the one `path` names (`path` is never the root).
fn sibling(path: &Pointer, name: &str) -> String {
    let mut tokens = path.tokens().to_vec();
    if let Some(last) = tokens.last_mut() {
        name.clone_into(last);
    }
    render(&tokens)
}

/// Tokens as a pointer's text, escaped as [`Pointer`]'s `Display` does.
fn render(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(map) => match codec::tag_of(map) {
            Some(tag) => format!("a tagged value ({tag})"),
            None => "an object".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(v: Value) -> DeclarativeStep {
        DeclarativeStep::from_value(&v).unwrap()
    }

    /// Applies one operation, as step 1 -> 2.
    fn run(op: Value, state: Value) -> Result<Value, StepError> {
        step(json!({"from": 1, "ops": [op]})).apply(&state)
    }

    /// The compact text of a value: shows member order.
    fn text(v: &Value) -> String {
        String::from_utf8(crate::json::to_vec(v)).unwrap()
    }

    fn parse_error(v: Value) -> StepError {
        DeclarativeStep::from_value(&v).unwrap_err()
    }

    #[test]
    fn merge_patches_the_whole_state_or_a_path() {
        let got = run(
            json!({"op": "merge", "value": {"a": null, "c": 3, "b": {"y": 2}}}),
            json!({"a": 1, "b": {"x": 1}}),
        )
        .unwrap();
        assert_eq!(text(&got), r#"{"b":{"x":1,"y":2},"c":3}"#);
        let got = run(
            json!({"op": "merge", "path": "/b", "value": {"x": null, "z": 0}}),
            json!({"a": 1, "b": {"x": 1, "y": 2}}),
        )
        .unwrap();
        assert_eq!(text(&got), r#"{"a":1,"b":{"y":2,"z":0}}"#);
        // Missing parents are created; a non-object at the path is replaced (RFC 7396).
        let got = run(
            json!({"op": "merge", "path": "/p/q", "value": {"r": 1}}),
            json!({"a": 1}),
        )
        .unwrap();
        assert_eq!(text(&got), r#"{"a":1,"p":{"q":{"r":1}}}"#);
        let got = run(
            json!({"op": "merge", "path": "/a", "value": {"r": 1}}),
            json!({"a": [1, 2], "b": 0}),
        )
        .unwrap();
        assert_eq!(text(&got), r#"{"a":{"r":1},"b":0}"#);
    }

    #[test]
    fn default_fills_in_only_where_missing() {
        let op = json!({"op": "default", "path": "/messages", "value": []});
        let got = run(op.clone(), json!({"a": 1})).unwrap();
        assert_eq!(text(&got), r#"{"a":1,"messages":[]}"#);
        let got = run(op.clone(), json!({"messages": [1], "a": 1})).unwrap();
        assert_eq!(text(&got), r#"{"messages":[1],"a":1}"#);
        // null is a value: left alone.
        let got = run(op, json!({"messages": null})).unwrap();
        assert_eq!(got, json!({"messages": null}));
        let got = run(
            json!({"op": "default", "path": "/meta/tags", "value": {"t": 1}}),
            json!({}),
        )
        .unwrap();
        assert_eq!(got, json!({"meta": {"tags": {"t": 1}}}));
    }

    #[test]
    fn set_replaces_in_place_or_appends() {
        let op = json!({"op": "set", "path": "/x", "value": 1});
        let got = run(op.clone(), json!({"x": "old", "y": 2})).unwrap();
        assert_eq!(text(&got), r#"{"x":1,"y":2}"#);
        let got = run(op, json!({"y": 2})).unwrap();
        assert_eq!(text(&got), r#"{"y":2,"x":1}"#);
        let got = run(
            json!({"op": "set", "path": "/a/b/c", "value": null}),
            json!({"a": {"z": 0}}),
        )
        .unwrap();
        assert_eq!(text(&got), r#"{"a":{"z":0,"b":{"c":null}}}"#);
    }

    #[test]
    fn remove_where_present_and_nothing_where_absent() {
        let op = json!({"op": "remove", "path": "/legacy"});
        let got = run(op.clone(), json!({"a": 1, "legacy": 2, "z": 3})).unwrap();
        assert_eq!(text(&got), r#"{"a":1,"z":3}"#);
        assert_eq!(run(op, json!({"a": 1})).unwrap(), json!({"a": 1}));
        // A missing parent is absence too.
        let op = json!({"op": "remove", "path": "/x/y/z"});
        assert_eq!(run(op, json!({"a": 1})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn rename_keeps_the_position_and_fails_on_a_clash() {
        let op = json!({"op": "rename", "path": "/user/nick", "to": "name"});
        let got = run(
            op.clone(),
            json!({"user": {"id": 7, "nick": "ada", "age": 36}}),
        )
        .unwrap();
        assert_eq!(text(&got), r#"{"user":{"id":7,"name":"ada","age":36}}"#);
        assert_eq!(
            run(op.clone(), json!({"user": {"id": 7}})).unwrap(),
            json!({"user": {"id": 7}})
        );
        assert_eq!(run(op.clone(), json!({})).unwrap(), json!({}));
        let err = run(op, json!({"user": {"nick": "ada", "name": "Ada"}})).unwrap_err();
        assert_eq!(err.index, Some(0));
        assert_eq!(err.from, Some(1));
        assert_eq!(
            err.to_string(),
            r#"schema step 1 -> 2, operation 0 (rename "/user/nick"): "/user/name" exists already"#
        );
        // Renaming to its own name changes nothing.
        let op = json!({"op": "rename", "path": "/a", "to": "a"});
        assert_eq!(run(op, json!({"a": 1})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn move_where_present_and_fails_on_a_clash() {
        let op = json!({"op": "move", "from": "/a/b", "path": "/c/d"});
        let got = run(op.clone(), json!({"a": {"b": 1, "k": 2}, "z": 0})).unwrap();
        assert_eq!(text(&got), r#"{"a":{"k":2},"z":0,"c":{"d":1}}"#);
        assert_eq!(run(op.clone(), json!({"a": {}})).unwrap(), json!({"a": {}}));
        assert_eq!(run(op.clone(), json!({})).unwrap(), json!({}));
        let err = run(op, json!({"a": {"b": 1}, "c": {"d": 2}})).unwrap_err();
        assert_eq!(err.index, Some(0));
        assert!(err.to_string().contains("\"/c/d\" exists already"), "{err}");
        // Moving up onto its own parent: the parent exists.
        let op = json!({"op": "move", "from": "/a/b", "path": "/a"});
        assert!(run(op, json!({"a": {"b": 1}})).is_err());
    }

    #[test]
    fn moving_into_its_own_child_or_onto_itself_is_refused() {
        let err =
            parse_error(json!({"from": 1, "ops": [{"op": "move", "from": "/a", "path": "/a/b"}]}));
        assert!(err.reason.contains("into its own child"), "{err}");
        assert_eq!(err.index, Some(0));
        let err =
            parse_error(json!({"from": 1, "ops": [{"op": "move", "from": "/a", "path": "/a"}]}));
        assert!(err.reason.contains("are both"), "{err}");
        // A hand-built op is refused when applied too.
        let op = StepOp::Move {
            from: Pointer::parse("/a").unwrap(),
            path: Pointer::parse("/a/b").unwrap(),
        };
        assert!(apply_one(&mut json!({"a": {}}), &op).is_err());
    }

    #[test]
    fn paths_through_arrays_or_scalars_fail() {
        let err = run(
            json!({"op": "remove", "path": "/a/0"}),
            json!({"a": [1, 2]}),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"schema step 1 -> 2, operation 0 (remove "/a/0"): /a/0: steps name object members; /a is an array"#
        );
        for (op, state) in [
            (
                json!({"op": "set", "path": "/a/b/c", "value": 1}),
                json!({"a": {"b": 5}}),
            ),
            (
                json!({"op": "default", "path": "/a/b", "value": 1}),
                json!({"a": null}),
            ),
            (
                json!({"op": "merge", "path": "/a/b", "value": {}}),
                json!({"a": "s"}),
            ),
            (
                json!({"op": "rename", "path": "/a/b", "to": "c"}),
                json!({"a": true}),
            ),
            (
                json!({"op": "move", "from": "/a/b", "path": "/c"}),
                json!({"a": [{"b": 1}]}),
            ),
            (
                json!({"op": "move", "from": "/a", "path": "/c/d"}),
                json!({"a": 1, "c": 2}),
            ),
            (
                json!({"op": "set", "path": "/d/x", "value": 1}),
                json!({"d": {"$date": "2026-01-01T00:00:00.000Z"}}),
            ),
        ] {
            let err = run(op.clone(), state.clone()).unwrap_err();
            assert!(
                err.reason.contains("steps name object members"),
                "{op} on {state}: {err}"
            );
        }
    }

    #[test]
    fn a_failed_apply_leaves_the_input_untouched() {
        let state = json!({"user": {"nick": "ada", "name": "Ada"}, "legacy": 1});
        let before = state.clone();
        let s = step(json!({"from": 3, "ops": [
            {"op": "remove", "path": "/legacy"},
            {"op": "set", "path": "/x", "value": 1},
            {"op": "rename", "path": "/user/nick", "to": "name"}
        ]}));
        let err = s.apply(&state).unwrap_err();
        assert_eq!(
            (err.from, err.index, err.op),
            (Some(3), Some(2), Some("rename"))
        );
        assert_eq!(text(&state), text(&before));
    }

    #[test]
    fn the_result_must_be_a_storable_state() {
        // Removing a member can leave an object shaped like a malformed tagged value.
        let err = run(
            json!({"op": "remove", "path": "/x/y"}),
            json!({"x": {"$set": 5, "y": 1}}),
        )
        .unwrap_err();
        assert_eq!(err.index, None);
        assert!(err.reason.contains("cannot be stored"), "{err}");
        let err = run(json!({"op": "remove", "path": "/a"}), json!([1])).unwrap_err();
        assert!(err.reason.contains("plain object"), "{err}");
    }

    #[test]
    fn a_v1_conversation_state_becomes_v2() {
        let v1 = json!({
            "status": "idle",
            "msgs": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}],
            "user": {"nick": "ada"},
            "debug": true
        });
        let s = step(json!({"from": 1, "ops": [
            {"op": "rename", "path": "/msgs", "to": "messages"},
            {"op": "rename", "path": "/user/nick", "to": "name"},
            {"op": "default", "path": "/messages", "value": []},
            {"op": "move", "from": "/status", "path": "/run/status"},
            {"op": "remove", "path": "/debug"},
            {"op": "default", "path": "/user/locale", "value": "en"},
            {"op": "merge", "value": {"version_note": "v2", "run": {"attempts": 0}}}
        ]}));
        let v2 = s.apply(&v1).unwrap();
        assert_eq!(
            text(&v2),
            r#"{"messages":[{"role":"user","text":"hi"},{"role":"assistant","text":"hello"}],"user":{"name":"ada","locale":"en"},"run":{"status":"idle","attempts":0},"version_note":"v2"}"#
        );
        // The same step on an older, sparser state: absent members are no failure.
        let sparse = s.apply(&json!({"user": {}})).unwrap();
        assert_eq!(
            text(&sparse),
            r#"{"user":{"locale":"en"},"messages":[],"version_note":"v2","run":{"attempts":0}}"#
        );
        assert_eq!(s.ops().len(), 7);
        assert_eq!(s.ops()[3].name(), "move");
        assert_eq!(s.ops()[3].path().to_string(), "/run/status");
    }

    #[test]
    fn parse_errors_say_what_is_wrong() {
        let cases = [
            (json!([]), "a step is an object, not an array"),
            (json!({"ops": []}), "\"from\" is missing"),
            (
                json!({"from": "1", "ops": []}),
                "\"from\" is a number, not a string",
            ),
            (json!({"from": -1, "ops": []}), "whole number"),
            (json!({"from": 1.5, "ops": []}), "whole number"),
            (json!({"from": 4294967295u64, "ops": []}), "whole number"),
            (json!({"from": 1}), "\"ops\" is missing"),
            (
                json!({"from": 1, "ops": {}}),
                "\"ops\" is an array, not an object",
            ),
            (
                json!({"from": 1, "ops": [], "to": 2}),
                "unknown member \"to\"",
            ),
            (
                json!({"from": 1, "ops": [7]}),
                "an operation is an object, not a number",
            ),
            (
                json!({"from": 1, "ops": [{"path": "/a"}]}),
                "\"op\" is missing",
            ),
            (
                json!({"from": 1, "ops": [{"op": 1}]}),
                "\"op\" is a string, not a number",
            ),
            (
                json!({"from": 1, "ops": [{"op": "add", "path": "/a"}]}),
                "unknown op \"add\"",
            ),
            (
                json!({"from": 1, "ops": [{"op": "remove"}]}),
                "\"path\" is missing",
            ),
            (
                json!({"from": 1, "ops": [{"op": "remove", "path": 3}]}),
                "\"path\" is a string, not a number",
            ),
            (
                json!({"from": 1, "ops": [{"op": "remove", "path": "a"}]}),
                "is not a JSON Pointer",
            ),
            (
                json!({"from": 1, "ops": [{"op": "remove", "path": "/a~2"}]}),
                "is not a JSON Pointer",
            ),
            (
                json!({"from": 1, "ops": [{"op": "remove", "path": ""}]}),
                "only a merge may name",
            ),
            (
                json!({"from": 1, "ops": [{"op": "set", "path": "/a"}]}),
                "\"value\" is missing",
            ),
            (
                json!({"from": 1, "ops": [{"op": "set", "path": "/a", "value": 1, "vaule": 2}]}),
                "unknown member \"vaule\"",
            ),
            (
                json!({"from": 1, "ops": [{"op": "rename", "path": "/a", "from": "/b", "to": "c"}]}),
                "unknown member \"from\"",
            ),
            (
                json!({"from": 1, "ops": [{"op": "rename", "path": "/a"}]}),
                "\"to\" is missing",
            ),
            (
                json!({"from": 1, "ops": [{"op": "rename", "path": "/a", "to": ["b"]}]}),
                "\"to\" is a string",
            ),
            (
                json!({"from": 1, "ops": [{"op": "move", "path": "/a"}]}),
                "\"from\" is missing",
            ),
            (
                json!({"from": 1, "ops": [{"op": "move", "from": "", "path": "/a"}]}),
                "only a merge may name",
            ),
            (
                json!({"from": 1, "ops": [{"op": "merge", "value": [1]}]}),
                "plain object",
            ),
            (
                json!({"from": 1, "ops": [{"op": "merge", "path": "/a", "value": null}]}),
                "use remove",
            ),
            (
                json!({"from": 1, "ops": [{"op": "set", "path": "/a", "value": {"$bigint": "x"}}]}),
                "$bigint",
            ),
        ];
        for (input, want) in cases {
            let err = parse_error(input.clone());
            assert!(
                err.to_string().contains(want),
                "{input}: {err} (wanted {want:?})"
            );
        }
        let err = parse_error(
            json!({"from": 2, "ops": [{"op": "remove"}, {"op": "remove", "path": "a"}]}),
        );
        assert_eq!(
            (err.from, err.index, err.op),
            (Some(2), Some(0), Some("remove"))
        );
        let err = parse_error(
            json!({"from": 2, "ops": [{"op": "remove", "path": "/a"}, {"op": "remove", "path": "a"}]}),
        );
        assert_eq!(err.index, Some(1));
        assert_eq!(err.path.as_deref(), Some("a"));
        assert!(
            err.to_string()
                .starts_with("schema step 2 -> 3, operation 1 (remove \"a\"): "),
            "{err}"
        );
    }

    #[test]
    fn parse_steps_reads_a_list_with_distinct_froms() {
        let steps = parse_steps(&json!([
            {"from": 2, "ops": [{"op": "remove", "path": "/b"}]},
            {"from": 1, "ops": []}
        ]))
        .unwrap();
        assert_eq!(steps.iter().map(|s| s.from).collect::<Vec<_>>(), [2, 1]);
        assert!(parse_steps(&json!([])).unwrap().is_empty());
        let err = parse_steps(&json!({"from": 1, "ops": []})).unwrap_err();
        assert!(err.reason.contains("array of steps"), "{err}");
        let err = parse_steps(
            &json!([{"from": 1, "ops": []}, {"from": 2, "ops": []}, {"from": 1, "ops": []}]),
        )
        .unwrap_err();
        assert_eq!(err.from, Some(1));
        assert_eq!(
            err.to_string(),
            "schema step 1 -> 2: two steps have \"from\" 1 (elements 0 and 2 of the list)"
        );
        let err = parse_steps(&json!([{"from": 1, "ops": []}, {"ops": []}])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "schema step: element 1 of the list: \"from\" is missing"
        );
    }

    #[test]
    fn pointers_with_escapes_name_members_with_slashes_and_tildes() {
        let got = run(
            json!({"op": "rename", "path": "/a~1b", "to": "c~d"}),
            json!({"a/b": 1}),
        )
        .unwrap();
        assert_eq!(got, json!({"c~d": 1}));
        let err = run(
            json!({"op": "rename", "path": "/x/a~1b", "to": "c/d"}),
            json!({"x": {"a/b": 1, "c/d": 2}}),
        )
        .unwrap_err();
        assert!(err.reason.contains("\"/x/c~1d\" exists already"), "{err}");
    }
}
