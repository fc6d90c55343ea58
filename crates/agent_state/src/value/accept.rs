//! The accept pipeline: bytes and limits in, a checked state (or a precise error) out.
//!
//! Every value that enters an agent takes the same steps, in this order, so the error a bad
//! input earns does not depend on where it came from: the raw size against `max_value_bytes`,
//! strict JSON ([`json::parse`]), a plain object (not a scalar, array or tagged value), the
//! codec ([`codec::validate`]), then the encoded size. A merge patch stops after the codec (the
//! merged state's size is checked by [`Snapshot::merge`]); a state goes all the way.
//!
//! States read back from the store take [`decode_stored`]: the same checks, but any failure
//! is [`Error::Corrupt`] (the file was changed behind the library's back), not the caller's
//! fault.
//!
//! A whole state given as text ([`parse_state`], [`decode_stored`]) first tries the scanner
//! ([`scan`]), which checks and encodes it in one pass without building a value; whatever the
//! scanner does not vouch for (an error of any kind, tagged values) takes the steps above, so
//! the verdict, the message and the bytes are the same either way.

use serde_json::Value;

use super::codec;
use super::json;
use super::scan;
use super::snapshot::Snapshot;
use crate::error::{Error, Result};

/// Parses caller input (`what` names it in messages: "patch", "state", ...) into a
/// codec-checked plain object, refusing text over `max` bytes before parsing it.
pub fn parse_object(text: &[u8], max: usize, what: &str) -> Result<Value> {
    if text.len() > max {
        return Err(Error::TooLarge(format!(
            "the {what} is {} bytes, over max_value_bytes ({max})",
            text.len(),
        )));
    }
    let value = json::parse(text)?;
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    codec::validate(&value, 1)?;
    Ok(value)
}

/// Parses caller input as a whole state: [`parse_object`] then [`encode_state`], with the same
/// verdicts, messages and bytes, but a plain state is checked and encoded by the scanner
/// without building a value.
pub fn parse_state(text: &[u8], max: usize, what: &str) -> Result<Snapshot> {
    checked_size(parse_state_any_size(text, max, what)?, max, what)
}

/// A merge patch as it came in: scanned (encoded, its members' values parsed on demand) when
/// the scanner vouches for it, else parsed into a value by [`parse_object`].
pub enum PatchInput {
    Scanned(Snapshot),
    Parsed(Value),
}

/// Checks a merge patch exactly as [`parse_object`] does (same acceptance, same errors: the
/// scanner's "not sure" falls back to it), without building a value when the scanner can.
pub fn parse_patch(text: &[u8], max: usize, what: &str) -> Result<PatchInput> {
    if text.len() <= max {
        if let Some(scanned) = scan::scan(text) {
            return Ok(PatchInput::Scanned(Snapshot::from_scanned(scanned)));
        }
    }
    parse_object(text, max, what).map(PatchInput::Parsed)
}

/// [`parse_state`] without the check of the *encoded* size (the input's own size is checked),
/// for a caller that makes it later, in its place among other checks ([`checked_size`]).
pub fn parse_state_any_size(text: &[u8], max: usize, what: &str) -> Result<Snapshot> {
    if text.len() <= max {
        if let Some(scanned) = scan::scan(text) {
            return Ok(Snapshot::from_scanned(scanned));
        }
    }
    let value = parse_object(text, max, what)?;
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    Ok(Snapshot::new(value))
}

/// Encodes a codec-checked value as a state, refusing anything but a plain object and an
/// encoding over `max` bytes.
pub fn encode_state(value: Value, max: usize, what: &str) -> Result<Snapshot> {
    if !codec::is_plain_object(&value) {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a JSON object, not {}",
            describe(&value)
        )));
    }
    checked_size(Snapshot::new(value), max, what)
}

/// Refuses a state whose encoding is over `max` bytes.
pub fn checked_size(snapshot: Snapshot, max: usize, what: &str) -> Result<Snapshot> {
    check_encoded_size(&snapshot, max, what)?;
    Ok(snapshot)
}

/// [`Error::TooLarge`] when `snapshot`'s encoding is over `max` bytes.
pub fn check_encoded_size(snapshot: &Snapshot, max: usize, what: &str) -> Result<()> {
    if snapshot.json().len() > max {
        return Err(Error::TooLarge(format!(
            "the encoded {what} would be {} bytes, over max_value_bytes ({max}); nothing was written",
            snapshot.json().len()
        )));
    }
    Ok(())
}

/// A state given as a value (the `initial_state` option): the codec, then [`encode_state`].
pub fn state_from_value(value: Value, max: usize, what: &str) -> Result<Snapshot> {
    codec::validate(&value, 1)?;
    encode_state(value, max, what)
}

/// Decodes a state read back from the store; any failure is [`Error::Corrupt`].
pub fn decode_stored(bytes: &[u8]) -> Result<Snapshot> {
    if let Some(scanned) = scan::scan(bytes) {
        return Ok(Snapshot::from_scanned(scanned));
    }
    decode_stored_without_scanner(bytes)
}

/// [`decode_stored`]'s steps for what the scanner does not vouch for (and the reference it is
/// tested against): strict JSON, a plain object, the codec.
pub fn decode_stored_without_scanner(bytes: &[u8]) -> Result<Snapshot> {
    let corrupt = |e: Error| Error::Corrupt(e.to_string());
    let value = json::parse(bytes).map_err(corrupt)?;
    if !codec::is_plain_object(&value) {
        return Err(corrupt(Error::InvalidArgument(
            "not a JSON object".to_string(),
        )));
    }
    codec::validate(&value, 1).map_err(corrupt)?;
    Ok(Snapshot::new(value))
}

/// Puts `context` in front of the message of an input error (other kinds pass unchanged).
pub fn in_context(e: Error, context: &str) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{context}: {m}")),
        Error::Json(m) => Error::Json(format!("{context}: {m}")),
        Error::Codec(m) => Error::Codec(format!("{context}: {m}")),
        Error::TooLarge(m) => Error::TooLarge(format!("{context}: {m}")),
        other => other,
    }
}

/// What a value that is not a plain object is, for messages.
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Today's steps, without the scanner: what [`parse_state`] and [`decode_stored`] must
    /// answer, error messages included.
    fn reference_state(text: &[u8], max: usize) -> Result<Snapshot> {
        let value = parse_object(text, max, "state")?;
        encode_state(value, max, "state")
    }

    fn reference_stored(bytes: &[u8]) -> Result<Snapshot> {
        decode_stored_without_scanner(bytes)
    }

    #[track_caller]
    fn same(got: Result<Snapshot>, expected: Result<Snapshot>, input: &[u8]) {
        let input = String::from_utf8_lossy(input);
        match (got, expected) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.json(), b.json(), "{input}");
                assert_eq!(a.json_with_nul(), b.json_with_nul(), "{input}");
                assert_eq!(a.to_value(), b.to_value(), "{input}");
                assert_eq!(a.members().len(), b.members().len(), "{input}");
                for (x, y) in a.members().iter().zip(b.members()) {
                    assert_eq!(x.name(), y.name(), "{input}");
                    assert_eq!(x.value(), y.value(), "{input}");
                }
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{input}"),
            (a, b) => panic!("{input}: got {a:?}, expected {b:?}"),
        }
    }

    fn check(text: &[u8]) {
        for max in [usize::MAX, 64, text.len(), text.len().saturating_sub(1)] {
            same(
                parse_state(text, max, "state"),
                reference_state(text, max),
                text,
            );
        }
        same(decode_stored(text), reference_stored(text), text);
    }

    #[test]
    fn the_fast_path_answers_as_the_slow_path() {
        for text in [
            &br#"{"a":1,"b":[1,2.50,"x\u00e9\n"],"c":{"d":null}}"#[..],
            br#" { "a" : 1E2 } "#,
            br#"{"a":1,"a":2}"#,
            br#"{"d":{"$date":"2026-11-30T03:06:44.123Z"}}"#,
            br#"{"d":{"$date":"nope"}}"#,
            br#"{"$set":[1]}"#,
            br#"{"a":{"$serde_json::private::Number":"5"}}"#,
            br#"{"n":1e400}"#,
            br#"[1]"#,
            br#"{"a":"\ud800"}"#,
            b"{\"a\":\"\xff\"}",
            br#"{"a":1} x"#,
            br#"{"x":1e5}"#,
            br#"{"\u0061b\n":{"\"":[true,false]}}"#,
            b"",
        ] {
            check(text);
        }
    }

    /// A small deterministic generator of JSON texts in every spelling the scanner must
    /// rewrite or keep: whitespace, each escape (upper and lower case hex, surrogate pairs,
    /// `\/`), exponents with and without sign, `$` names, repeated names, deep nesting, and
    /// now and then a broken byte.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn ws(&mut self, out: &mut String) {
            if self.below(4) == 0 {
                for _ in 0..self.below(3) {
                    out.push([' ', '\n', '\t', '\r'][self.below(4) as usize]);
                }
            }
        }
        fn string(&mut self, out: &mut String, name: bool) {
            out.push('"');
            if name && self.below(400) == 0 {
                out.push_str(["$", "\\u0024", "$date", "$set"][self.below(4) as usize]);
            }
            for _ in 0..self.below(if name { 4 } else { 12 }) {
                let piece = match self.below(16) {
                    0 => format!("\\u{:04x}", self.below(0x80)),
                    1 => format!("\\u{:04X}", self.below(0x800)),
                    2 => "\\ud83d\\ude00".to_string(),
                    3 => "\\uD83D\\uDE00".to_string(),
                    4 => ["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]
                        [self.below(8) as usize]
                        .to_string(),
                    5 => ["\u{e9}", "\u{20ac}", "\u{1F600}", "\u{7f}", "/"][self.below(5) as usize]
                        .to_string(),
                    6 => "0123456789abcdefghij".to_string(),
                    _ => ((b'a' + self.below(3) as u8) as char).to_string(),
                };
                out.push_str(&piece);
            }
            out.push('"');
        }
        fn number(&mut self, out: &mut String) {
            if self.below(2) == 0 {
                out.push('-');
            }
            match self.below(8) {
                0 => out.push('0'),
                1 => out.push_str(&"9".repeat(1 + self.below(320) as usize)),
                2 => out.push_str(&"9".repeat(1 + self.below(40) as usize)),
                _ => out.push_str(&(1 + self.below(100_000)).to_string()),
            }
            if self.below(3) == 0 {
                out.push('.');
                out.push_str(&self.below(1000).to_string());
            }
            if self.below(3) == 0 {
                out.push(['e', 'E'][self.below(2) as usize]);
                out.push_str(["", "+", "-"][self.below(3) as usize]);
                let top = if self.below(8) == 0 { 400 } else { 30 };
                out.push_str(&self.below(top).to_string());
            }
        }
        fn value(&mut self, out: &mut String, depth: usize) {
            let choice = if depth > 70 {
                self.below(4)
            } else {
                self.below(8)
            };
            match choice {
                0 => self.string(out, false),
                1 => self.number(out),
                2 => out.push_str(["true", "false", "null"][self.below(3) as usize]),
                3 => out.push_str(["{}", "[]"][self.below(2) as usize]),
                4 | 5 => self.object(out, depth + 1),
                _ => {
                    out.push('[');
                    for k in 0..self.below(4) {
                        if k > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.value(out, depth + 1);
                        self.ws(out);
                    }
                    out.push(']');
                }
            }
        }
        fn object(&mut self, out: &mut String, depth: usize) {
            out.push('{');
            let n = self.below(if depth == 1 { 24 } else { 5 });
            let mut names = Vec::new();
            for k in 0..n {
                if k > 0 {
                    out.push(',');
                }
                self.ws(out);
                if self.below(400) == 0 && !names.is_empty() {
                    let again: &String = &names[self.below(names.len() as u64) as usize];
                    out.push_str(again);
                } else {
                    let mut name = String::new();
                    self.string(&mut name, true);
                    // Mostly distinct names (short random ones collide).
                    name.insert_str(name.len() - 1, &format!("#{k}"));
                    out.push_str(&name);
                    names.push(name);
                }
                self.ws(out);
                out.push(':');
                self.ws(out);
                self.value(out, depth);
                self.ws(out);
            }
            out.push('}');
        }
    }

    #[test]
    fn generated_documents_agree() {
        let mut g = Gen(0x9E37_79B9_7F4A_7C15);
        let (mut fast, mut total) = (0, 0);
        // Fewer in unoptimized builds, where each takes milliseconds.
        let n = if cfg!(debug_assertions) {
            3_000
        } else {
            20_000
        };
        for _ in 0..n {
            let mut text = String::new();
            g.ws(&mut text);
            g.object(&mut text, 1);
            g.ws(&mut text);
            let mut bytes = text.into_bytes();
            if g.below(10) == 0 && !bytes.is_empty() {
                let at = g.below(bytes.len() as u64) as usize;
                bytes[at] = [b'"', b'\\', 0x01, 0xff, b'}', b','][g.below(6) as usize];
            }
            fast += scan::scan(&bytes).is_some() as usize;
            total += 1;
            check(&bytes);
        }
        // The generator must reach the fast path often, or this proves little.
        assert!(
            fast * 4 > total,
            "only {fast} of {total} documents took the fast path"
        );
    }

    /// The JSONTestSuite corpus (in `../shared`, when present), raw and as a member's value.
    #[test]
    fn json_test_suite_agrees() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/corpora/json-test-suite");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("no JSONTestSuite corpus at {}: skipped", dir.display());
            return;
        };
        let mut n = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let doc = std::fs::read(&path).unwrap();
            check(&doc);
            let mut wrapped = b"{\"v\":".to_vec();
            wrapped.extend_from_slice(&doc);
            wrapped.push(b'}');
            check(&wrapped);
            n += 1;
        }
        assert!(n > 300, "only {n} files in {}", dir.display());
    }
}

/// Throughput of the accept path on a state shaped like the benchmarks' (run with
/// `cargo test --release --lib --no-default-features -- --ignored --nocapture throughput`).
#[cfg(test)]
mod throughput {
    use super::*;
    use std::time::Instant;

    fn state(size: usize) -> Vec<u8> {
        let mut s = String::from("{\"status\":\"idle1\"");
        let mut i = 0;
        while s.len() + 260 < size || i < 2 {
            s += &format!(
                ",\"m{i}\":{{\"id\":{i},\"name\":\"member {i}\",\"tags\":[\"alpha\",\"beta\"],\"score\":0.5,\"text\":\"{}\"}}",
                "0".repeat(150)
            );
            i += 1;
        }
        s.push('}');
        s.into_bytes()
    }

    fn rate(what: &str, text: &[u8], f: impl Fn(&[u8])) {
        let n = (64 << 20) / text.len();
        let t = Instant::now();
        for _ in 0..n {
            f(text);
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{what} {:>7} bytes: {:>8.1} us, {:>6.0} MB/s",
            text.len(),
            s / n as f64 * 1e6,
            (text.len() * n) as f64 / s / 1e6
        );
    }

    #[test]
    #[ignore]
    fn throughput() {
        for size in [1024, 16384, 262144] {
            let text = state(size);
            let pretty = serde_json::to_vec_pretty(&json::parse(&text).unwrap()).unwrap();
            rate("parse_state          ", &text, |t| {
                parse_state(t, usize::MAX, "state").unwrap();
            });
            rate("parse_state (pretty) ", &pretty, |t| {
                parse_state(t, usize::MAX, "state").unwrap();
            });
            rate("parse_object+encode  ", &text, |t| {
                encode_state(
                    parse_object(t, usize::MAX, "state").unwrap(),
                    usize::MAX,
                    "state",
                )
                .unwrap();
            });
        }
    }
}
