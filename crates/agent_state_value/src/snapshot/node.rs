//! The values inside a state, at every nesting level, shared between a state and the next.
//!
//! A [`Node`] is either a *leaf*, a value as its compact encoding (read from the store, given
//! by a caller, or written by a merge), or an object or array a write *built*: its members or
//! elements, each an `Arc` shared with the states before it where the write left it as it
//! was, kept in shared chunks (`super::chunks`), so that a write copies the chunk it changes
//! and not a reference to every member. A leaf's value is parsed from its encoding when first
//! asked for, and its members (or elements) are split out of the encoding, sharing its bytes,
//! when a write first descends into it. A built object or array keeps no encoding of its
//! own, only its length: its members' encodings are written straight into the output when the
//! state is assembled, so a write costs what it changes (the path down to the change, and the
//! change) at every level, and memory holds each byte of a state once.
//!
//! A merge ([`merge`]) descends into plain objects only; everything else (scalars, arrays,
//! the codec's tagged values) is replaced whole, as [`merge_patch`] does on values. Its result
//! is byte for byte what [`merge_patch`] and a compact encoding give. Arrays are built by
//! JSON Patch operations (`super::edit`).

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::chunks::{Chunks, Weighed};
use super::Member;
use crate::codec;
use crate::error::Result;
use crate::merge::merge_patch;

/// Bytes shared by reference count: `buf[start..end]`. A leaf split out of a larger encoding
/// shares that encoding's buffer.
#[derive(Clone)]
pub(crate) struct Bytes {
    buf: Arc<[u8]>,
    start: usize,
    end: usize,
}

impl Bytes {
    /// Bytes of their own.
    pub(crate) fn new(bytes: Vec<u8>) -> Bytes {
        let end = bytes.len();
        Bytes {
            buf: bytes.into(),
            start: 0,
            end,
        }
    }

    /// `buf[start..end]`, shared.
    pub(crate) fn shared(buf: &Arc<[u8]>, start: usize, end: usize) -> Bytes {
        Bytes {
            buf: Arc::clone(buf),
            start,
            end,
        }
    }

    /// `self[from..to]`, shared.
    fn slice(&self, from: usize, to: usize) -> Bytes {
        Bytes::shared(&self.buf, self.start + from, self.start + to)
    }

    /// Whether the two hold the same bytes (without reading them when they are the same
    /// range of one buffer).
    fn same(&self, other: &Bytes) -> bool {
        (Arc::ptr_eq(&self.buf, &other.buf) && self.start == other.start && self.end == other.end)
            || **self == **other
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// An object's members, or an array's elements, in shared chunks.
pub(crate) type Members = Chunks<Arc<Member>>;
pub(crate) type Items = Chunks<Arc<Node>>;

impl Weighed for Arc<Member> {
    fn weight(&self) -> usize {
        self.len()
    }
}

impl Weighed for Arc<Node> {
    fn weight(&self) -> usize {
        self.len()
    }
}

/// The length of an object's or array's encoding: brackets, items, commas.
pub(crate) fn container_len<T: Weighed + Clone>(items: &Chunks<T>) -> usize {
    2 + items.weight() + items.len().saturating_sub(1)
}

/// One value of a state (see the module doc).
#[derive(Debug)]
pub(crate) enum Node {
    /// A value as its compact encoding.
    Leaf(Leaf),
    /// An object a write built (see [`Built`]).
    Object(Built),
    /// An array a JSON Patch rebuilt: its elements, shared as an object's members are.
    Array(BuiltArray),
}

/// A value as its compact encoding, its value and (for an object) its members made from the
/// encoding on first use.
#[derive(Debug)]
pub(crate) struct Leaf {
    bytes: Bytes,
    value: OnceLock<Value>,
    /// An object's members, split out of `bytes` the first time a write descends into it.
    members: OnceLock<Members>,
    /// An array's elements, the same way.
    items: OnceLock<Items>,
}

/// An object a write built: its members in order, and the length of its encoding (kept, so
/// a state's size is known without assembling it); its value only when asked for.
#[derive(Debug)]
pub(crate) struct Built {
    members: Members,
    len: usize,
    value: OnceLock<Value>,
}

/// An array a JSON Patch rebuilt, as [`Built`] is an object.
#[derive(Debug)]
pub(crate) struct BuiltArray {
    items: Items,
    len: usize,
    value: OnceLock<Value>,
}

impl Node {
    /// The value `value`, encoded (its value kept).
    pub(crate) fn from_value(value: Value) -> Node {
        let bytes = Bytes::new(crate::json::to_vec(&value));
        Node::Leaf(Leaf {
            bytes,
            value: OnceLock::from(value),
            members: OnceLock::new(),
            items: OnceLock::new(),
        })
    }

    /// The value encoded as `bytes` (compact, as the scanner or serde_json writes it).
    pub(crate) fn from_bytes(bytes: Bytes) -> Node {
        Node::Leaf(Leaf {
            bytes,
            value: OnceLock::new(),
            members: OnceLock::new(),
            items: OnceLock::new(),
        })
    }

    /// The array of `items` (in order).
    pub(crate) fn array(items: Items) -> Node {
        Node::Array(BuiltArray {
            len: container_len(&items),
            items,
            value: OnceLock::new(),
        })
    }

    /// The object of `members` (in order).
    pub(crate) fn object(members: Members) -> Node {
        Node::Object(Built {
            len: container_len(&members),
            members,
            value: OnceLock::new(),
        })
    }

    /// The length of the value's compact encoding.
    pub(crate) fn len(&self) -> usize {
        match self {
            Node::Leaf(leaf) => leaf.bytes.len(),
            Node::Object(built) => built.len,
            Node::Array(built) => built.len,
        }
    }

    /// The encoding, when the node keeps one (a leaf).
    pub(crate) fn leaf_bytes(&self) -> Option<&[u8]> {
        match self {
            Node::Leaf(leaf) => Some(&leaf.bytes),
            Node::Object(_) | Node::Array(_) => None,
        }
    }

    /// Appends the value's compact encoding to `out`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Node::Leaf(leaf) => out.extend_from_slice(&leaf.bytes),
            Node::Object(built) => {
                out.push(b'{');
                for (i, member) in built.members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    member.write(out);
                }
                out.push(b'}');
            }
            Node::Array(built) => {
                out.push(b'[');
                for (i, item) in built.items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
        }
    }

    /// The value (parsed from the encoding on first use).
    pub(crate) fn value(&self) -> &Value {
        match self {
            Node::Leaf(leaf) => leaf.value.get_or_init(|| parse(&leaf.bytes)),
            Node::Object(Built { len, value, .. }) | Node::Array(BuiltArray { len, value, .. }) => {
                value.get_or_init(|| {
                    let mut out = Vec::with_capacity(*len);
                    self.write(&mut out);
                    parse(&out)
                })
            }
        }
    }

    /// The members of an object that is plain (not shaped like a tagged value); `None` for
    /// anything else, which a merge replaces whole.
    fn plain_members(&self) -> Option<&Members> {
        let members = match self {
            Node::Leaf(leaf) => {
                if leaf.bytes.first() != Some(&b'{') {
                    return None;
                }
                leaf.members.get_or_init(|| split_object(&leaf.bytes))
            }
            Node::Object(built) => &built.members,
            Node::Array(_) => return None,
        };
        (!tag_shaped_members(members)).then_some(members)
    }

    /// The members of an object, tagged values included (a JSON Pointer reads into them).
    pub(crate) fn object_members(&self) -> Option<&Members> {
        match self {
            Node::Leaf(leaf) if leaf.bytes.first() == Some(&b'{') => {
                Some(leaf.members.get_or_init(|| split_object(&leaf.bytes)))
            }
            Node::Object(built) => Some(&built.members),
            _ => None,
        }
    }

    /// The elements of an array.
    pub(crate) fn array_items(&self) -> Option<&Items> {
        match self {
            Node::Leaf(leaf) if leaf.bytes.first() == Some(&b'[') => {
                Some(leaf.items.get_or_init(|| split_array(&leaf.bytes)))
            }
            Node::Array(built) => Some(&built.items),
            _ => None,
        }
    }

    /// The members of an object as far as they are at hand without splitting an encoding:
    /// what [`Node::same`] compares member by member.
    pub(crate) fn members_at_hand(&self) -> Option<&Members> {
        match self {
            Node::Leaf(leaf) => leaf.members.get(),
            Node::Object(built) => Some(&built.members),
            Node::Array(_) => None,
        }
    }

    /// The elements of an array as far as they are at hand, as [`Node::members_at_hand`].
    pub(crate) fn items_at_hand(&self) -> Option<&Items> {
        match self {
            Node::Leaf(leaf) => leaf.items.get(),
            Node::Array(built) => Some(&built.items),
            Node::Object(_) => None,
        }
    }

    /// Whether the value's encoding is `bytes`, without writing it out.
    pub(crate) fn matches(&self, bytes: &[u8]) -> bool {
        if bytes.len() != self.len() {
            return false;
        }
        match self {
            Node::Leaf(leaf) => *leaf.bytes == *bytes,
            Node::Object(built) => {
                // The lengths add up to `bytes.len()`, so each slice below is in bounds.
                let mut at = 1;
                if bytes[0] != b'{' {
                    return false;
                }
                for (i, member) in built.members.iter().enumerate() {
                    if i > 0 {
                        if bytes[at] != b',' {
                            return false;
                        }
                        at += 1;
                    }
                    let key = &member.key;
                    if bytes[at..at + key.len()] != **key || bytes[at + key.len()] != b':' {
                        return false;
                    }
                    at += key.len() + 1;
                    let len = member.node.len();
                    if !member.node.matches(&bytes[at..at + len]) {
                        return false;
                    }
                    at += len;
                }
                bytes[at] == b'}'
            }
            Node::Array(built) => {
                let mut at = 1;
                if bytes[0] != b'[' {
                    return false;
                }
                for (i, item) in built.items.iter().enumerate() {
                    if i > 0 {
                        if bytes[at] != b',' {
                            return false;
                        }
                        at += 1;
                    }
                    let len = item.len();
                    if !item.matches(&bytes[at..at + len]) {
                        return false;
                    }
                    at += len;
                }
                bytes[at] == b']'
            }
        }
    }

    /// Whether the two encode to the same bytes: shared members by pointer, the rest member
    /// by member where both have their members at hand, by their bytes otherwise.
    pub(crate) fn same(&self, other: &Node) -> bool {
        if self.len() != other.len() {
            return false;
        }
        match (self, other) {
            (Node::Leaf(a), Node::Leaf(b)) => a.bytes.same(&b.bytes),
            (Node::Object(a), Node::Object(b)) => same_chunked_members(&a.members, &b.members),
            (Node::Array(a), Node::Array(b)) => same_items(&a.items, &b.items),
            (Node::Object(_), Node::Array(_)) | (Node::Array(_), Node::Object(_)) => false,
            (a, Node::Leaf(b)) | (Node::Leaf(b), a) => {
                if let (Some(x), Some(y)) = (a.members_at_hand(), b.members.get()) {
                    return same_chunked_members(x, y);
                }
                match (a.items_at_hand(), b.items.get()) {
                    (Some(x), Some(y)) => same_items(x, y),
                    _ => a.matches(&b.bytes),
                }
            }
        }
    }
}

/// Whether two objects' member lists encode to the same bytes.
pub(crate) fn same_chunked_members(a: &Members, b: &Members) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| Arc::ptr_eq(x, y) || (x.key.same(&y.key) && x.node.same(&y.node)))
}

/// Whether two element lists encode to the same bytes.
fn same_items(a: &Items, b: &Items) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| Arc::ptr_eq(x, y) || x.same(y))
}

/// Parses a node's encoding: the scanner's output for a document the slow path accepts (or
/// serde_json's own), so it parses, to the value the slow path would have built.
fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("a node's encoding is valid JSON")
}

/// Whether an object of `members` is shaped like a tagged value.
pub(crate) fn tag_shaped_members(members: &Members) -> bool {
    members.len() == 1
        && members
            .get(0)
            .is_some_and(|only| codec::TAGS.contains(&only.name()))
}

/// The members of the object encoded as `bytes` (compact JSON), sharing its bytes.
fn split_object(bytes: &Bytes) -> Members {
    let b: &[u8] = bytes;
    let mut members = Vec::new();
    if b.get(1) == Some(&b'}') {
        return Chunks::from_vec(members);
    }
    let mut at = 1;
    loop {
        let colon = string_end(b, at);
        let end = value_end(b, colon + 1);
        members.push(Arc::new(Member::from_parts(
            bytes.slice(at, colon),
            Node::from_bytes(bytes.slice(colon + 1, end)),
        )));
        if b[end] != b',' {
            return Chunks::from_vec(members);
        }
        at = end + 1;
    }
}

/// The elements of the array encoded as `bytes` (compact JSON), sharing its bytes.
fn split_array(bytes: &Bytes) -> Items {
    let b: &[u8] = bytes;
    let mut items = Vec::new();
    if b.get(1) == Some(&b']') {
        return Chunks::from_vec(items);
    }
    let mut at = 1;
    loop {
        let end = value_end(b, at);
        items.push(Arc::new(Node::from_bytes(bytes.slice(at, end))));
        if b[end] != b',' {
            return Chunks::from_vec(items);
        }
        at = end + 1;
    }
}

/// The end (one past the closing quote) of the string whose opening quote is `b[at]`.
fn string_end(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    loop {
        match b[i..].iter().position(|&c| c == b'"' || c == b'\\') {
            Some(k) if b[i + k] == b'\\' => i += k + 2,
            Some(k) => return i + k + 1,
            None => return b.len(),
        }
    }
}

/// The end of the value that starts at `b[at]`, in compact JSON.
fn value_end(b: &[u8], at: usize) -> usize {
    match b[at] {
        b'"' => string_end(b, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = string_end(b, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            b.len()
        }
        _ => {
            let mut i = at;
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']') {
                i += 1;
            }
            i
        }
    }
}

/// A part of a merge patch: given as a value, or as the scanner encoded it (a node of the
/// patch's snapshot, whose members are split out of its encoding as the merge descends).
#[derive(Clone, Copy)]
pub(crate) enum Part<'p> {
    Value(&'p Value),
    Encoded(&'p Node),
}

impl<'p> Part<'p> {
    fn is_null(self) -> bool {
        match self {
            Part::Value(value) => value.is_null(),
            Part::Encoded(node) => node.leaf_bytes() == Some(b"null"),
        }
    }

    /// The part as a value (parsed on first use for an encoded one).
    fn value(self) -> &'p Value {
        match self {
            Part::Value(value) => value,
            Part::Encoded(node) => node.value(),
        }
    }

    /// The encoding, when merging the part into nothing (or over what it replaces whole) is
    /// the part itself: an encoded part with no `null` in it (which would delete something).
    /// A patch is checked by the codec, so its tagged values are well-formed.
    fn as_is(self) -> Option<&'p Bytes> {
        match self {
            Part::Encoded(Node::Leaf(leaf)) if !super::contains_null(&leaf.bytes) => {
                Some(&leaf.bytes)
            }
            _ => None,
        }
    }

    /// The members of a plain object (not shaped like a tagged value), with the encoded
    /// members themselves (to take as they are); `None` for anything else.
    fn plain_members(self) -> Option<Vec<PartMember<'p>>> {
        match self {
            Part::Value(Value::Object(map)) if codec::tag_of(map).is_none() => Some(
                map.iter()
                    .map(|(name, value)| (name.as_str(), Part::Value(value), None))
                    .collect(),
            ),
            Part::Value(_) => None,
            Part::Encoded(node) => node.plain_members().map(|members| {
                members
                    .iter()
                    .map(|m| (m.name(), Part::Encoded(&m.node), Some(m)))
                    .collect()
            }),
        }
    }
}

/// A member of a patch's plain object: its name, its value, and (when encoded) the member
/// itself.
type PartMember<'p> = (&'p str, Part<'p>, Option<&'p Arc<Member>>);

/// RFC 7396: `patch` merged into `target` (`None`: nothing there) at nesting level `depth`
/// (that of `target`), as [`merge_patch`] on values, or `None` when the result is `target` as
/// it was (so it stays shared). Only plain objects named by the patch are rebuilt, their
/// untouched members shared; what the patch adds or replaces whole is its own encoding when
/// it has no `null` in it, and otherwise merged on values, at the cost of the patch. A codec
/// error leaves nothing changed (nothing is changed in place).
pub(crate) fn merge(target: Option<&Node>, patch: Part<'_>, depth: usize) -> Result<Option<Node>> {
    let (Some(patch), Some(base)) = (patch.plain_members(), target.and_then(Node::plain_members))
    else {
        // Replaced whole, or merged into nothing (what is not a plain object is, to a merge).
        let node = whole(patch, depth)?;
        return Ok(match target {
            Some(target) if target.matches(node.leaf_bytes().unwrap_or_default()) => None,
            _ => Some(node),
        });
    };
    let index = Finder::new(base, patch.len());
    // Copied (the list of chunks) on the first change.
    let mut members: Option<Members> = None;
    let mut deleted = Vec::new();
    let mut appended = Vec::new();
    for (name, part, encoded) in patch {
        let slot = index.find(base, name);
        let existing = slot.and_then(|i| base.get(i).map(|m| (i, m)));
        if part.is_null() {
            if let Some(i) = slot {
                deleted.push(i);
            }
            continue;
        }
        match existing {
            Some((i, member)) => {
                if let Some(node) = merge(Some(&member.node), part, depth + 1)? {
                    let members = members.get_or_insert_with(|| base.clone());
                    members.set(i, Arc::new(member.with_node(node)));
                }
            }
            None => appended.push(match encoded {
                Some(member) if part.as_is().is_some() => Arc::clone(member),
                _ => Arc::new(Member::named(name.to_string(), whole(part, depth + 1)?)),
            }),
        }
    }
    if members.is_none() && deleted.is_empty() && appended.is_empty() {
        return Ok(None);
    }
    let mut members = members.unwrap_or_else(|| base.clone());
    remove(&mut members, deleted);
    for member in appended {
        members.push(member);
    }
    if let (true, Some(only)) = (tag_shaped_members(&members), members.get(0)) {
        // What the value merge checks of every object it leaves: one shaped like a tagged
        // value must be a well-formed one.
        let mut map = Map::new();
        map.insert(only.name().to_string(), only.value().clone());
        codec::validate_if_tagged(&map, depth)?;
    }
    Ok(Some(Node::object(members)))
}

/// `patch` merged into nothing at nesting level `depth`, as a node.
pub(crate) fn whole(patch: Part<'_>, depth: usize) -> Result<Node> {
    match patch.as_is() {
        Some(bytes) => Ok(Node::from_bytes(bytes.clone())),
        None => Ok(Node::from_value(merge_patch_into_nothing(
            patch.value(),
            depth,
        )?)),
    }
}

/// [`merge_patch`] of `patch` into nothing at nesting level `depth`.
fn merge_patch_into_nothing(patch: &Value, depth: usize) -> Result<Value> {
    let mut value = Value::Null;
    merge_patch(&mut value, patch, depth)?;
    Ok(value)
}

/// Finds an object's members by name: by a scan for a few lookups, by a hash map for many (a
/// patch naming many members of a large object would otherwise cost a scan per member).
pub(crate) enum Finder<'a> {
    Scan,
    Map(std::collections::HashMap<&'a str, usize>),
}

impl<'a> Finder<'a> {
    pub(crate) fn new(members: &'a Members, lookups: usize) -> Finder<'a> {
        if lookups < 8 || members.len() < 16 {
            return Finder::Scan;
        }
        Finder::Map(
            members
                .iter()
                .enumerate()
                .map(|(i, m)| (m.name(), i))
                .collect(),
        )
    }

    pub(crate) fn find(&self, members: &Members, wanted: &str) -> Option<usize> {
        match self {
            Finder::Scan => members.iter().position(|m| m.is_named(wanted)),
            Finder::Map(map) => map.get(wanted).copied(),
        }
    }
}

/// Removes the members at `deleted` (indexes, in any order), keeping the others' order.
pub(crate) fn remove(members: &mut Members, mut deleted: Vec<usize>) {
    deleted.sort_unstable();
    deleted.dedup();
    for i in deleted.into_iter().rev() {
        members.remove(i);
    }
}

#[cfg(test)]
mod tests;
