//! An immutable, shareable state: its encoded bytes, and its top-level members each with its
//! own encoding.
//!
//! Snapshots are handed out behind `Arc`, so a read costs a reference-count increment whatever
//! the state's size, and a reader's view never changes under it.
//!
//! Why members: a merge patch usually touches a few top-level members of a state that may be
//! hundreds of KiB. Each member keeps its parsed value *and* its compact encoding
//! (`"name":value`), shared (`Arc`) between a snapshot and the next one. A merge clones,
//! merges and re-encodes only the members the patch names; the next state's bytes are the
//! untouched members' cached encodings copied side by side. The cost of a merge is then one
//! copy of the state's bytes plus work proportional to the patch, not a parse-serialize of the
//! whole state. (The output equals what a full serialization would give, byte for byte: compact
//! JSON is exactly the members' encodings joined by commas inside braces.)
//!
//! A state that arrives as text (a replacement, an entry read back from the store) is checked
//! and encoded by the scanner ([`super::scan`]) without building any value: its members keep
//! only their encodings, and a member's value is parsed from its encoding the first time it is
//! asked for (a merge that touches the member, [`Snapshot::to_value`], a hook reading it).

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::value::codec;
use crate::value::merge::merge_patch;
use crate::value::scan::Scanned;

/// One top-level member of a state.
#[derive(Debug)]
pub struct Member {
    /// The name, when its encoding has escapes; otherwise the name is the encoding's text
    /// between its first quotes (`encoded[1..value_at - 2]`), so most members need no
    /// allocation of their own for it.
    escaped_name: Option<Box<str>>,
    /// The value, parsed from `encoded[value_at..]` when first asked for (members built from a
    /// value have it from the start).
    value: OnceLock<Value>,
    /// `"name":value`, compact.
    encoded: Box<[u8]>,
    /// Where the value starts in `encoded` (after the colon).
    value_at: usize,
}

impl Member {
    fn new(name: String, value: Value) -> Member {
        let mut encoded = Vec::with_capacity(name.len() + 16);
        // serde_json appends to a Vec we give it; writing strings and Values to memory cannot
        // fail.
        let _ = serde_json::to_writer(&mut encoded, name.as_str());
        encoded.push(b':');
        let value_at = encoded.len();
        let _ = serde_json::to_writer(&mut encoded, &value);
        let escaped_name =
            (encoded[1..value_at - 2] != *name.as_bytes()).then(|| name.into_boxed_str());
        Member {
            escaped_name,
            value: OnceLock::from(value),
            encoded: encoded.into_boxed_slice(),
            value_at,
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
        &self.encoded[1..self.value_at - 2]
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
        self.value.get_or_init(|| {
            // The encoding is the scanner's output for a document the slow path accepts (or
            // serde_json's own): it parses, to the value the slow path would have built.
            serde_json::from_slice(&self.encoded[self.value_at..])
                .expect("a member's encoding is valid JSON")
        })
    }
}

/// One state value (a plain JSON object), encoded. Never mutated after construction.
#[derive(Debug)]
pub struct Snapshot {
    /// Compact JSON followed by one NUL byte, so C callers may treat it as a C string.
    encoded: Box<[u8]>,
    members: Vec<Arc<Member>>,
}

impl Snapshot {
    /// Builds a snapshot of an object's members (in order). The caller has checked them.
    pub fn from_object(map: Map<String, Value>) -> Snapshot {
        let members: Vec<Arc<Member>> = map
            .into_iter()
            .map(|(name, value)| Arc::new(Member::new(name, value)))
            .collect();
        Snapshot {
            encoded: assemble(&members),
            members,
        }
    }

    /// Builds a snapshot of a document the scanner accepted: its encoding as is, and each
    /// member's encoding copied out of it, values left to be parsed on first use.
    pub(crate) fn from_scanned(scanned: Scanned) -> Snapshot {
        let Scanned { mut out, members } = scanned;
        let members = members
            .iter()
            .map(|span| {
                let quoted = &out[span.start..span.colon];
                let inner = &quoted[1..quoted.len() - 1];
                let escaped_name = inner.contains(&b'\\').then(|| {
                    serde_json::from_slice::<String>(quoted)
                        .unwrap_or_else(|_| String::from_utf8_lossy(inner).into_owned())
                        .into_boxed_str()
                });
                Arc::new(Member {
                    escaped_name,
                    value: OnceLock::new(),
                    encoded: out[span.start..span.end].into(),
                    value_at: span.colon + 1 - span.start,
                })
            })
            .collect();
        out.push(0);
        Snapshot {
            encoded: out.into_boxed_slice(),
            members,
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

    /// The compact JSON encoding, without the trailing NUL.
    pub fn json(&self) -> &[u8] {
        &self.encoded[..self.encoded.len() - 1]
    }

    /// The compact JSON encoding followed by a NUL byte.
    pub fn json_with_nul(&self) -> &[u8] {
        &self.encoded
    }

    /// The top-level members, in order.
    pub fn members(&self) -> &[Arc<Member>] {
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

    /// [`Snapshot::merge`] of a patch given as a snapshot (one the scanner accepted: a plain,
    /// codec-checked object), member by member on their encodings: a member whose encoding is
    /// the previous one's, with no `null` in it (which would delete something), leaves the
    /// previous member as it is (a patch that repeats the whole state costs a comparison per
    /// member, not a merge and an encoding); a new member with no `null` in it is taken as it
    /// is; any other is merged on values as by [`Snapshot::merge`]. The result is byte for byte
    /// the same.
    pub fn merge_snapshot(&self, patch: &Snapshot, max_bytes: usize) -> Result<Snapshot> {
        let index = NameIndex::new(&self.members, patch.members.len());
        let mut members: Vec<Option<Arc<Member>>> =
            self.members.iter().cloned().map(Some).collect();
        let mut appended = Vec::new();
        for change in &patch.members {
            let value = &change.encoded[change.value_at..];
            let slot = index.find(&self.members, change);
            let has_null = contains_null(value);
            match slot {
                _ if value == b"null" => {
                    if let Some(i) = slot {
                        members[i] = None;
                    }
                }
                Some(i) if !has_null && self.members[i].encoded == change.encoded => {}
                None if !has_null => appended.push(Arc::clone(change)),
                Some(i) => {
                    let mut value = self.members[i].value().clone();
                    merge_patch(&mut value, change.value(), 2)?;
                    members[i] = Some(Arc::new(Member::new(change.name().to_string(), value)));
                }
                None => {
                    let mut value = Value::Null;
                    merge_patch(&mut value, change.value(), 2)?;
                    appended.push(Arc::new(Member::new(change.name().to_string(), value)));
                }
            }
        }
        let members: Vec<Arc<Member>> = members.into_iter().flatten().chain(appended).collect();
        Self::checked(members, max_bytes)
    }

    /// Applies an RFC 7396 merge `patch` (a codec-checked plain object) and returns the next
    /// state, or a codec error when the result would hold a malformed tagged value or would
    /// itself be shaped like a tagged value. `self` is unchanged either way. `max_bytes`
    /// bounds the encoded result ([`Error::TooLarge`]), checked before it is built.
    pub fn merge(&self, patch: &Map<String, Value>, max_bytes: usize) -> Result<Snapshot> {
        let mut members: Vec<Option<Arc<Member>>> =
            self.members.iter().cloned().map(Some).collect();
        let mut appended = Vec::new();
        for (name, change) in patch {
            let slot = self.members.iter().position(|m| m.is_named(name));
            match (slot, change) {
                (Some(i), Value::Null) => members[i] = None,
                (None, Value::Null) => {}
                (Some(i), _) => {
                    let mut value = self.members[i].value().clone();
                    merge_patch(&mut value, change, 2)?;
                    members[i] = Some(Arc::new(Member::new(name.clone(), value)));
                }
                (None, _) => {
                    let mut value = Value::Null;
                    merge_patch(&mut value, change, 2)?;
                    appended.push(Arc::new(Member::new(name.clone(), value)));
                }
            }
        }
        let members: Vec<Arc<Member>> = members.into_iter().flatten().chain(appended).collect();
        Self::checked(members, max_bytes)
    }

    /// The merged state of `members`, unless it is shaped like a tagged value or too large.
    fn checked(members: Vec<Arc<Member>>, max_bytes: usize) -> Result<Snapshot> {
        if let [only] = members.as_slice() {
            if codec::TAGS.contains(&only.name()) {
                return Err(Error::Codec(format!(
                    "after the merge the state would be the tagged value {{{:?}: ...}}, not a plain object",
                    only.name()
                )));
            }
        }
        let size = encoded_len(&members);
        if size > max_bytes {
            return Err(Error::TooLarge(format!(
                "the encoded state would be {size} bytes, over max_value_bytes ({max_bytes}); nothing was written"
            )));
        }
        Ok(Snapshot {
            encoded: assemble(&members),
            members,
        })
    }
}

/// True when `encoded` (compact JSON) may hold a `null` (conservatively: the four letters
/// anywhere, strings included).
fn contains_null(encoded: &[u8]) -> bool {
    encoded.windows(4).any(|w| w == b"null")
}

/// Finds a state's members by name: by a scan for a few lookups, by a hash map for many (a
/// patch as large as the state would otherwise cost a scan per member).
enum NameIndex<'a> {
    Scan,
    Map(std::collections::HashMap<&'a str, usize>),
}

impl<'a> NameIndex<'a> {
    fn new(members: &'a [Arc<Member>], lookups: usize) -> NameIndex<'a> {
        if lookups < 8 || members.len() < 16 {
            return NameIndex::Scan;
        }
        NameIndex::Map(
            members
                .iter()
                .enumerate()
                .map(|(i, m)| (m.name(), i))
                .collect(),
        )
    }

    fn find(&self, members: &[Arc<Member>], wanted: &Member) -> Option<usize> {
        match self {
            NameIndex::Scan => members.iter().position(|m| m.is_named(wanted.name())),
            NameIndex::Map(map) => map.get(wanted.name()).copied(),
        }
    }
}

/// Length of `{m1,m2,...}` without the NUL.
fn encoded_len(members: &[Arc<Member>]) -> usize {
    2 + members.iter().map(|m| m.encoded.len()).sum::<usize>() + members.len().saturating_sub(1)
}

/// `{m1,m2,...}` followed by a NUL, in one allocation.
fn assemble(members: &[Arc<Member>]) -> Box<[u8]> {
    let mut out = Vec::with_capacity(encoded_len(members) + 1);
    out.push(b'{');
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&m.encoded);
    }
    out.push(b'}');
    out.push(0);
    out.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    /// The member-wise merge of a scanned patch gives the value merge's bytes, including where
    /// its shortcuts must not apply (a repeated member holding a null deletes it; arrays are
    /// taken as given; a new member's nested nulls are dropped).
    #[test]
    fn merge_snapshot_equals_the_value_merge() {
        let prev = Snapshot::new(json!({
            "same": {"a": 1, "b": [1, {"x": 2, "y": 3}]},
            "with_null": {"a": 1, "n": null},
            "arr": [{"p": 1, "q": 2}],
            "s": "text",
            "gone": 1
        }));
        let patches = [
            json!({"same": {"a": 1, "b": [1, {"x": 2, "y": 3}]}, "s": "text"}),
            json!({"with_null": {"a": 1, "n": null}}),
            json!({"arr": [{"q": 2, "p": 1}]}),
            json!({"same": {"b": [1, {"x": 2, "y": 3}], "a": 1}}),
            json!({"new": {"k": null, "m": {"z": null, "w": 1}}, "gone": null, "absent": null}),
            json!({"s": "other", "same": {"a": 2}}),
            json!({"same": null, "with_null": null, "arr": null, "s": null, "gone": null,
                   "$date": "2026-01-01T00:00:00Z"}),
        ];
        for patch in patches {
            let text = crate::value::json::to_vec(&patch);
            let expected = prev.merge(&obj(patch.clone()), 1 << 20);
            let scanned = match crate::value::scan::scan(&text) {
                Some(scanned) => Snapshot::from_scanned(scanned),
                None => continue, // `$` names go the value way: nothing to compare
            };
            let got = prev.merge_snapshot(&scanned, 1 << 20);
            match (expected, got) {
                (Ok(e), Ok(g)) => assert_eq!(g.json(), e.json(), "{patch}"),
                (e, g) => panic!("{patch}: {e:?} / {g:?}"),
            }
        }
        // A patch repeating the whole state keeps every member shared with it.
        let whole = Snapshot::from_scanned(crate::value::scan::scan(prev.json()).unwrap());
        let next = prev.merge_snapshot(&whole, 1 << 20).unwrap();
        assert_eq!(next.json(), {
            let mut v = prev.to_value();
            merge_patch(&mut v, &whole.to_value(), 1).unwrap();
            crate::value::json::to_vec(&v)
        });
        assert!(Arc::ptr_eq(&prev.members()[0], &next.members()[0]));
    }

    #[test]
    fn encoding_equals_a_full_serialization() {
        let v = json!({"a": 1, "b\"\n": {"x": [1, 2.50, "\u{1F600}"]}, "": null, "z": {}});
        let s = Snapshot::new(v.clone());
        assert_eq!(s.json(), serde_json::to_vec(&v).unwrap().as_slice());
        assert_eq!(Snapshot::new(json!({})).json(), b"{}");
    }

    #[test]
    fn merge_equals_the_reference_merge_and_shares_untouched_members() {
        let prev = Snapshot::new(
            json!({"big": {"k": "v"}, "job": {"id": "j1", "step": 2, "note": "r"}, "s": "p"}),
        );
        let patch =
            json!({"job": {"step": 3, "note": null}, "s": null, "new": {"a": null, "b": 1}});
        let next = prev.merge(&obj(patch.clone()), 1 << 20).unwrap();
        let mut expected = prev.to_value();
        merge_patch(&mut expected, &patch, 1).unwrap();
        assert_eq!(
            next.json(),
            serde_json::to_vec(&expected).unwrap().as_slice()
        );
        assert_eq!(
            next.json(),
            br#"{"big":{"k":"v"},"job":{"id":"j1","step":3},"new":{"b":1}}"#
        );
        assert!(Arc::ptr_eq(&prev.members()[0], &next.members()[0]));
    }

    #[test]
    fn merge_checks_size_and_tag_shape() {
        let prev = Snapshot::new(json!({"$set": [1], "x": 1}));
        assert!(matches!(
            prev.merge(&obj(json!({"x": null})), 1 << 20),
            Err(Error::Codec(_))
        ));
        assert!(matches!(
            prev.merge(&obj(json!({"y": "long string"})), 20),
            Err(Error::TooLarge(_))
        ));
    }
}

#[cfg(test)]
mod scanned_tests {
    use super::*;
    use crate::value::scan::scan;
    use serde_json::json;

    #[test]
    fn scanned_members_parse_their_values_on_demand() {
        let s = Snapshot::from_scanned(
            scan(br#" { "a" : 1E2 , "b\u0041\n" : { "c" : [ "\u00e9" ] } , "" : null } "#).unwrap(),
        );
        assert_eq!(
            s.json(),
            r#"{"a":1e+2,"bA\n":{"c":["é"]},"":null}"#.as_bytes()
        );
        assert_eq!(s.json_with_nul().last(), Some(&0));
        let names: Vec<&str> = s.members().iter().map(|m| m.name()).collect();
        assert_eq!(names, ["a", "bA\n", ""]);
        assert_eq!(s.members()[1].value(), &json!({"c": ["é"]}));
        assert_eq!(s.members()[2].value(), &Value::Null);
        let expected =
            crate::value::json::parse(r#"{"a":1e+2,"bA\n":{"c":["é"]},"":null}"#.as_bytes())
                .unwrap();
        assert_eq!(s.to_value(), expected);
        // A merge re-encodes only what it touches and keeps the others' bytes.
        let patch = json!({"bA\n": {"d": 1}});
        let next = s.merge(patch.as_object().unwrap(), 1 << 20).unwrap();
        assert_eq!(
            next.json(),
            r#"{"a":1e+2,"bA\n":{"c":["é"],"d":1},"":null}"#.as_bytes()
        );
        assert!(Arc::ptr_eq(&s.members()[0], &next.members()[0]));
        assert_eq!(Snapshot::from_scanned(scan(b"{}").unwrap()).json(), b"{}");
    }
}
