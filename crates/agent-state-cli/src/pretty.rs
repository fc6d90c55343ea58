//! Pretty-printing by re-indenting compact JSON.
//!
//! The library's encoding is the truth (numbers keep their exact digits, members their order,
//! strings their escapes), so the pretty form is made by adding whitespace between its tokens,
//! never by decoding and re-encoding: removing that whitespace gives back the compact bytes.
//! The layout is serde_json's (two spaces, `"key": value`, `{}` and `[]` kept on one line).

const INDENT: &[u8] = b"  ";

/// `compact` (valid compact JSON, as the library and this program produce) with newlines and
/// indentation between tokens.
pub fn reindent(compact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() + compact.len() / 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < compact.len() {
        let byte = compact[i];
        if in_string {
            out.push(byte);
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                out.push(byte);
            }
            b'{' | b'[' => {
                let close = if byte == b'{' { b'}' } else { b']' };
                if compact.get(i + 1) == Some(&close) {
                    // An empty object or array stays `{}` / `[]`.
                    out.extend_from_slice(&[byte, close]);
                    i += 1;
                } else {
                    depth += 1;
                    out.push(byte);
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(byte);
            }
            b',' => {
                out.push(byte);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(byte),
        }
        i += 1;
    }
    out
}

fn newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    for _ in 0..depth {
        out.extend_from_slice(INDENT);
    }
}

#[cfg(test)]
mod tests {
    use super::reindent;

    fn pretty(s: &str) -> String {
        String::from_utf8(reindent(s.as_bytes())).unwrap()
    }

    #[test]
    fn matches_serde_json_layout() {
        let compact = r#"{"a":1,"b":[true,null,{"c":"x"}],"e":{},"f":[],"g":1e+2}"#;
        let value: serde_json::Value = serde_json::from_str(compact).unwrap();
        assert_eq!(
            pretty(compact),
            serde_json::to_string_pretty(&value).unwrap()
        );
    }

    #[test]
    fn strings_are_left_alone() {
        let compact = r#"{"k,:{[":"v\"},:[{\\","\\":"]"}"#;
        let value: serde_json::Value = serde_json::from_str(compact).unwrap();
        assert_eq!(
            pretty(compact),
            serde_json::to_string_pretty(&value).unwrap()
        );
    }

    #[test]
    fn numbers_keep_their_digits() {
        let compact = r#"{"n":0.1000000000000000055511151231257827,"big":12345678901234567890123}"#;
        assert_eq!(
            pretty(compact),
            "{\n  \"n\": 0.1000000000000000055511151231257827,\n  \"big\": 12345678901234567890123\n}"
        );
    }
}
