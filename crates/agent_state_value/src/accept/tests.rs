//! The accept pipeline's fast path against its steps.

use super::*;

/// The steps, without the scanner: what [`reference::fast_state`] and [`stored`] must answer,
/// error messages included.
fn reference_state(text: &[u8], max: usize) -> Result<Snapshot> {
    reference::state(text, max)
}

fn reference_stored(bytes: &[u8]) -> Result<Snapshot> {
    reference::stored(bytes)
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
            reference::fast_state(text, max),
            reference_state(text, max),
            text,
        );
    }
    same(stored(text), reference_stored(text), text);
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

/// Throughput of the accept path on a state shaped like the benchmarks' (run with
/// `cargo test --release --lib --no-default-features -- --ignored --nocapture throughput`).
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
            rate("state                ", &text, |t| {
                reference::fast_state(t, usize::MAX).unwrap();
            });
            rate("state (pretty)       ", &pretty, |t| {
                reference::fast_state(t, usize::MAX).unwrap();
            });
            rate("parse_object+encode  ", &text, |t| {
                reference::state(t, usize::MAX).unwrap();
            });
        }
    }
}
