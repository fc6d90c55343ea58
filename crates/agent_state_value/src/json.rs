//! Strict JSON input: RFC 8259 syntax restricted to I-JSON (RFC 7493).
//!
//! serde_json does the parsing (it rejects invalid UTF-8, lone surrogates and trailing data, and
//! stops at 128 levels of nesting instead of overflowing the stack). What it accepts but I-JSON
//! forbids is checked here: duplicate member names, because two parsers must never see two
//! different states in one document (serde_json would silently keep the last one).
//!
//! One member name is refused although it is valid I-JSON: [`RESERVED_NAME`]. serde_json's
//! `arbitrary_precision` (how numbers keep their exact text) carries a number as a one-member
//! object of that name, so a document's own object with that first member would come back as a
//! number (`{"a":{"$serde_json::private::Number":"5"}}` read as `{"a":5}`) or be refused as a
//! malformed number: refusing the name is the only exact answer.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use crate::error::{Error, Result};

/// The member name serde_json reserves for exact numbers (see the module doc).
pub const RESERVED_NAME: &str = "$serde_json::private::Number";

fn reserved() -> Error {
    Error::Codec(format!(
        "the member name {RESERVED_NAME:?} is reserved by the JSON parser (it carries exact \
         numbers) and cannot be stored"
    ))
}

/// Parses `input` as one JSON document and checks that no object repeats a member name.
///
/// Syntax errors, invalid UTF-8 and nesting beyond the parser's limit are [`Error::Json`];
/// duplicate member names and the reserved name [`RESERVED_NAME`] are [`Error::Codec`].
pub fn parse(input: &[u8]) -> Result<Value> {
    let text = std::str::from_utf8(input).map_err(|e| {
        Error::Json(format!(
            "invalid UTF-8 at byte {} of the input",
            e.valid_up_to()
        ))
    })?;
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            let msg = e.to_string();
            if msg.starts_with("recursion limit exceeded") {
                return Err(Error::Json(format!(
                    "nesting deeper than the parser allows ({msg})"
                )));
            }
            // Valid JSON that only the number token made fail: say so, not "invalid number".
            if serde_json::from_str::<AnyJson>(text).is_ok() {
                check_member_names(text, false)?;
            }
            return Err(Error::Json(msg));
        }
    };
    check_member_names(text, true)?;
    Ok(value)
}

/// Serializes `value` as compact JSON (member order preserved, numbers exactly as written).
pub fn to_vec(value: &Value) -> Vec<u8> {
    // Serializing a serde_json::Value into memory cannot fail: keys are strings, and no
    // custom Serialize impl is involved.
    serde_json::to_vec(value).unwrap_or_default()
}

enum Frame<'a> {
    Array,
    Object(Names<'a>),
}

/// The member names seen so far in one object: a short list scanned linearly (most objects are
/// small, and hashing would cost more), turned into a hash set past [`Names::SMALL`] names.
enum Names<'a> {
    Few(Vec<Cow<'a, str>>),
    Many(HashSet<Cow<'a, str>>),
}

impl<'a> Names<'a> {
    const SMALL: usize = 16;

    /// Adds `name`; gives it back when it was already there.
    fn insert(&mut self, name: Cow<'a, str>) -> Option<Cow<'a, str>> {
        match self {
            Names::Few(list) => {
                if list.contains(&name) {
                    return Some(name);
                }
                if list.len() < Self::SMALL {
                    list.push(name);
                } else {
                    let mut set: HashSet<Cow<'a, str>> = list.drain(..).collect();
                    set.insert(name);
                    *self = Names::Many(set);
                }
                None
            }
            Names::Many(set) => {
                if set.contains(&name) {
                    return Some(name);
                }
                set.insert(name);
                None
            }
        }
    }
}

/// Any JSON document, checked by serde_json exactly as for a [`Value`] (syntax, escapes,
/// nesting limit) except that an object is only ever an object: what tells whether a document
/// failed as a `Value` only because of [`RESERVED_NAME`].
struct AnyJson;

impl<'de> serde::Deserialize<'de> for AnyJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<AnyJson, D::Error> {
        d.deserialize_any(AnyJson)
    }
}

impl<'de> serde::de::Visitor<'de> for AnyJson {
    type Value = AnyJson;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_unit<E>(self) -> std::result::Result<AnyJson, E> {
        Ok(AnyJson)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<AnyJson, A::Error> {
        while seq.next_element::<AnyJson>()?.is_some() {}
        Ok(AnyJson)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<AnyJson, A::Error> {
        while map.next_key::<String>()?.is_some() {
            map.next_value::<AnyJson>()?;
        }
        Ok(AnyJson)
    }
}

/// Scans text that serde_json accepted as JSON and fails on the first member named
/// [`RESERVED_NAME`] and, with `duplicates`, on the first object that repeats a member name.
/// Names are compared after unescaping (`"a"` and `"\u0061"` are the same name).
fn check_member_names(text: &str, duplicates: bool) -> Result<()> {
    let b = text.as_bytes();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => stack.push(Frame::Object(Names::Few(Vec::new()))),
            b'[' => stack.push(Frame::Array),
            b'}' | b']' => {
                stack.pop();
            }
            b'"' => {
                let start = i;
                let mut escaped = false;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        escaped = true;
                        i += 1;
                    }
                    i += 1;
                }
                let end = i.min(b.len().saturating_sub(1));
                if let Some(Frame::Object(names)) = stack.last_mut() {
                    let mut j = end + 1;
                    while j < b.len() && matches!(b[j], b' ' | b'\t' | b'\n' | b'\r') {
                        j += 1;
                    }
                    if j < b.len() && b[j] == b':' {
                        let name: Cow<'_, str> = if escaped {
                            Cow::Owned(
                                serde_json::from_str::<String>(&text[start..=end])
                                    .map_err(|e| Error::Json(e.to_string()))?,
                            )
                        } else {
                            Cow::Borrowed(&text[start + 1..end])
                        };
                        if name == RESERVED_NAME {
                            return Err(reserved());
                        }
                        if !duplicates {
                            // only the reserved name is looked for
                        } else if let Some(name) = names.insert(name) {
                            return Err(Error::Codec(format!(
                                "duplicate member name {name:?} in one object (I-JSON forbids it)"
                            )));
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the soak's fuzzer: this name made serde_json read an object as a number.
    #[test]
    fn the_reserved_member_name_is_refused_never_read_as_a_number() {
        for text in [
            r#"{"a":{"$serde_json::private::Number":"5"}}"#,
            r#"{"a":{"$serde_json::private::Number":"AAA="}}"#,
            r#"{"a":{"\u0024serde_json::private::Number":"5"}}"#,
            r#"{"a":{"x":1,"$serde_json::private::Number":"5"}}"#,
            r#"{"$serde_json::private::Number":[]}"#,
        ] {
            match parse(text.as_bytes()) {
                Err(Error::Codec(m)) => assert!(m.contains("reserved"), "{text}: {m}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        // The name as a value, or inside a longer name, is ordinary text.
        let v = parse(br#"{"a":"$serde_json::private::Number","$serde_json::private::Numbers":1}"#)
            .unwrap();
        assert_eq!(v["a"], "$serde_json::private::Number");
        // Malformed JSON stays a JSON error, also with a repeated name before the fault (found
        // by the fuzzer: a lone surrogate that only a full parse notices).
        for text in [
            r#"{"$serde_json::private::Number":"5""#,
            r#"{"a":1,"a":"\ud41d\ude00"}"#,
            r#"{"$serde_json::private::Number":"\ud41d\ude00"}"#,
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Json(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_duplicates_even_when_escaped() {
        assert!(matches!(parse(br#"{"a":1,"a":2}"#), Err(Error::Codec(_))));
        assert!(matches!(
            parse(br#"{"a":1,"\u0061":2}"#),
            Err(Error::Codec(_))
        ));
        assert!(matches!(
            parse(br#"{"x":{"a":1},"y":{"a":1,"b":{"a":[{"a":1,"a":2}]}}}"#),
            Err(Error::Codec(_))
        ));
    }

    #[test]
    fn same_names_in_sibling_objects_are_fine() {
        let v = parse(br#"{"a":{"a":1},"b":[{"a":1},{"a":"a:"}],"c":"\"a\":"}"#).unwrap();
        assert_eq!(
            to_vec(&v),
            br#"{"a":{"a":1},"b":[{"a":1},{"a":"a:"}],"c":"\"a\":"}"#
        );
    }

    #[test]
    fn rejects_bad_utf8_and_lone_surrogates() {
        assert!(matches!(parse(b"{\"a\":\"\xff\"}"), Err(Error::Json(_))));
        assert!(matches!(parse(br#"{"a":"\ud800"}"#), Err(Error::Json(_))));
        assert!(matches!(parse(br#"{"a":"\udc00x"}"#), Err(Error::Json(_))));
        assert!(matches!(parse(br#"{"a":1} x"#), Err(Error::Json(_))));
    }

    #[test]
    fn numbers_keep_their_exact_value_and_order_is_preserved() {
        let v = parse(
            br#"{"z":1.0,"a":1E2,"m":123456789012345678901234567890,"b":-0,"d":0.1000000000000000055511151231257827}"#,
        )
        .unwrap();
        // Digits are kept as written; only the exponent marker is normalized (1E2 -> 1e+2).
        assert_eq!(
            to_vec(&v),
            br#"{"z":1.0,"a":1e+2,"m":123456789012345678901234567890,"b":-0,"d":0.1000000000000000055511151231257827}"#
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert!(matches!(parse(deep.as_bytes()), Err(Error::Json(_))));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(parse(deep.as_bytes()), Err(Error::Json(_))));
    }
}
