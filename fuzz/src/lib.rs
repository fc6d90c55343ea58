//! The properties the fuzz targets check, as plain functions: the targets call them under
//! libFuzzer, and `tests/replay.rs` calls them on the stored corpus (no fuzzer needed), which is
//! how the quick reliability suite keeps every corpus input a regression test.
//!
//! Each function panics when a property does not hold; for the fuzzer that is a crash.

use std::collections::HashSet;
use std::fmt;

// The value layer's insides (the scanner, the member-wise merge, the slow references) come
// through its one door for differential checks, `value::testing` (feature `fuzzing`).
use agent_state_value::testing;
use agent_state_value::{codec, json, merge};
use agent_state_value::{Error, Snapshot};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

// ---- parser + codec -------------------------------------------------------------------------

/// A reference for the one check agent_state does on top of serde_json: does any object of the
/// document repeat a member name? Built on serde's own tokenizer, so it shares nothing with the
/// library's hand-written scanner (`json::check_duplicate_members`).
struct HasDuplicate(bool);

impl<'de> Deserialize<'de> for HasDuplicate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DupVisitor)
    }
}

struct DupVisitor;

impl<'de> Visitor<'de> for DupVisitor {
    type Value = HasDuplicate;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<HasDuplicate, E> {
        Ok(HasDuplicate(false))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<HasDuplicate, E> {
        Ok(HasDuplicate(false))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<HasDuplicate, E> {
        Ok(HasDuplicate(false))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<HasDuplicate, E> {
        Ok(HasDuplicate(false))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<HasDuplicate, E> {
        Ok(HasDuplicate(false))
    }
    fn visit_unit<E: de::Error>(self) -> Result<HasDuplicate, E> {
        Ok(HasDuplicate(false))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<HasDuplicate, A::Error> {
        let mut dup = false;
        while let Some(HasDuplicate(d)) = seq.next_element()? {
            dup |= d;
        }
        Ok(HasDuplicate(dup))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HasDuplicate, A::Error> {
        // With arbitrary_precision a number arrives as a one-member map; it has no duplicates.
        let mut names = HashSet::new();
        let mut dup = false;
        while let Some(name) = map.next_key::<String>()? {
            let HasDuplicate(d) = map.next_value()?;
            dup |= d || !names.insert(name);
        }
        Ok(HasDuplicate(dup))
    }
}

/// Does a valid JSON document have an object member named `name` (escapes decoded)? A plain
/// scan for member-name strings (a string followed by `:`), for the one name serde_json's
/// visitors cannot show apart from an exact number (`json::RESERVED_NAME`).
fn has_member_named(data: &[u8], name: &str) -> bool {
    let mut i = 0;
    while i < data.len() {
        if data[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < data.len() && data[i] != b'"' {
            i += if data[i] == b'\\' { 2 } else { 1 };
        }
        let end = i.min(data.len());
        i += 1;
        let mut j = i;
        while j < data.len() && matches!(data[j], b' ' | b'\t' | b'\n' | b'\r') {
            j += 1;
        }
        if j < data.len() && data[j] == b':' {
            let decoded = serde_json::from_slice::<String>(&data[start..=end.min(data.len() - 1)]);
            if matches!(decoded.as_deref(), Ok(n) if n == name) {
                return true;
            }
        }
    }
    false
}

/// Parser and codec on arbitrary bytes:
/// - `json::parse` accepts exactly what serde_json accepts, minus documents with a repeated
///   member name or a member named `json::RESERVED_NAME` (those are `Error::Codec`); everything
///   else it refuses is `Error::Json`;
/// - what it accepts re-encodes to text that parses again to the same encoding (stable output);
/// - `codec::validate` gives the same verdict on the original and the re-parsed value, and never
///   panics.
pub fn check_json_codec(data: &[u8]) {
    let got = json::parse(data);
    let reference = serde_json::from_slice::<HasDuplicate>(data);
    let reserved = reference.is_ok() && has_member_named(data, json::RESERVED_NAME);
    match (&got, &reference) {
        (Err(Error::Codec(_)), Ok(_)) if reserved => {}
        (Ok(_), Ok(HasDuplicate(false))) if !reserved => {}
        (Err(Error::Codec(_)), Ok(HasDuplicate(true))) => {}
        (Err(Error::Json(_)), Err(_)) => {}
        _ => panic!(
            "json::parse disagrees with the reference on {:?}: got {:?}, reference {:?}",
            String::from_utf8_lossy(data),
            got.as_ref().map(|_| "Ok"),
            reference.as_ref().map(|d| if d.0 { "duplicate member" } else { "Ok" }).map_err(|e| e.to_string())
        ),
    }
    let Ok(value) = got else { return };
    let text = json::to_vec(&value);
    let again = json::parse(&text).unwrap_or_else(|e| {
        panic!("the library's own output does not parse: {e}: {}", String::from_utf8_lossy(&text))
    });
    let text2 = json::to_vec(&again);
    assert_eq!(text, text2, "encoding is not stable across a round trip");
    for depth in [1, 2, 60] {
        let a = codec::validate(&value, depth);
        let b = codec::validate(&again, depth);
        assert_eq!(a.is_ok(), b.is_ok(), "codec verdict changes across a round trip: {a:?} vs {b:?}");
        if let Err(e) = a {
            assert!(matches!(e, Error::Codec(_)), "codec::validate returned a non-codec error: {e:?}");
        }
    }
}

// ---- merge ------------------------------------------------------------------------------------

/// The simplest RFC 7396 merge, with the codec's rule that a single-member object whose name is
/// a tag is a leaf: the reference the library's `merge::merge_patch` is compared with. Members
/// that exist keep their place; new ones are appended in patch order.
pub fn model_merge(target: &Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else { return patch.clone() };
    if is_tagged(p) {
        return patch.clone();
    }
    let mut result = match target {
        Value::Object(t) if !is_tagged(t) => t.clone(),
        _ => Map::new(),
    };
    for (name, value) in p {
        if value.is_null() {
            result.shift_remove(name);
        } else {
            let merged = model_merge(result.get(name).unwrap_or(&Value::Null), value);
            result.insert(name.clone(), merged);
        }
    }
    Value::Object(result)
}

fn is_tagged(m: &Map<String, Value>) -> bool {
    m.len() == 1 && m.keys().all(|k| codec::TAGS.contains(&k.as_str()))
}

/// A cursor over fuzz input that yields small decisions; past the end it yields zeros.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }
    pub fn exhausted(&self) -> bool {
        self.pos >= self.data.len()
    }
}

const NAMES: [&str; 10] = ["a", "b", "c", "", "$set", "$date", "$bigint", "$map", "$regexp", "$arraybuffer"];
const NUMBERS: [&str; 10] = [
    "0", "-0", "1", "2.5", "-3e+2", "1e400", "12345678901234567890123", "0.1000000000000000055511151231257827",
    "1e-400", "-1",
];
const STRINGS: [&str; 8] = [
    "", "x", "2026-11-30T03:06:44.123Z", "12", "-0", "AAEC", "\u{e9}\u{1F600}", "a\"b\\c\u{0}",
];

/// A value, up to `depth` more levels of nesting, shaped by the input: scalars, arrays, objects
/// whose names include the codec's tags (so merges build and break tag shapes), tagged values
/// both well-formed and not.
pub fn gen_value(b: &mut Bytes, depth: u32) -> Value {
    let choice = if depth == 0 { b.below(4) } else { b.below(11) };
    match choice {
        0 => Value::Null,
        1 => Value::Bool(b.byte() & 1 == 1),
        2 => serde_json::from_str(NUMBERS[b.below(NUMBERS.len() as u8) as usize]).unwrap(),
        3 => Value::String(STRINGS[b.below(STRINGS.len() as u8) as usize].to_string()),
        4 | 5 => {
            let n = b.below(4);
            Value::Array((0..n).map(|_| gen_value(b, depth - 1)).collect())
        }
        6..=8 => Value::Object(gen_object(b, depth - 1)),
        9 => {
            // A one-member object named by a tag, whatever its value: a tagged value, maybe bad.
            let tag = codec::TAGS[b.below(codec::TAGS.len() as u8) as usize];
            let mut m = Map::new();
            m.insert(tag.to_string(), gen_value(b, depth - 1));
            Value::Object(m)
        }
        _ => {
            // A deep chain, to meet the nesting cap.
            let n = 50 + b.below(20) as usize;
            let mut v = Value::Bool(true);
            for _ in 0..n {
                v = Value::Array(vec![v]);
            }
            v
        }
    }
}

pub fn gen_object(b: &mut Bytes, depth: u32) -> Map<String, Value> {
    let n = b.below(5);
    let mut m = Map::new();
    for _ in 0..n {
        let name = NAMES[b.below(NAMES.len() as u8) as usize].to_string();
        let value = gen_value(b, depth);
        m.insert(name, value);
    }
    m
}

/// Merge against the model: for a codec-valid target state and patch, `merge_patch` succeeds
/// exactly when the model's result is codec-valid, and then equals it byte for byte (member
/// order included); merging the same patch again agrees with the model too.
pub fn check_merge(data: &[u8]) {
    let mut b = Bytes::new(data);
    let target = Value::Object(gen_object(&mut b, 4));
    let patch = Value::Object(gen_object(&mut b, 4));
    if codec::validate(&target, 1).is_err() || codec::validate(&patch, 1).is_err() {
        return;
    }
    if !codec::is_plain_object(&target) || !codec::is_plain_object(&patch) {
        return;
    }
    let expected = model_merge(&target, &patch);
    let expected_valid = codec::validate(&expected, 1);
    let mut got = target.clone();
    let result = merge::merge_patch(&mut got, &patch, 1);
    match (&result, &expected_valid) {
        (Ok(()), Ok(())) => {
            assert_eq!(
                String::from_utf8(json::to_vec(&got)).unwrap(),
                String::from_utf8(json::to_vec(&expected)).unwrap(),
                "merge of {patch} into {target} differs from the model"
            );
            // Again, from the merged state: RFC 7396 alone would make this a no-op, but a merge
            // that left an object tag-shaped turned it into a leaf, which the next merge replaces;
            // the model says what must happen.
            let mut twice = got.clone();
            let again = merge::merge_patch(&mut twice, &patch, 1);
            let expected_twice = model_merge(&got, &patch);
            if codec::validate(&expected_twice, 1).is_ok() {
                assert!(again.is_ok(), "second merge of {patch} into {got} failed: {again:?}");
                assert_eq!(
                    json::to_vec(&twice),
                    json::to_vec(&expected_twice),
                    "second merge of {patch} into {got} differs from the model"
                );
            }
        }
        (Err(Error::Codec(_)), Err(_)) => {}
        _ => panic!(
            "merge of {patch} into {target}: library says {result:?}, but the model's result {expected} \
             is {expected_valid:?}"
        ),
    }
}

/// The member-wise merge of a scanned patch (`Snapshot::merge` of a patch the scanner took,
/// what `set_state` does when it can) against the value merge (of the same patch as a value): the
/// same bytes, or the same kind of error. Half of the patches repeat the target's members (in
/// its order or not, some changed), the case the member-wise merge shortcuts.
pub fn check_merge_snapshot(data: &[u8]) {
    let mut b = Bytes::new(data);
    let target = gen_object(&mut b, 4);
    let mut patch = Map::new();
    if b.byte() & 1 == 1 {
        let reorder = b.byte() & 1 == 1;
        let mut names: Vec<&String> = target.keys().collect();
        if reorder {
            names.reverse();
        }
        for name in names {
            let value = if b.below(4) == 0 { gen_value(&mut b, 3) } else { target[name].clone() };
            patch.insert(name.clone(), value);
        }
    }
    for (name, value) in gen_object(&mut b, 3) {
        patch.insert(name, value);
    }
    let (target, patch) = (Value::Object(target), Value::Object(patch));
    for v in [&target, &patch] {
        if codec::validate(v, 1).is_err() || !codec::is_plain_object(v) {
            return;
        }
    }
    let patch_bytes = json::to_vec(&patch);
    let Ok((scanned, true)) = testing::patch(&patch_bytes, usize::MAX) else {
        return; // the scanner left it to the value path: nothing to compare
    };
    let Value::Object(patch_map) = &patch else { unreachable!() };
    let by_value = testing::value_patch(patch_map.clone());
    // The target both as built from a value and as scanned (members parsed on demand).
    let from_value = Snapshot::new(target.clone());
    let from_scan = testing::state(&json::to_vec(&target), usize::MAX).unwrap();
    for state in [&from_value, &from_scan] {
        let expected = state.merge(&by_value, usize::MAX);
        let got = state.merge(&scanned, usize::MAX);
        match (&expected, &got) {
            (Ok(e), Ok(g)) => assert_eq!(
                String::from_utf8_lossy(g.json()),
                String::from_utf8_lossy(e.json()),
                "merge of {patch} into {target}"
            ),
            (Err(e), Err(g)) => assert_eq!(
                std::mem::discriminant(e),
                std::mem::discriminant(g),
                "merge of {patch} into {target}: {e:?} / {g:?}"
            ),
            _ => panic!("merge of {patch} into {target}: value merge {expected:?}, member merge {got:?}"),
        }
    }
}

// ---- the scanner (fast accept path) against today's steps -------------------------------------

/// Today's accept steps for a whole state, without the scanner: strict JSON, a plain object,
/// the codec, then the snapshot's encoding.
fn reference_state(data: &[u8], max: usize) -> Result<Snapshot, Error> {
    testing::reference_state(data, max)
}

/// Whether any object of `value` has a member whose name starts with `$` (what the scanner
/// leaves to the slow path).
fn has_dollar_name(value: &Value) -> bool {
    match value {
        Value::Object(m) => m.iter().any(|(k, v)| k.starts_with('$') || has_dollar_name(v)),
        Value::Array(items) => items.iter().any(has_dollar_name),
        _ => false,
    }
}

/// The scanner and the accept pipeline (`testing::state` / `testing::stored`) against today's steps:
/// - when the scanner vouches for a document, today's steps accept it, with the same bytes;
/// - it vouches for every document today's steps accept that has no `$` member name;
/// - `testing::state` (several size limits) and `testing::stored` give what today's steps give: the
///   same bytes, members, names and values, or the same error, message included.
pub fn check_scan(data: &[u8]) {
    let scanned = testing::scan(data);
    let reference = reference_state(data, usize::MAX);
    match (&scanned, &reference) {
        (Some(s), Ok(r)) => assert_eq!(
            String::from_utf8_lossy(s),
            String::from_utf8_lossy(r.json()),
            "the scanner's encoding differs on {:?}",
            String::from_utf8_lossy(data)
        ),
        (Some(s), Err(e)) => panic!(
            "the scanner accepts {:?} (as {:?}) but today's steps say {e:?}",
            String::from_utf8_lossy(data),
            String::from_utf8_lossy(s)
        ),
        (None, Ok(r)) => assert!(
            has_dollar_name(&r.to_value()),
            "the scanner leaves {:?} to the slow path, which accepts it",
            String::from_utf8_lossy(data)
        ),
        (None, Err(_)) => {}
    }
    let encoded = reference.as_ref().map_or(data.len(), |r| r.json().len());
    for max in [usize::MAX, data.len(), encoded, encoded.saturating_sub(1), 8] {
        let got = testing::state(data, max);
        let expected = reference_state(data, max);
        same_state(&got, &expected, data);
    }
    let got = testing::stored(data);
    let expected = reference_state(data, usize::MAX).map_err(|e| Error::Corrupt(match e {
        Error::InvalidArgument(_) => Error::InvalidArgument("not a JSON object".to_string()).to_string(),
        other => other.to_string(),
    }));
    same_state(&got, &expected, data);
}

fn same_state(got: &Result<Snapshot, Error>, expected: &Result<Snapshot, Error>, data: &[u8]) {
    let input = String::from_utf8_lossy(data);
    match (got, expected) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.json_with_nul(), b.json_with_nul(), "bytes differ on {input:?}");
            assert_eq!(a.members().len(), b.members().len(), "members differ on {input:?}");
            for (x, y) in a.members().iter().zip(b.members()) {
                assert_eq!(x.name(), y.name(), "member names differ on {input:?}");
                assert_eq!(x.value(), y.value(), "member values differ on {input:?}");
            }
            assert_eq!(a.to_value(), b.to_value(), "values differ on {input:?}");
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "errors differ on {input:?}"),
        _ => panic!("on {input:?}: got {got:?}, expected {expected:?}"),
    }
}
