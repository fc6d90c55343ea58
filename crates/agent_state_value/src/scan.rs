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
//! The structure (objects, arrays, names) is here; strings, the hot loop, are in `string`, and
//! numbers in `number`. Nothing outside `value` sees the scanner: `accept` asks it first, and
//! the fuzz targets reach it through `value::testing`.
//!
//! [`json::parse`]: super::json::parse
//! [`json::RESERVED_NAME`]: super::json::RESERVED_NAME
//! [`codec::validate`]: super::codec::validate
//! [`codec::MAX_DEPTH`]: super::codec::MAX_DEPTH
//! [`Snapshot::new`]: super::snapshot::Snapshot::new

use super::codec::MAX_DEPTH;

mod number;
mod string;

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
}

#[cfg(test)]
mod tests;
