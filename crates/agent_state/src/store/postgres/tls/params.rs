//! The TLS settings of a URI that the client does not know, taken out before it parses the
//! URI ([`split`]).

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in super::super) enum Mode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Mode, String> {
        Ok(match value {
            "disable" => Mode::Disable,
            "allow" => Mode::Allow,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            _ => {
                return Err(format!(
                    "sslmode={value} is not one of disable, allow, prefer, require, verify-ca, \
                     verify-full"
                ))
            }
        })
    }
}

/// The TLS settings of a URI, as written (see [`split`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in super::super) struct Options {
    pub mode: Mode,
    pub rootcert: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

/// The default `sslmode`: libpq's, `prefer` (TLS when the server offers it, no certificate
/// check). See README's "Over TLS".
impl Default for Options {
    fn default() -> Options {
        Options {
            mode: Mode::Prefer,
            rootcert: None,
            cert: None,
            key: None,
        }
    }
}

/// `uri` without the TLS settings the client does not know (`sslmode`, `sslrootcert`,
/// `sslcert`, `sslkey`), and those settings. Both forms: `postgresql://...?k=v&...` and
/// `key=value key='value' ...`. (`sslmode` is always taken out: [`Tls::connect`] sets the
/// client's own for each attempt.)
pub(in super::super) fn split(uri: &str) -> Result<(String, Options), String> {
    let mut options = Options::default();
    let mut take = |key: &str, value: String| -> Result<bool, String> {
        match key {
            "sslmode" => options.mode = Mode::parse(&value)?,
            "sslrootcert" => options.rootcert = Some(value),
            "sslcert" => options.cert = Some(value),
            "sslkey" => options.key = Some(value),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if uri.starts_with("postgres://") || uri.starts_with("postgresql://") {
        match uri.split_once('?') {
            None => uri.to_string(),
            Some((head, query)) => {
                let mut kept = Vec::new();
                for part in query.split('&') {
                    let (k, v) = part.split_once('=').unwrap_or((part, ""));
                    if !take(&percent_decode(k)?, percent_decode(v)?)? {
                        kept.push(part);
                    }
                }
                if kept.is_empty() {
                    head.to_string()
                } else {
                    format!("{head}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut rest = String::new();
        let mut last = 0;
        for (key, value, span) in key_values(uri)? {
            if take(&key, value)? {
                rest.push_str(&uri[last..span.0]);
                last = span.1;
            }
        }
        rest.push_str(&uri[last..]);
        rest
    };
    Ok((rest, options))
}

/// `%XX` escapes decoded (as the client decodes a URI's parameters).
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{s}: a % not followed by two hexadecimal digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s}: not UTF-8 once decoded"))
}

/// A key, its value, and the byte range of `key=value` in the string.
type KeyValue = (String, String, (usize, usize));

/// The `key=value` pairs of a libpq connection string, each with its span in `s` (from its key
/// to the end of its value): values unquoted or in single quotes, `\` escaping the next
/// character, spaces allowed around `=`.
fn key_values(s: &str) -> Result<Vec<KeyValue>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_spaces = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_spaces(i);
        if i >= b.len() {
            return Ok(out);
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = s[start..i].to_string();
        i = skip_spaces(i);
        if i >= b.len() || b[i] != b'=' {
            return Err(format!("{key}: a key without \"=value\""));
        }
        i = skip_spaces(i + 1);
        let mut value = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err(format!("{key}: an unterminated quoted value")),
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < b.len() => {
                        value.push(b[i + 1]);
                        i += 2;
                    }
                    Some(&c) => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        let value = String::from_utf8(value).map_err(|_| format!("{key}: a value not UTF-8"))?;
        out.push((key, value, (start, i)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::Config;

    #[test]
    fn uri_parameters_the_client_does_not_know_are_taken_out() {
        let (rest, o) = split(
            "postgresql://u:pw@h:5432/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem\
             &application_name=x&sslcert=/c.pem&sslkey=/k.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgresql://u:pw@h:5432/db?application_name=x");
        assert_eq!(o.mode, Mode::VerifyFull);
        assert_eq!(o.rootcert.as_deref(), Some("/tmp/ca.pem"));
        assert_eq!(o.cert.as_deref(), Some("/c.pem"));
        assert_eq!(o.key.as_deref(), Some("/k.pem"));

        let (rest, o) = split("postgres://h/db?sslmode=require").unwrap();
        assert_eq!((rest.as_str(), o.mode), ("postgres://h/db", Mode::Require));
        let (rest, o) = split("postgres://h/db").unwrap();
        assert_eq!((rest.as_str(), o.mode), ("postgres://h/db", Mode::Prefer));

        let (rest, o) =
            split("host=h sslmode = verify-ca user=u sslrootcert='/a b/ca.pem' password='x\\'y'")
                .unwrap();
        assert_eq!(rest, "host=h  user=u  password='x\\'y'");
        assert_eq!(o.mode, Mode::VerifyCa);
        assert_eq!(o.rootcert.as_deref(), Some("/a b/ca.pem"));
        let config: Config = rest.parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"x'y"[..]));

        assert!(split("host=h sslmode=verify")
            .unwrap_err()
            .contains("sslmode=verify"));
        assert!(split("postgres://h/db?sslmode=strict").is_err());
    }
}
