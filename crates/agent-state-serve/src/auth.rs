//! The bearer token: where it comes from, and the one check every request passes first.

use std::fmt;
use std::path::Path;

use agent_state::{Error, Result};

/// The fewest characters a token read from a file may have: shorter ones are guessable.
const MIN_TOKEN_CHARS: usize = 16;

/// The secret a client presents, as `Authorization: Bearer TOKEN` or `?access_token=TOKEN`.
#[derive(Clone)]
pub struct Token(String);

impl fmt::Debug for Token {
    // Never printed by accident (a log line, a panic message).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// 128 random bits from the operating system, as 32 hex digits.
    pub fn generate() -> Result<Token> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::Storage(format!("cannot draw a random token: {e}").into()))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token in `path`: its content without surrounding whitespace, at least 16 visible
    /// ASCII characters (so it can travel in a header and a URL unchanged).
    pub fn from_file(path: &Path) -> Result<Token> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidArgument(format!("--token-file {}: {e}", path.display())))?;
        let token = text.trim();
        if token.len() < MIN_TOKEN_CHARS || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::InvalidArgument(format!(
                "--token-file {}: the token must be at least {MIN_TOKEN_CHARS} visible ASCII \
                 characters (no spaces inside)",
                path.display()
            )));
        }
        Ok(Token(token.to_string()))
    }

    /// The token's text, for the start-up lines that print a generated one.
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the token, in time that depends only on the lengths: every byte
    /// is compared whatever the first difference, so the timing tells nothing of the prefix.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        let mut difference = expected.len() ^ presented.len();
        for (i, &byte) in expected.iter().enumerate() {
            difference |= usize::from(byte ^ presented.get(i).copied().unwrap_or(0));
        }
        difference == 0
    }
}

/// The token a request presents: its `Authorization: Bearer` header, else its `access_token`
/// query parameter (already percent-decoded).
pub fn presented<'a>(
    authorization: Option<&'a [u8]>,
    query_token: Option<&'a [u8]>,
) -> Option<&'a [u8]> {
    authorization
        .and_then(|value| value.strip_prefix(b"Bearer ".as_slice()))
        .or(query_token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let token = Token("0123456789abcdef".into());
        assert!(token.matches(b"0123456789abcdef"));
        for wrong in [
            &b""[..],
            b"0123456789abcde",
            b"0123456789abcdeF",
            b"0123456789abcdef0",
        ] {
            assert!(!token.matches(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn the_header_wins_over_the_query() {
        assert_eq!(presented(Some(b"Bearer a"), Some(b"b")), Some(&b"a"[..]));
        assert_eq!(presented(Some(b"Basic a"), Some(b"b")), Some(&b"b"[..]));
        assert_eq!(presented(None, None), None);
    }

    #[test]
    fn generated_tokens_differ() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_eq!(a.reveal().len(), 32);
        assert_ne!(a.reveal(), b.reveal());
    }
}
