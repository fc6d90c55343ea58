//! The storage codec: which JSON values may be stored.
//!
//! Plain JSON is stored as is. The extended types of the reference (Date, BigInt, Map, Set,
//! ArrayBuffer, TypedArray, RegExp) travel as *tagged values*: objects with exactly one member
//! whose name is one of [`TAGS`]. A tagged value must be well-formed, or it is a codec error;
//! an object that merely contains such a name next to others is a plain object.
//!
//! Beyond tags the codec refuses what would silently change on a round trip: numbers outside
//! the range of an IEEE double (`1e400` would become infinity elsewhere) and nesting deeper
//! than [`MAX_DEPTH`].

use std::collections::HashSet;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The deepest nesting of arrays and objects accepted (the top-level object is level 1).
/// Tagged values count with their inner structure.
pub const MAX_DEPTH: usize = 64;

/// The member names that make a single-member object a tagged value.
pub const TAGS: [&str; 7] = [
    "$date",
    "$bigint",
    "$map",
    "$set",
    "$arraybuffer",
    "$typedarray",
    "$regexp",
];

/// JavaScript typed array names with their element size in bytes; a `DataView` (bytes with no
/// element type) travels as a `$typedarray` of its own name.
const TYPED_ARRAYS: [(&str, usize); 13] = [
    ("Int8Array", 1),
    ("Uint8Array", 1),
    ("Uint8ClampedArray", 1),
    ("Int16Array", 2),
    ("Uint16Array", 2),
    ("Float16Array", 2),
    ("Int32Array", 4),
    ("Uint32Array", 4),
    ("Float32Array", 4),
    ("Float64Array", 8),
    ("BigInt64Array", 8),
    ("BigUint64Array", 8),
    ("DataView", 1),
];

/// Returns the tag when `map` is shaped like a tagged value (one member, a known tag name).
pub fn tag_of(map: &Map<String, Value>) -> Option<&'static str> {
    if map.len() != 1 {
        return None;
    }
    let (name, _) = map.iter().next()?;
    TAGS.iter().copied().find(|t| *t == name)
}

/// True when `value` is an object that is not a tagged value: the only thing a merge patch
/// merges into, and the only thing a state may be.
pub fn is_plain_object(value: &Value) -> bool {
    matches!(value, Value::Object(m) if tag_of(m).is_none())
}

/// Checks a whole document whose top level sits at nesting level `depth` (1 for a state).
pub fn validate(value: &Value, depth: usize) -> Result<()> {
    check(value, depth, &mut Path::default())
}

/// Checks one object at nesting level `depth` when it is tag-shaped; used by the merge for
/// objects it built from two validated halves.
pub fn validate_if_tagged(map: &Map<String, Value>, depth: usize) -> Result<()> {
    if tag_of(map).is_some() {
        check_object(map, depth, &mut Path::default())
    } else {
        Ok(())
    }
}

/// A JSON-pointer-like location for error messages: borrowed names and indexes pushed while
/// descending (no allocation per member), rendered only for an error.
#[derive(Default)]
struct Path<'a>(Vec<Step<'a>>);

enum Step<'a> {
    Name(&'a str),
    Index(usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        if self.0.is_empty() {
            return "/".to_string();
        }
        self.0
            .iter()
            .map(|step| match step {
                Step::Name(n) => format!("/{n}"),
                Step::Index(i) => format!("/{i}"),
            })
            .collect()
    }
    fn err(&self, what: impl std::fmt::Display) -> Error {
        Error::Codec(format!("{what} at {}", self.render()))
    }
}

fn check<'a>(value: &'a Value, depth: usize, path: &mut Path<'a>) -> Result<()> {
    match value {
        Value::Number(n) => {
            if !n.as_f64().is_some_and(f64::is_finite) {
                return Err(path.err(format_args!("number {n} is outside the range of a double")));
            }
            Ok(())
        }
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(path.err(format_args!("nesting deeper than {MAX_DEPTH} levels")));
            }
            for (i, item) in items.iter().enumerate() {
                path.0.push(Step::Index(i));
                check(item, depth + 1, path)?;
                path.0.pop();
            }
            Ok(())
        }
        Value::Object(map) => check_object(map, depth, path),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

fn check_object<'a>(map: &'a Map<String, Value>, depth: usize, path: &mut Path<'a>) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(path.err(format_args!("nesting deeper than {MAX_DEPTH} levels")));
    }
    if let Some(tag) = tag_of(map) {
        let inner = &map[tag];
        path.0.push(Step::Name(tag));
        check_tagged(tag, inner, depth + 1, path)?;
        path.0.pop();
        return Ok(());
    }
    for (name, member) in map {
        path.0.push(Step::Name(name));
        check(member, depth + 1, path)?;
        path.0.pop();
    }
    Ok(())
}

fn check_tagged<'a>(
    tag: &'static str,
    inner: &'a Value,
    depth: usize,
    path: &mut Path<'a>,
) -> Result<()> {
    match tag {
        "$date" => check_date(inner, path),
        "$bigint" => match inner {
            Value::String(s) if is_canonical_integer(s) => Ok(()),
            _ => Err(path.err("$bigint must be a string of decimal digits with an optional '-' and no leading zeros")),
        },
        "$arraybuffer" => match inner {
            Value::String(s) => decode_base64(s, path).map(|_| ()),
            _ => Err(path.err("$arraybuffer must be a base64 string")),
        },
        "$typedarray" => check_typed_array(inner, path),
        "$regexp" => check_regexp(inner, path),
        "$set" => {
            let Value::Array(items) = inner else {
                return Err(path.err("$set must be an array of values"));
            };
            if depth > MAX_DEPTH {
                return Err(path.err(format_args!("nesting deeper than {MAX_DEPTH} levels")));
            }
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                path.0.push(Step::Index(i));
                check(item, depth + 1, path)?;
                if !seen.insert(identity(item)) {
                    return Err(path.err("$set holds the same value twice"));
                }
                path.0.pop();
            }
            Ok(())
        }
        "$map" => {
            let Value::Array(entries) = inner else {
                return Err(path.err("$map must be an array of [key, value] pairs"));
            };
            if depth + 1 > MAX_DEPTH {
                return Err(path.err(format_args!("nesting deeper than {MAX_DEPTH} levels")));
            }
            let mut seen = HashSet::new();
            for (i, entry) in entries.iter().enumerate() {
                path.0.push(Step::Index(i));
                match entry {
                    Value::Array(pair) if pair.len() == 2 => {
                        check(&pair[0], depth + 2, path)?;
                        check(&pair[1], depth + 2, path)?;
                        if !seen.insert(identity(&pair[0])) {
                            return Err(path.err("$map holds the same key twice"));
                        }
                    }
                    _ => return Err(path.err("$map entry must be a [key, value] pair")),
                }
                path.0.pop();
            }
            Ok(())
        }
        _ => Err(path.err(format_args!("unknown tag {tag}"))),
    }
}

/// What makes two members of a `$set` (or keys of a `$map`) the same: numbers by value, as
/// JavaScript compares them (SameValueZero: `1` and `1.0` are one value, so are `0` and `-0`);
/// everything else by its compact JSON text, so arrays and objects are the same when they are
/// structurally equal (as in Python or Go, where a JS-style identity does not exist).
fn identity(value: &Value) -> Vec<u8> {
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let x = if x == 0.0 { 0.0 } else { x };
            let mut key = b"#".to_vec();
            key.extend_from_slice(&x.to_bits().to_be_bytes());
            key
        }
        other => crate::json::to_vec(other),
    }
}

fn is_canonical_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0"
}

fn check_date(inner: &Value, path: &Path) -> Result<()> {
    use time::format_description::BorrowedFormatItem;
    use time::macros::format_description;
    // One format per accepted fraction length: the time crate's `[subsecond]` would also take
    // 1, 2, 4, 5, 7 or 8 digits, which no binding writes.
    const MILLIS: &[BorrowedFormatItem<'static>] = format_description!(
        "[year repr:full padding:zero sign:automatic]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    const MICROS: &[BorrowedFormatItem<'static>] = format_description!(
        "[year repr:full padding:zero sign:automatic]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    const NANOS: &[BorrowedFormatItem<'static>] = format_description!(
        "[year repr:full padding:zero sign:automatic]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z"
    );
    let Value::String(s) = inner else {
        return Err(path.err("$date must be a string"));
    };
    // Exactly YYYY-MM-DDTHH:MM:SS.fZ with a fraction of 3, 6 or 9 digits. Milliseconds are what
    // JavaScript's toISOString produces for years 0000-9999; microseconds (Python's datetime)
    // and nanoseconds (Go's time.Time) let those languages store their values exactly. The
    // length pins the 4-digit year (no sign) as well as the fraction's digit count.
    let format = match s.len() {
        24 => MILLIS,
        27 => MICROS,
        30 => NANOS,
        _ => &[],
    };
    if format.is_empty() || time::PrimitiveDateTime::parse(s, format).is_err() {
        return Err(path.err(format_args!(
            "$date {s:?} is not an RFC 3339 UTC timestamp with a fraction of 3, 6 or 9 digits \
             (YYYY-MM-DDTHH:MM:SS.sssZ, .ssssssZ or .sssssssssZ)"
        )));
    }
    Ok(())
}

fn decode_base64(s: &str, path: &Path) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| path.err(format_args!("invalid base64 ({e})")))
}

fn check_typed_array(inner: &Value, path: &Path) -> Result<()> {
    let shape = "$typedarray must be {\"type\": <typed array name>, \"base64\": <string>}";
    let Value::Object(m) = inner else {
        return Err(path.err(shape));
    };
    let (Some(Value::String(kind)), Some(Value::String(data)), 2) =
        (m.get("type"), m.get("base64"), m.len())
    else {
        return Err(path.err(shape));
    };
    let Some((_, size)) = TYPED_ARRAYS.iter().find(|(name, _)| name == kind) else {
        return Err(path.err(format_args!("unknown typed array type {kind:?}")));
    };
    let bytes = decode_base64(data, path)?;
    if bytes.len() % size != 0 {
        return Err(path.err(format_args!(
            "{kind} byte length {} is not a multiple of {size}",
            bytes.len()
        )));
    }
    Ok(())
}

fn check_regexp(inner: &Value, path: &Path) -> Result<()> {
    let shape = "$regexp must be {\"source\": <string>, \"flags\": <string>}";
    let Value::Object(m) = inner else {
        return Err(path.err(shape));
    };
    let (Some(Value::String(_)), Some(Value::String(flags)), 2) =
        (m.get("source"), m.get("flags"), m.len())
    else {
        return Err(path.err(shape));
    };
    let mut seen = String::new();
    for f in flags.chars() {
        if !"dgimsuvy".contains(f) || seen.contains(f) {
            return Err(path.err(format_args!(
                "$regexp flags {flags:?} must be distinct letters from \"dgimsuvy\""
            )));
        }
        seen.push(f);
    }
    if seen.contains('u') && seen.contains('v') {
        return Err(path.err("$regexp flags 'u' and 'v' exclude each other"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(v: Value) {
        validate(&v, 1).unwrap_or_else(|e| panic!("{v} should pass: {e}"));
    }
    fn bad(v: Value) {
        assert!(
            matches!(validate(&v, 1), Err(Error::Codec(_))),
            "{v} should fail"
        );
    }

    #[test]
    fn tagged_values_that_pass() {
        ok(json!({"d": {"$date": "2026-11-30T03:06:44.123Z"}}));
        ok(json!({"d": {"$date": "2026-11-30T03:06:44.123456Z"}}));
        ok(json!({"d": {"$date": "2026-11-30T03:06:44.123456789Z"}}));
        ok(json!({"d": {"$date": "0000-01-01T00:00:00.000000000Z"}}));
        ok(json!({"d": {"$date": "9999-12-31T23:59:59.999999999Z"}}));
        ok(json!({"b": {"$bigint": "-1234567890123456789012"}, "z": {"$bigint": "0"}}));
        ok(json!({"m": {"$map": [[1, "one"], [{"k": 1}, [2]]]}}));
        ok(json!({"s": {"$set": [1, "1", [1]]}}));
        ok(json!({"a": {"$arraybuffer": "AAEC"}, "e": {"$arraybuffer": ""}}));
        ok(json!({"t": {"$typedarray": {"type": "Float32Array", "base64": "AAAAAAAAgD8="}}}));
        // A DataView: bytes of any length (no element type).
        ok(json!({"t": {"$typedarray": {"type": "DataView", "base64": "AAEC"}}}));
        ok(json!({"r": {"$regexp": {"source": "a+b", "flags": "gi"}}}));
        // A tag name next to another member is plain data.
        ok(json!({"p": {"$date": "not a date", "other": 1}}));
    }

    #[test]
    fn date_fractions_of_3_6_or_9_digits_only() {
        for digits in 0..=12 {
            let fraction = "123456789012"[..digits].to_string();
            let text = if digits == 0 {
                "2026-11-30T03:06:44Z".to_string()
            } else {
                format!("2026-11-30T03:06:44.{fraction}Z")
            };
            let v = json!({"d": {"$date": text}});
            match validate(&v, 1) {
                Ok(()) => assert!(matches!(digits, 3 | 6 | 9), "{text} should be refused"),
                Err(Error::Codec(m)) => {
                    assert!(!matches!(digits, 3 | 6 | 9), "{text} should pass: {m}");
                    assert!(m.contains("3, 6 or 9 digits"), "{text}: message {m:?}");
                }
                Err(e) => panic!("{text}: not a codec error: {e:?}"),
            }
        }
        // The finer forms keep every other rule of the millisecond one.
        for fraction in ["123", "123456", "123456789"] {
            bad(json!({"d": {"$date": format!("2026-02-30T03:06:44.{fraction}Z")}}));
            bad(json!({"d": {"$date": format!("2026-11-30T24:06:44.{fraction}Z")}}));
            bad(json!({"d": {"$date": format!("2026-11-30T03:06:44.{fraction}+01:00")}}));
            bad(json!({"d": {"$date": format!("2026-11-30T03:06:44.{fraction}z")}}));
            bad(json!({"d": {"$date": format!("2026-11-30 03:06:44.{fraction}Z")}}));
            bad(json!({"d": {"$date": format!("+2026-11-30T03:06:44.{fraction}Z")}}));
            bad(json!({"d": {"$date": format!("2026-11-30T03:06:44,{fraction}Z")}}));
        }
        bad(json!({"d": {"$date": "2026-11-30T03:06:44.12a456Z"}}));
        bad(json!({"d": {"$date": "2026-11-30T03:06:44.-23456Z"}}));
    }

    #[test]
    fn malformed_tagged_values_fail() {
        bad(json!({"d": {"$date": "2026-11-30T03:06:44Z"}}));
        bad(json!({"d": {"$date": "2026-02-30T03:06:44.123Z"}}));
        bad(json!({"d": {"$date": "2026-11-30T03:06:44.123+01:00"}}));
        bad(json!({"d": {"$date": 5}}));
        bad(json!({"b": {"$bigint": "01"}}));
        bad(json!({"b": {"$bigint": "-0"}}));
        bad(json!({"b": {"$bigint": "1.5"}}));
        bad(json!({"m": {"$map": [[1]]}}));
        bad(json!({"m": {"$map": [[1, 2], [1, 3]]}}));
        bad(json!({"s": {"$set": [1, 1]}}));
        bad(crate::json::parse(br#"{"s":{"$set":[1,1.0]}}"#).unwrap());
        bad(crate::json::parse(br#"{"s":{"$set":[0,-0]}}"#).unwrap());
        bad(json!({"m": {"$map": [[{"a": 1}, 1], [{"a": 1}, 2]]}}));
        bad(json!({"a": {"$arraybuffer": "AAE"}}));
        bad(json!({"a": {"$arraybuffer": "AAF="}}));
        bad(json!({"t": {"$typedarray": {"type": "Float32Array", "base64": "AAAA AA=="}}}));
        bad(json!({"t": {"$typedarray": {"type": "Float32Array", "base64": "AAE="}}}));
        bad(json!({"t": {"$typedarray": {"type": "Foo", "base64": ""}}}));
        bad(json!({"r": {"$regexp": {"source": "a", "flags": "gg"}}}));
        bad(json!({"r": {"$regexp": {"source": "a", "flags": "uv"}}}));
        bad(json!({"r": {"$regexp": {"source": "a"}}}));
    }

    #[test]
    fn numbers_out_of_double_range_fail() {
        let v = crate::json::parse(br#"{"n":1e400}"#).unwrap();
        assert!(validate(&v, 1).is_err());
        let v = crate::json::parse(br#"{"n":-1e400}"#).unwrap();
        assert!(validate(&v, 1).is_err());
        let v = crate::json::parse(br#"{"n":1e-400,"m":123456789012345678901234567890}"#).unwrap();
        assert!(validate(&v, 1).is_ok());
    }

    #[test]
    fn depth_cap() {
        let mut v = json!(1);
        for _ in 0..63 {
            v = json!([v]);
        }
        ok(json!({ "a": v.clone() })); // 1 + 63 levels
        bad(json!({ "a": [v] }));
    }
}
