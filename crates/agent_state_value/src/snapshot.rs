//! An immutable, shareable state: its encoded bytes, and its top-level members each with its
//! own encoding.
//!
//! Snapshots are handed out behind `Arc`, so a read costs a reference-count increment whatever
//! the state's size, and a reader's view never changes under it.
//!
//! Why members: a merge patch usually touches a few members of a state that may be hundreds
//! of KiB, often deep inside it (a message added to `{"status":..,"msgs":{..}}`). Each member,
//! at every nesting level, is shared (`Arc`) between a snapshot and the next one: a value as
//! its compact encoding, or an object a write rebuilt, whose members are again shared (see
//! `node`). A merge descends into the plain objects the patch names and rebuilds only the
//! objects on the patch's paths; everything else stays shared, and the next state's bytes are
//! assembled from the members' encodings when first asked for. The cost of a merge is then
//! work proportional to the patch and to the members of the objects along its paths, not a
//! parse-serialize of the state, nor of the member it lands in. (The output equals what a full
//! serialization would give, byte for byte: compact JSON of an object is exactly its members'
//! encodings joined by commas inside braces.)
//!
//! A state that arrives as text (a replacement, an entry read back from the store) is checked
//! and encoded by the scanner (`super::scan`) without building any value: its members keep
//! only their encodings (ranges of the scanned text, shared), and a member's value is parsed
//! from its encoding the first time it is asked for (a hook reading it,
//! [`Snapshot::to_value`]); an object's members are split out of its encoding the first time a
//! merge descends into it.
//!
//! `Snapshot::merge` (in `patch.rs`, beside the patch it takes) is the one way a patch is
//! applied; its loop is here, the descent into members in `node`. A patch the scanner encoded
//! is a snapshot too, and is merged on its encodings where that is safe, at every level (a
//! member repeated as it is stays shared; a new one without `null` is taken as it is); any
//! other part, or a patch given as a value, is merged on values
//! ([`merge_patch`](crate::merge::merge_patch)). One merge does both, so the two cannot drift
//! apart: the result is byte for byte the value merge's.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use crate::codec;
use crate::error::{Error, Result};
use crate::scan::Scanned;

mod chunks;
mod edit;
mod node;

use chunks::Chunks;
use node::{Bytes, Node};

/// A state's top-level members, in order ([`Snapshot::members`]): kept in chunks shared
/// between a state and the next, so that a write copies the chunk it changes, not a reference
/// to every member.
#[derive(Debug, Clone)]
pub struct Members(node::Members);

impl Members {
    /// How many members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    /// The members, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Member>> + '_ {
        self.0.iter()
    }

    /// Member `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&Arc<Member>> {
        self.0.get(i)
    }
}

impl std::ops::Index<usize> for Members {
    type Output = Arc<Member>;
    fn index(&self, i: usize) -> &Arc<Member> {
        match self.0.get(i) {
            Some(member) => member,
            None => panic!("member {i} of a state of {} members", self.0.len()),
        }
    }
}

impl<'a> IntoIterator for &'a Members {
    type Item = &'a Arc<Member>;
    type IntoIter = Box<dyn Iterator<Item = &'a Arc<Member>> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.0.iter())
    }
}

/// One member of an object of a state (a top-level member, or one inside a nested object).
#[derive(Debug)]
pub struct Member {
    /// The name, when its encoding has escapes; otherwise the name is the text of `key`
    /// between its quotes, so most members need no allocation of their own for it.
    escaped_name: Option<Box<str>>,
    /// The name's encoding, quotes included (`"name"`, compact: the scanner's and
    /// serde_json's escapes, which are the same).
    key: Bytes,
    /// The value.
    node: Node,
}

impl Member {
    fn new(name: String, value: Value) -> Member {
        Member::named(name, Node::from_value(value))
    }

    /// A member named `name` of the value `node`.
    fn named(name: String, node: Node) -> Member {
        let mut key = Vec::with_capacity(name.len() + 2);
        // serde_json appends to a Vec we give it; writing a string to memory cannot fail.
        let _ = serde_json::to_writer(&mut key, name.as_str());
        let escaped_name =
            (key[1..key.len() - 1] != *name.as_bytes()).then(|| name.into_boxed_str());
        Member {
            escaped_name,
            key: Bytes::new(key),
            node,
        }
    }

    /// A member of the name encoded as `key` (compact, quotes included) and the value `node`.
    fn from_parts(key: Bytes, node: Node) -> Member {
        let inner = &key[1..key.len() - 1];
        let escaped_name = inner.contains(&b'\\').then(|| {
            serde_json::from_slice::<String>(&key)
                .unwrap_or_else(|_| String::from_utf8_lossy(inner).into_owned())
                .into_boxed_str()
        });
        Member {
            escaped_name,
            key,
            node,
        }
    }

    /// This member's name with the value `node`.
    fn with_node(&self, node: Node) -> Member {
        Member {
            escaped_name: self.escaped_name.clone(),
            key: self.key.clone(),
            node,
        }
    }

    /// The member's name.
    pub fn name(&self) -> &str {
        match &self.escaped_name {
            Some(name) => name,
            // Text between two ASCII quotes of valid UTF-8 is valid UTF-8.
            None => std::str::from_utf8(self.plain_name()).unwrap_or_default(),
        }
    }

    fn plain_name(&self) -> &[u8] {
        &self.key[1..self.key.len() - 1]
    }

    /// Whether the member is named `name` (without checking UTF-8 again).
    fn is_named(&self, name: &str) -> bool {
        match &self.escaped_name {
            Some(own) => **own == *name,
            None => self.plain_name() == name.as_bytes(),
        }
    }

    /// The member's value (parsed from its encoding on first use).
    pub fn value(&self) -> &Value {
        self.node.value()
    }

    /// The length of `"name":value`.
    fn len(&self) -> usize {
        self.key.len() + 1 + self.node.len()
    }

    /// Appends `"name":value` to `out`.
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key);
        out.push(b':');
        self.node.write(out);
    }
}

/// A state's assembled encoding: the scanner's (shared with its members) or one assembled
/// from the members.
#[derive(Debug)]
enum Encoded {
    Shared(Arc<[u8]>),
    Own(Box<[u8]>),
}

impl Encoded {
    fn bytes(&self) -> &[u8] {
        match self {
            Encoded::Shared(bytes) => bytes,
            Encoded::Own(bytes) => bytes,
        }
    }
}

/// One state value (a plain JSON object), encoded. Never mutated after construction.
#[derive(Debug)]
pub struct Snapshot {
    /// Compact JSON followed by one NUL byte, so C callers may treat it as a C string.
    /// Assembled from the members when first asked for: a merge whose result only a patch
    /// is stored for, and nobody reads as text, never copies the whole state.
    encoded: OnceLock<Encoded>,
    /// The length of the encoding (without the NUL), known before it is assembled.
    len: usize,
    members: Members,
}

impl Snapshot {
    /// Builds a snapshot of an object's members (in order). The caller has checked them.
    pub fn from_object(map: Map<String, Value>) -> Snapshot {
        let members: Vec<Arc<Member>> = map
            .into_iter()
            .map(|(name, value)| Arc::new(Member::new(name, value)))
            .collect();
        Snapshot::lazy(members)
    }

    /// A snapshot of `members`, its encoding assembled on first use.
    fn lazy(members: Vec<Arc<Member>>) -> Snapshot {
        Snapshot::of(Chunks::from_vec(members))
    }

    /// A snapshot of `members`, its encoding assembled on first use.
    fn of(members: node::Members) -> Snapshot {
        Snapshot {
            encoded: OnceLock::new(),
            len: encoded_len(&members),
            members: Members(members),
        }
    }

    /// Builds a snapshot of a document the scanner accepted: its encoding as is, and each
    /// member's encoding copied out of it, values left to be parsed on first use.
    pub(super) fn from_scanned(scanned: Scanned) -> Snapshot {
        let Scanned { mut out, members } = scanned;
        let len = out.len();
        out.push(0);
        let buf: Arc<[u8]> = out.into();
        let members = members
            .iter()
            .map(|span| {
                Arc::new(Member::from_parts(
                    Bytes::shared(&buf, span.start, span.colon),
                    Node::from_bytes(Bytes::shared(&buf, span.colon + 1, span.end)),
                ))
            })
            .collect();
        Snapshot {
            encoded: OnceLock::from(Encoded::Shared(buf)),
            len,
            members: Members(Chunks::from_vec(members)),
        }
    }

    /// Builds a snapshot of `value`; anything but an object is stored as an empty object
    /// (callers pass objects: states and patches are checked to be objects first).
    pub fn new(value: Value) -> Snapshot {
        match value {
            Value::Object(map) => Snapshot::from_object(map),
            _ => Snapshot::from_object(Map::new()),
        }
    }

    /// The compact JSON encoding: exactly the bytes the store holds.
    pub fn json(&self) -> &[u8] {
        &self.json_with_nul()[..self.len]
    }

    /// The length of [`Snapshot::json`] in bytes (without assembling it).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the state is the empty object (never true of an encoding: it is at least `{}`).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// [`Snapshot::json`] followed by one NUL byte. Not part of the Rust API: it exists so that
    /// the C ABI crate hands C a terminated view of the state without copying it (the encoding
    /// is kept with a spare byte for that).
    #[doc(hidden)]
    pub fn json_with_nul(&self) -> &[u8] {
        self.encoded
            .get_or_init(|| Encoded::Own(assemble(&self.members.0)))
            .bytes()
    }

    /// Whether `other` encodes to the same bytes (members, their order and their values). A
    /// merge shares the members it leaves as they are, at every level, so comparing a merge's
    /// result with its input costs a pointer comparison per untouched member along the
    /// patch's paths.
    pub fn same_encoding(&self, other: &Snapshot) -> bool {
        self.len == other.len && node::same_chunked_members(&self.members.0, &other.members.0)
    }

    /// The top-level members, in order.
    pub fn members(&self) -> &Members {
        &self.members
    }

    /// The state as one JSON value (a deep copy).
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.members
                .iter()
                .map(|m| (m.name().to_string(), m.value().clone()))
                .collect(),
        )
    }

    /// The one merge: each of the patch's `entries` (`count` of them) deletes, keeps, takes or
    /// merges one member; existing members keep their place, new ones are appended in patch
    /// order.
    pub(super) fn merge_entries<'p>(
        &self,
        entries: impl Iterator<Item = Entry<'p>>,
        count: usize,
        max_bytes: usize,
    ) -> Result<Snapshot> {
        let base = &self.members.0;
        let index = node::Finder::new(base, count);
        // One copy of the list of chunks, changed in place: a small patch on a state of
        // thousands of members costs that copy, the chunks it changes and its own work.
        let mut members = base.clone();
        let mut deleted: Vec<usize> = Vec::new();
        let mut appended = Vec::new();
        for entry in entries {
            let slot = index.find(base, entry.name());
            let existing = slot.and_then(|i| base.get(i).map(|m| (i, m)));
            if entry.is_null() {
                if let Some(i) = slot {
                    deleted.push(i);
                }
                continue;
            }
            if let Some(as_is) = entry.as_is() {
                match slot {
                    Some(_) if existing.is_some_and(|(_, m)| m.node.same(&as_is.node)) => continue,
                    None => {
                        appended.push(Arc::clone(as_is));
                        continue;
                    }
                    Some(_) => {}
                }
            }
            let part = entry.part();
            match existing {
                // Descends into the member, rebuilding only what the patch names in it.
                Some((i, member)) => {
                    if let Some(node) = node::merge(Some(&member.node), part, 2)? {
                        members.set(i, Arc::new(member.with_node(node)));
                    }
                }
                None => appended.push(Arc::new(Member::named(
                    entry.name().to_string(),
                    node::whole(part, 2)?,
                ))),
            }
        }
        node::remove(&mut members, deleted);
        for member in appended {
            members.push(member);
        }
        Self::checked(members, max_bytes)
    }

    /// [`Error::TooLarge`] when the encoding is over `max_bytes` (`what` names the state in
    /// the message).
    pub(crate) fn fits(&self, max_bytes: usize, what: &str) -> Result<()> {
        match self.len {
            size if size > max_bytes => Err(too_large(size, max_bytes, what)),
            _ => Ok(()),
        }
    }

    /// The merged state of `members`, unless it is shaped like a tagged value or too large.
    fn checked(members: node::Members, max_bytes: usize) -> Result<Snapshot> {
        if let (1, Some(only)) = (members.len(), members.get(0)) {
            if codec::TAGS.contains(&only.name()) {
                return Err(Error::Codec(format!(
                    "after the merge the state would be the tagged value {{{:?}: ...}}, not a plain object",
                    only.name()
                )));
            }
        }
        let size = encoded_len(&members);
        if size > max_bytes {
            return Err(too_large(size, max_bytes, "state"));
        }
        Ok(Snapshot {
            encoded: OnceLock::new(),
            len: size,
            members: Members(members),
        })
    }
}

/// One member of a patch, as [`Snapshot::merge_entries`] reads it.
pub(super) enum Entry<'p> {
    /// From a patch given as a value.
    Value(&'p str, &'p Value),
    /// From a patch the scanner encoded (its value parsed on demand).
    Encoded(&'p Arc<Member>),
}

impl Entry<'_> {
    fn name(&self) -> &str {
        match self {
            Entry::Value(name, _) => name,
            Entry::Encoded(member) => member.name(),
        }
    }

    /// The member's value, as the tree merge takes it.
    fn part(&self) -> node::Part<'_> {
        match self {
            Entry::Value(_, value) => node::Part::Value(value),
            Entry::Encoded(member) => node::Part::Encoded(&member.node),
        }
    }

    fn is_null(&self) -> bool {
        match self {
            Entry::Value(_, value) => value.is_null(),
            Entry::Encoded(member) => member.node.leaf_bytes() == Some(b"null"),
        }
    }

    /// The member to take as it is, when merging it needs no work: an encoded member with no
    /// `null` in it (which would delete something) is, merged into nothing, itself, and merged
    /// into a member with the same encoding, that member (so a patch that repeats the whole
    /// state costs a comparison per member, not a merge and an encoding).
    fn as_is(&self) -> Option<&Arc<Member>> {
        match self {
            Entry::Encoded(member)
                if member
                    .node
                    .leaf_bytes()
                    .is_some_and(|bytes| !contains_null(bytes)) =>
            {
                Some(member)
            }
            _ => None,
        }
    }
}

/// The error of a state whose encoding would be `size` bytes, over `max_bytes`.
fn too_large(size: usize, max_bytes: usize, what: &str) -> Error {
    Error::TooLarge(format!(
        "the encoded {what} would be {size} bytes, over max_value_bytes ({max_bytes}); nothing was written"
    ))
}

/// True when `encoded` (compact JSON) may hold a `null` (conservatively: the four letters
/// anywhere, strings included).
fn contains_null(encoded: &[u8]) -> bool {
    encoded.windows(4).any(|w| w == b"null")
}

/// Length of `{m1,m2,...}` without the NUL.
fn encoded_len(members: &node::Members) -> usize {
    node::container_len(members)
}

/// `{m1,m2,...}` followed by a NUL, in one allocation.
fn assemble(members: &node::Members) -> Box<[u8]> {
    let mut out = Vec::with_capacity(encoded_len(members) + 1);
    out.push(b'{');
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        m.write(&mut out);
    }
    out.push(b'}');
    out.push(0);
    out.into_boxed_slice()
}

#[cfg(test)]
mod tests;
