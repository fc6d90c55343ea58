//! The fast path of the accept pipeline: one pass over a state's bytes that checks it and
//! writes its compact encoding, without building a [`serde_json::Value`].
//!
//! [`scan`] answers `Some` only for a document the slow path ([`json::parse`],
//! [`codec::validate`], [`Snapshot::new`]) would accept, and then its output is byte for byte
//! what [`Snapshot::new`] would write. Everything else is `None`, and the caller takes the slow
//! path, which gives the exact error (or, for what the scanner leaves to it, accepts). So the
//! scanner never needs to say *why* a document fails, only to be sure when it passes.
//!
//! What it accepts: strict JSON (RFC 8259, serde_json's grammar: no control characters in
//! strings, paired surrogates only, valid UTF-8, no trailing data) whose top level is an object,
//! nesting at most [`codec::MAX_DEPTH`] levels, no object repeating a member name (compared
//! after unescaping), every number finite as a double, and no member name starting with `$`
//! anywhere: tagged values (`{"$date": ...}`) and the parser's reserved name
//! ([`json::RESERVED_NAME`]) need the codec's full checks, so any `$` name goes the slow way.
//!
//! What it writes is serde_json's compact form of the value the slow path would parse: no
//! insignificant whitespace; strings re-escaped exactly as serde_json escapes them (`\"`, `\\`,
//! `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx` in lowercase hex,
//! everything else raw, `/` and non-ASCII included); numbers as written except the exponent,
//! which serde_json's exact numbers (`arbitrary_precision`) always write as `e` followed by a
//! sign (`1E2` is `1e+2`). The encoding is injective, so two member names are the same name
//! exactly when their encodings are equal: duplicates are found on the output bytes, with no
//! unescaping.
//!
//! [`json::parse`]: super::json::parse
//! [`json::RESERVED_NAME`]: super::json::RESERVED_NAME
//! [`codec::validate`]: super::codec::validate
//! [`codec::MAX_DEPTH`]: super::codec::MAX_DEPTH
//! [`Snapshot::new`]: super::snapshot::Snapshot::new

use super::codec::MAX_DEPTH;

/// One top-level member in [`Scanned::out`]: `out[start..end]` is `"name":value`, and
/// `out[colon]` is its `:`.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub start: usize,
    pub colon: usize,
    pub end: usize,
}

/// A document the scanner accepted.
#[derive(Debug)]
pub struct Scanned {
    /// The compact encoding of the whole document.
    pub out: Vec<u8>,
    /// Its top-level members, in order.
    pub members: Vec<Span>,
}

/// Checks `input` and writes its compact encoding, or `None` when the slow path must decide
/// (see the module doc). `None` never means the input is wrong, only that the scanner does not
/// vouch for it.
pub fn scan(input: &[u8]) -> Option<Scanned> {
    std::str::from_utf8(input).ok()?;
    let mut s = Scanner {
        b: input,
        i: 0,
        done: 0,
        // One extra byte: the snapshot appends a NUL.
        out: Vec::with_capacity(input.len() + 1),
        names: Vec::with_capacity(16),
        members: Vec::with_capacity(16),
    };
    s.ws();
    if s.peek() != b'{' {
        return None;
    }
    s.object(1, true)?;
    s.ws();
    if s.i != input.len() {
        return None;
    }
    s.flush();
    Some(Scanned {
        out: s.out,
        members: s.members,
    })
}

/// The scanner's state. Output is written lazily: the input from `done` to `i` is already in
/// canonical form and waits to be copied in one piece (for a compact input, the whole document
/// is one copy); only what differs (whitespace, a rewritten escape or exponent) makes the
/// scanner copy what is pending and write the difference. The output position of input byte
/// `i` is therefore `out.len() + (i - done)`.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    done: usize,
    out: Vec<u8>,
    /// The member names of the objects being scanned, innermost last.
    names: Vec<Name>,
    members: Vec<Span>,
}

/// A member name's canonical text (between the quotes): a range of the input when it was
/// already canonical, else of the output.
#[derive(Clone, Copy)]
struct Name {
    in_out: bool,
    start: usize,
    end: usize,
}

/// Bytes that end a run of plain string content: `"`, `\` and control characters.
const STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The bytes of `w` (little-endian) that are `"`, `\` or below 0x20, as their high bits (the
/// bit hacks `haszero` and `hasless`). Zero exactly when there is none; when there are some,
/// the lowest set bit is exact (a borrow only ever marks bytes above a true one), so
/// `trailing_zeros() / 8` is the offset of the first.
#[inline(always)]
fn stops(w: u64) -> u64 {
    let quote = w ^ (ONES * b'"' as u64);
    let backslash = w ^ (ONES * b'\\' as u64);
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    zero(quote) | zero(backslash) | control
}

fn hex(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some((c - b'0') as u32),
        b'a'..=b'f' => Some((c - b'a' + 10) as u32),
        b'A'..=b'F' => Some((c - b'A' + 10) as u32),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Scanner<'_> {
    #[inline(always)]
    fn peek(&self) -> u8 {
        self.b.get(self.i).copied().unwrap_or(0)
    }

    /// The output position of the current input position.
    #[inline(always)]
    fn pos(&self) -> usize {
        self.out.len() + (self.i - self.done)
    }

    /// Copies what is pending.
    #[inline(always)]
    fn flush(&mut self) {
        self.out.extend_from_slice(&self.b[self.done..self.i]);
        self.done = self.i;
    }

    #[inline(always)]
    fn ws(&mut self) {
        if let Some(b' ' | b'\n' | b'\t' | b'\r') = self.b.get(self.i) {
            self.skip_ws();
        }
    }

    #[inline(never)]
    fn skip_ws(&mut self) {
        self.flush();
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
        self.done = self.i;
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek() {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b'{' => self.object(depth, false),
            b'[' => self.array(depth),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.b.get(self.i..self.i + word.len())? != word {
            return None;
        }
        self.i += word.len();
        Some(())
    }

    fn object(&mut self, depth: usize, top: bool) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.peek() == b'}' {
            self.i += 1;
            return Some(());
        }
        let frame = self.names.len();
        loop {
            if self.peek() != b'"' {
                return None;
            }
            let start = self.pos();
            let start_in = self.i;
            self.string()?;
            let name = if self.done <= start_in {
                // Nothing was rewritten: the input's bytes are canonical.
                Name {
                    in_out: false,
                    start: start_in + 1,
                    end: self.i - 1,
                }
            } else {
                // An escape was rewritten: the name is in the output from `start` on.
                self.flush();
                Name {
                    in_out: true,
                    start: start + 1,
                    end: self.out.len() - 1,
                }
            };
            // A `$` name (tags, the reserved name) is for the slow path. (An empty name's
            // byte here is its closing quote.)
            let first = if name.in_out {
                self.out[name.start]
            } else {
                self.b[name.start]
            };
            if first == b'$' {
                return None;
            }
            self.names.push(name);
            self.ws();
            if self.peek() != b':' {
                return None;
            }
            let colon = self.pos();
            self.i += 1;
            self.ws();
            self.value(depth + 1)?;
            if top {
                self.members.push(Span {
                    start,
                    colon,
                    end: self.pos(),
                });
            }
            self.ws();
            match self.peek() {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    break;
                }
                _ => return None,
            }
        }
        let unique = self.names_unique(frame);
        self.names.truncate(frame);
        unique.then_some(())
    }

    /// Whether the names of the object whose names start at `frame` are all different.
    fn names_unique(&self, frame: usize) -> bool {
        let (out, b) = (&self.out, self.b);
        let names = &self.names[frame..];
        let text = |n: &Name| {
            if n.in_out {
                &out[n.start..n.end]
            } else {
                &b[n.start..n.end]
            }
        };
        if names.len() <= 16 {
            for (k, x) in names.iter().enumerate() {
                let x = text(x);
                if names[k + 1..].iter().any(|y| text(y) == x) {
                    return false;
                }
            }
            true
        } else {
            // An open-addressing table of indexes into `names`, at most half full.
            let size = (names.len() * 2).next_power_of_two();
            let mut table = vec![usize::MAX; size];
            for (k, x) in names.iter().enumerate() {
                let x = text(x);
                let mut h = x.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &c| {
                    (h ^ c as u64).wrapping_mul(0x0100_0000_01b3)
                }) as usize;
                loop {
                    h &= size - 1;
                    match table[h] {
                        usize::MAX => {
                            table[h] = k;
                            break;
                        }
                        other if text(&names[other]) == x => return false,
                        _ => h += 1,
                    }
                }
            }
            true
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.peek() == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.value(depth + 1)?;
            self.ws();
            match self.peek() {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string at `self.i` (its opening quote).
    fn string(&mut self) -> Option<()> {
        let b = self.b;
        let mut i = self.i + 1;
        loop {
            // Sixteen, then eight bytes at a time up to the first that ends the run.
            loop {
                if let Some(Ok(chunk)) = b.get(i..i + 16).map(<[u8; 16]>::try_from) {
                    let [a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7] = chunk;
                    let lo = stops(u64::from_le_bytes([a0, a1, a2, a3, a4, a5, a6, a7]));
                    let hi = stops(u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]));
                    if lo | hi == 0 {
                        i += 16;
                        continue;
                    }
                    i += if lo != 0 {
                        lo.trailing_zeros() / 8
                    } else {
                        8 + hi.trailing_zeros() / 8
                    } as usize;
                    break;
                }
                let Some(Ok(chunk)) = b.get(i..i + 8).map(<[u8; 8]>::try_from) else {
                    while i < b.len() && !STOP[b[i] as usize] {
                        i += 1;
                    }
                    break;
                };
                let m = stops(u64::from_le_bytes(chunk));
                if m != 0 {
                    i += (m.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            match b.get(i)? {
                b'"' => {
                    self.i = i + 1;
                    return Some(());
                }
                b'\\' => {
                    self.i = i;
                    self.escape()?;
                    i = self.i;
                }
                // A raw control character: serde_json refuses it.
                _ => return None,
            }
        }
    }

    /// An escape at `self.i` (its backslash) inside a string: left as it is when serde_json
    /// would write it so, else rewritten. (Out of line: most strings have none, and the string
    /// loop stays small.)
    #[inline(never)]
    fn escape(&mut self) -> Option<()> {
        let b = self.b;
        let i = self.i;
        match *b.get(i + 1)? {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.i += 2;
                return Some(());
            }
            b'/' => {
                self.flush();
                self.i += 2;
                self.out.push(b'/');
            }
            b'u' => {
                let d = b.get(i + 2..i + 6)?;
                let n = (hex(d[0])? << 12) | (hex(d[1])? << 8) | (hex(d[2])? << 4) | hex(d[3])?;
                if n < 0x20
                    && !matches!(n, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D)
                    && d == [b'0', b'0', HEX[(n >> 4) as usize], HEX[(n & 0xF) as usize]]
                {
                    self.i += 6;
                    return Some(());
                }
                self.flush();
                self.i += 6;
                let cp = match n {
                    // A trailing surrogate first: serde_json refuses it.
                    0xDC00..=0xDFFF => return None,
                    0xD800..=0xDBFF => {
                        if b.get(self.i..self.i + 2)? != b"\\u" {
                            return None;
                        }
                        let d = b.get(self.i + 2..self.i + 6)?;
                        let n2 =
                            (hex(d[0])? << 12) | (hex(d[1])? << 8) | (hex(d[2])? << 4) | hex(d[3])?;
                        if !(0xDC00..=0xDFFF).contains(&n2) {
                            return None;
                        }
                        self.i += 6;
                        (((n - 0xD800) << 10) | (n2 - 0xDC00)) + 0x1_0000
                    }
                    _ => n,
                };
                self.write_char(cp)?;
            }
            _ => return None,
        }
        self.done = self.i;
        Some(())
    }

    /// One decoded character of a string, as serde_json writes it.
    fn write_char(&mut self, cp: u32) -> Option<()> {
        match cp {
            0x08 => self.out.extend_from_slice(b"\\b"),
            0x09 => self.out.extend_from_slice(b"\\t"),
            0x0A => self.out.extend_from_slice(b"\\n"),
            0x0C => self.out.extend_from_slice(b"\\f"),
            0x0D => self.out.extend_from_slice(b"\\r"),
            0x00..=0x1F => self.out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(cp >> 4) as usize],
                HEX[(cp & 0xF) as usize],
            ]),
            0x22 => self.out.extend_from_slice(b"\\\""),
            0x5C => self.out.extend_from_slice(b"\\\\"),
            _ => {
                let c = char::from_u32(cp)?;
                let mut buf = [0u8; 4];
                self.out
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        Some(())
    }

    /// A number at `self.i`, left as written but for the exponent, which serde_json's exact
    /// numbers write as `e` and a sign; refused (`None`) unless it is finite as a double, as
    /// the codec requires.
    fn number(&mut self) -> Option<()> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        if b[i] == b'-' {
            i += 1;
        }
        let digits = i;
        match b.get(i) {
            Some(b'0') => {
                i += 1;
                if b.get(i).is_some_and(u8::is_ascii_digit) {
                    return None;
                }
            }
            Some(b'1'..=b'9') => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => return None,
        }
        let integer_digits = i - digits;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let first = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == first {
                return None;
            }
        }
        let mut exponent = false;
        if let Some(&e @ (b'e' | b'E')) = b.get(i) {
            exponent = true;
            let sign = b.get(i + 1).copied();
            let signed = matches!(sign, Some(b'+' | b'-'));
            if e == b'E' || !signed {
                self.i = i;
                self.flush();
                self.out.push(b'e');
                self.out.push(if signed { sign? } else { b'+' });
                i += 1 + signed as usize;
                self.done = i;
            } else {
                i += 2;
            }
            let first = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == first {
                return None;
            }
        }
        self.i = i;
        // Without an exponent, fewer than 309 integer digits is below 1e308: finite. (The
        // input's text has the same value as the written one.)
        if exponent || integer_digits > 300 {
            let text = std::str::from_utf8(&b[start..i]).ok()?;
            if !text.parse::<f64>().ok()?.is_finite() {
                return None;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{codec, json, snapshot::Snapshot};

    /// The slow path's encoding, or `None` when it refuses.
    fn reference(input: &[u8]) -> Option<Vec<u8>> {
        let v = json::parse(input).ok()?;
        if !codec::is_plain_object(&v) {
            return None;
        }
        codec::validate(&v, 1).ok()?;
        Some(Snapshot::new(v).json().to_vec())
    }

    /// The scanner agrees with the slow path: `Some` only when it accepts, with its bytes.
    fn agree(input: &str) -> Option<Vec<u8>> {
        let got = scan(input.as_bytes()).map(|s| s.out);
        if let Some(out) = &got {
            assert_eq!(
                Some(out),
                reference(input.as_bytes()).as_ref(),
                "{input}: scanner {}",
                String::from_utf8_lossy(out)
            );
        }
        got
    }

    #[track_caller]
    fn canonical(input: &str, expected: &str) {
        let got = agree(input).unwrap_or_else(|| panic!("{input}: refused"));
        assert_eq!(String::from_utf8(got).unwrap(), expected, "{input}");
    }

    #[track_caller]
    fn refused(input: &str) {
        assert!(agree(input).is_none(), "{input} should be refused");
    }

    #[test]
    fn whitespace_goes() {
        canonical(
            " {\n\t\"a\" : [ 1 , { } , [ ] , true,false ,null ] \r} \n",
            r#"{"a":[1,{},[],true,false,null]}"#,
        );
        canonical("{}", "{}");
        canonical(" { } ", "{}");
    }

    #[test]
    fn strings_are_escaped_as_serde_json_writes_them() {
        canonical(r#"{"a":"\/\"\\\b\f\n\r\t"}"#, r#"{"a":"/\"\\\b\f\n\r\t"}"#);
        canonical(
            r#"{"a":"\u0041\u00e9\u00E9\u20ac"}"#,
            "{\"a\":\"A\u{e9}\u{e9}\u{20ac}\"}",
        );
        canonical(
            r#"{"a":"\u0000\u001F\u001f\u007f\u0008\u0009\u000A\u000c\u000D"}"#,
            "{\"a\":\"\\u0000\\u001f\\u001f\u{7f}\\b\\t\\n\\f\\r\"}",
        );
        canonical(r#"{"a":"\u0022\u005C\u005c"}"#, r#"{"a":"\"\\\\"}"#);
        canonical(
            r#"{"a":"\uD83D\uDE00\ud83d\ude00"}"#,
            "{\"a\":\"\u{1F600}\u{1F600}\"}",
        );
        canonical(
            "{\"a\":\"\u{1F600}é/\u{7f}\"}",
            "{\"a\":\"\u{1F600}é/\u{7f}\"}",
        );
        canonical(r#"{"\u0061":1,"\"":2,"":3}"#, r#"{"a":1,"\"":2,"":3}"#);
        // Long strings cross the 8-byte chunks with stops at every offset.
        for k in 0..17 {
            let s = format!(
                "{{\"{}\\n{}\":\"{}\\\"{}\"}}",
                "x".repeat(k),
                "é".repeat(k),
                "y".repeat(k),
                "z".repeat(k)
            );
            agree(&s).unwrap();
        }
    }

    #[test]
    fn numbers_keep_their_text_but_the_exponent() {
        canonical(
            r#"{"a":[0,-0,1.0,-1.50,1E2,1e2,1e+2,1E-2,0.5e0,123456789012345678901234567890,-9223372036854775808,18446744073709551616]}"#,
            r#"{"a":[0,-0,1.0,-1.50,1e+2,1e+2,1e+2,1e-2,0.5e+0,123456789012345678901234567890,-9223372036854775808,18446744073709551616]}"#,
        );
        canonical(
            r#"{"a":1e-400,"b":1.7976931348623157e308}"#,
            r#"{"a":1e-400,"b":1.7976931348623157e+308}"#,
        );
        let big = format!("{{\"a\":{}}}", "9".repeat(300));
        canonical(&big, &big);
        refused(&format!("{{\"a\":{}}}", "9".repeat(309)));
        canonical(
            &format!("{{\"a\":{}}}", "1".repeat(305)),
            &format!("{{\"a\":{}}}", "1".repeat(305)),
        );
        for bad in [
            "1e400", "-1e400", "1.8e308", "01", "1.", ".5", "+1", "-", "1e", "1e+", "0x1", "1.e2",
            "-01", "Infinity", "NaN",
        ] {
            refused(&format!("{{\"a\":{bad}}}"));
        }
    }

    #[test]
    fn refuses_what_the_slow_path_must_decide() {
        for bad in [
            "",
            " ",
            "[]",
            "1",
            "\"a\"",
            "null",
            "{",
            "}",
            r#"{"a":1"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":1} x"#,
            r#"{"a":1}{}"#,
            r#"{a:1}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[,1]}"#,
            r#"{"a":tru}"#,
            r#"{"a":True}"#,
            "{\"a\":\"\u{1}\"}",
            "{\"a\":\"\t\"}",
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"\u12G4"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\ud800x"}"#,
            r#"{"a":"\ud800\n"}"#,
            r#"{"a":"\udc00\ud800"}"#,
            r#"{"a":"\ud800\ud800"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":"\"}"#,
            // duplicates, also after unescaping and in big objects
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"x":{"é":1,"\u00e9":2}}"#,
            // the codec's business
            r#"{"$date":"2026-11-30T03:06:44.123Z"}"#,
            r#"{"a":{"$set":[1]}}"#,
            r#"{"a":{"$serde_json::private::Number":"5"}}"#,
            r#"{"\u0024x":1}"#,
        ] {
            refused(bad);
        }
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        canonical(
            &format!("{{{}}}", many.join(",")),
            &format!("{{{}}}", many.join(",")),
        );
        refused(&format!("{{{},\"k7\":0}}", many.join(",")));
        assert!(scan(b"{\"a\":\"\xff\"}").is_none());
        assert!(scan(b"{\"a\":\"\xed\xa0\x80\"}").is_none());
    }

    #[test]
    fn nesting_up_to_the_codec_cap() {
        // The top-level object is level 1: 63 arrays inside it pass, 64 do not.
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(63), "]".repeat(63));
        canonical(&ok, &ok);
        refused(&format!("{{\"a\":{}1{}}}", "[".repeat(64), "]".repeat(64)));
        let ok = format!("{}{{}}{}", "{\"a\":".repeat(63), "}".repeat(63));
        canonical(&ok, &ok);
        refused(&format!("{}{{}}{}", "{\"a\":".repeat(64), "}".repeat(64)));
        refused(&"[".repeat(100_000));
        refused(&"{\"a\":".repeat(100_000));
    }

    #[test]
    fn member_spans() {
        let s = scan(br#" { "a" : 1 , "b\u0041" : { "c" : [ ] } } "#).unwrap();
        let spans: Vec<(&[u8], &[u8])> = s
            .members
            .iter()
            .map(|m| (&s.out[m.start..m.colon], &s.out[m.colon + 1..m.end]))
            .collect();
        assert_eq!(
            spans,
            [(&b"\"a\""[..], &b"1"[..]), (b"\"bA\"", b"{\"c\":[]}")]
        );
    }
}
