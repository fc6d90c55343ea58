//! The TLS settings of a URI that the client does not know, taken out before it parses the
//! URI ([`split`]).

use super::super::uri::take_params;

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
/// check). See the book's guide "PostgreSQL in production", its TLS section.
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
    let rest = take_params(uri, &mut take)?;
    Ok((rest, options))
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
