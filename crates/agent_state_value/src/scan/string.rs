//! Strings: the scanner's hot loop (eight and sixteen bytes at a time up to the next quote,
//! backslash or control character) and the escapes it keeps or rewrites as serde_json writes them.

use super::Scanner;

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
    /// A string at `self.i` (its opening quote).
    pub(super) fn string(&mut self) -> Option<()> {
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
}
