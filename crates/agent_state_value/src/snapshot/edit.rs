//! RFC 6902 JSON Patch operations and RFC 6901 JSON Pointer reads on a state's tree (see
//! `node`): an operation rebuilds the objects and arrays on its path and shares everything
//! else, so an `add` at `/msgs/-` of an array of 1,500 messages neither copies nor encodes the
//! other messages; a read encodes the part it reads only.
//!
//! The meaning is [`JsonPatch::apply`]'s, on values (the reference, in `json_patch`). The
//! tree takes what it can do exactly and cheaply: `add`, `remove`, `replace` and `test` below
//! the root, with their values checked by the codec where they land and every object on their
//! path that is shaped like a tagged value checked again. Anything else (an operation on the
//! root, `move`, `copy`) and any failure (a path that is not there, a `test` that does not
//! hold, a result the codec would refuse) is left to the value implementation
//! (`crate::operations`), which then gives the answer, error and message included; so the
//! tree's result is either the value implementation's, byte for byte, or none.

use std::sync::Arc;

use serde_json::Value;

use super::chunks::List;
use super::node::{tag_shaped_members, Members, Node};
use super::{Member, Snapshot};
use crate::codec;
use crate::error::Result;
use crate::json_patch::{json_equal, JsonPatch, Operation};
use crate::pointer::{array_index, Index};

/// What an operation does at the end of its path.
enum Edit {
    Add(Node),
    Remove,
    Replace(Node),
}

impl Snapshot {
    /// `operations` applied on the tree and checked as a new state (a plain object the codec
    /// accepts, within `max_bytes`); `None` when they are left to the value implementation
    /// (see the module doc).
    pub(crate) fn apply_on_tree(
        &self,
        operations: &JsonPatch,
        max_bytes: usize,
    ) -> Option<Result<Snapshot>> {
        let mut members = self.members.0.clone();
        for op in operations.operations() {
            let tokens = op.path().tokens();
            let edit = match op {
                Operation::Add { value, .. } => Edit::Add(checked(value, tokens)?),
                Operation::Replace { value, .. } => Edit::Replace(checked(value, tokens)?),
                Operation::Remove { .. } => Edit::Remove,
                Operation::Test { value, .. } => {
                    let at = node_at(&members, tokens)?;
                    if !json_equal(at.value(), value) {
                        return None;
                    }
                    continue;
                }
                Operation::Move { .. } | Operation::Copy { .. } => return None,
            };
            members = edit_members(&members, tokens, edit)?;
            // The objects on the path that are shaped like tagged values must be well-formed
            // ones (an object at `tokens[..k]` is at nesting level k + 1). Checked after each
            // operation: a later one may move what this one changed to another index.
            for k in 1..tokens.len() {
                let Some(at) = node_at(&members, &tokens[..k]) else {
                    break;
                };
                if at.object_members().is_some_and(tag_shaped_members)
                    && codec::validate(at.value(), k + 1).is_err()
                {
                    return None;
                }
            }
        }
        if tag_shaped_members(&members) {
            return None;
        }
        let next = Snapshot::of(members);
        Some(next.fits(max_bytes, "state").map(|()| next))
    }

    /// The compact encoding of the value at `tokens` (not the root), if there is one.
    pub(crate) fn json_at(&self, tokens: &[String]) -> Option<Vec<u8>> {
        let at = node_at(&self.members.0, tokens)?;
        let mut out = Vec::with_capacity(at.len());
        at.write(&mut out);
        Some(out)
    }

    /// The last `n` elements of the array at `tokens` (not the root), as a JSON array; `None`
    /// when there is nothing there, the value there when it is not an array.
    pub(crate) fn tail_at(
        &self,
        tokens: &[String],
        n: usize,
    ) -> Option<std::result::Result<Vec<u8>, &Value>> {
        let at = node_at(&self.members.0, tokens)?;
        let Some(items) = at.array_items() else {
            return Some(Err(at.value()));
        };
        let mut out = b"[".to_vec();
        let skip = items.len().saturating_sub(n);
        for (i, item) in items.iter().skip(skip).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item.write(&mut out);
        }
        out.push(b']');
        Some(Ok(out))
    }
}

/// `value` as a node, if the codec accepts it at `tokens` (a stored patch is not checked on
/// its way in, and an operation's value sits one level below its place's parent).
fn checked(value: &Value, tokens: &[String]) -> Option<Node> {
    codec::validate(value, tokens.len() + 1).ok()?;
    Some(Node::from_value(value.clone()))
}

/// The node at `tokens` (not empty) below the top-level `members`, as a pointer reads it:
/// into objects (tagged values included) by name and arrays by index.
fn node_at<'a>(members: &'a Members, tokens: &[String]) -> Option<&'a Node> {
    let (first, rest) = tokens.split_first()?;
    let mut at = &members.iter().find(|m| m.is_named(first))?.node;
    for token in rest {
        at = if let Some(members) = at.object_members() {
            &members.iter().find(|m| m.is_named(token))?.node
        } else {
            match array_index(token)? {
                Index::At(i) => at.array_items()?.get(i)?,
                Index::End => return None,
            }
        };
    }
    Some(at)
}

/// `members` with `edit` done at `tokens` below them (new lists along the path, the rest
/// shared), or `None` when it does not apply.
fn edit_members<L: List<Arc<Member>>>(members: &L, tokens: &[String], edit: Edit) -> Option<L> {
    let (first, rest) = tokens.split_first()?;
    let slot = members.find(|m| m.is_named(first));
    let existing = slot.and_then(|i| members.at(i));
    let mut out = members.clone();
    match (rest.is_empty(), edit, slot, existing) {
        // An existing member is replaced in its place; a new one goes last.
        (true, Edit::Add(node) | Edit::Replace(node), Some(i), Some(member)) => {
            out.put(i, Arc::new(member.with_node(node)));
        }
        (true, Edit::Add(node), None, _) => out.add(Arc::new(Member::named(first.clone(), node))),
        (true, Edit::Remove, Some(i), _) => out.take_out(i),
        (false, edit, Some(i), Some(member)) => {
            let node = edit_node(&member.node, rest, edit)?;
            out.put(i, Arc::new(member.with_node(node)));
        }
        _ => return None,
    }
    Some(out)
}

/// `node` with `edit` done at `tokens` below it, or `None` when it does not apply.
fn edit_node(node: &Node, tokens: &[String], edit: Edit) -> Option<Node> {
    if let Some(members) = node.object_members() {
        return edit_members(members, tokens, edit).map(Node::object);
    }
    let items = node.array_items()?;
    let (first, rest) = tokens.split_first()?;
    let index = array_index(first)?;
    let mut out = items.clone();
    match (rest.is_empty(), edit, index) {
        (true, Edit::Add(node), Index::End) => out.push(Arc::new(node)),
        (true, Edit::Add(node), Index::At(i)) if i <= items.len() => {
            out.insert(i, Arc::new(node));
        }
        (true, Edit::Replace(node), Index::At(i)) if i < items.len() => {
            out.set(i, Arc::new(node));
        }
        (true, Edit::Remove, Index::At(i)) if i < items.len() => out.remove(i),
        (false, edit, Index::At(i)) => {
            let node = edit_node(items.get(i)?, rest, edit)?;
            out.set(i, Arc::new(node));
        }
        _ => return None,
    }
    Some(Node::array(out))
}
