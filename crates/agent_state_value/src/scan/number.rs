//! Numbers: kept as written but for the exponent, and refused unless finite as a double.

use super::Scanner;

impl Scanner<'_> {
    /// A number at `self.i`, left as written but for the exponent, which serde_json's exact
    /// numbers write as `e` and a sign; refused (`None`) unless it is finite as a double, as
    /// the codec requires.
    pub(super) fn number(&mut self) -> Option<()> {
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
