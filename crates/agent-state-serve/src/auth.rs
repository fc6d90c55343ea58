//! The bearer token: where it comes from, and the one check every request passes first.

use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_state::{Error, Result};

/// The fewest bits a token read from a file must carry, by [`estimated_bits`].
pub const MIN_TOKEN_BITS: u32 = 128;
/// The fewest distinct characters a token read from a file must have (a long run of one
/// character has the length, not the entropy).
const MIN_DISTINCT_CHARS: usize = 8;

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

    /// The token in `path`: its content without surrounding whitespace, visible ASCII
    /// characters only (so it can travel in a header and a URL unchanged), of at least
    /// [`MIN_TOKEN_BITS`] by [`estimated_bits`] and [`MIN_DISTINCT_CHARS`] distinct characters.
    /// Fails with `InvalidArgument` when the file cannot be read, is readable by its group or
    /// by others (mode & 0o077), or holds a token that is malformed or too weak.
    pub fn from_file(path: &Path) -> Result<Token> {
        let refused =
            |why: String| Error::InvalidArgument(format!("--token-file {}: {why}", path.display()));
        let metadata = std::fs::metadata(path).map_err(|e| refused(e.to_string()))?;
        let mode = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions());
        if mode & 0o077 != 0 {
            return Err(refused(format!(
                "readable by its group or by others (mode {:o}): make it private \
                 (chmod 600)",
                mode & 0o777
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| refused(e.to_string()))?;
        let token = text.trim();
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(refused(
                "the token must be visible ASCII characters (no spaces inside)".into(),
            ));
        }
        let distinct = distinct_chars(token);
        let bits = estimated_bits(token);
        if bits < MIN_TOKEN_BITS || distinct < MIN_DISTINCT_CHARS {
            return Err(refused(format!(
                "the token is too weak to resist guessing (about {bits} bits from {} characters, \
                 {distinct} distinct): at least {MIN_TOKEN_BITS} bits and {MIN_DISTINCT_CHARS} \
                 distinct characters are needed, e.g. 32 random hex digits or 22 random \
                 base64url characters (openssl rand -hex 16)",
                token.len()
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

/// The entropy a token would have if each character were drawn at random from the smallest
/// usual alphabet that holds all of them: 16 (hex digits, one case), 64 (base64url: letters,
/// digits, `-`, `_`) or 94 (visible ASCII); bits = length × log2(alphabet), rounded down. An
/// estimate of the best case: a token typed by a person has less.
pub fn estimated_bits(token: &str) -> u32 {
    let bytes = token.as_bytes();
    let lower_hex = bytes
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    let upper_hex = bytes
        .iter()
        .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b));
    let base64url = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
    let bits_per_char = if lower_hex || upper_hex {
        4.0
    } else if base64url {
        6.0
    } else {
        94f64.log2()
    };
    (bytes.len() as f64 * bits_per_char).floor() as u32
}

fn distinct_chars(token: &str) -> usize {
    let mut seen = [false; 256];
    token.bytes().for_each(|b| seen[usize::from(b)] = true);
    seen.iter().filter(|&&s| s).count()
}

/// The token a request presents: its `Authorization` header's credentials when its scheme is
/// `Bearer` (in any case, RFC 7235), else its `access_token` query parameter (already
/// percent-decoded).
pub fn presented<'a>(
    authorization: Option<&'a [u8]>,
    query_token: Option<&'a [u8]>,
) -> Option<&'a [u8]> {
    authorization
        .and_then(|value| {
            let (scheme, rest) = value.split_at_checked(6)?;
            let credentials = rest.strip_prefix(b" ")?;
            scheme
                .eq_ignore_ascii_case(b"bearer")
                .then(|| credentials.trim_ascii_start())
        })
        .or(query_token)
}

/// Wrong tokens presented without delay before they are slowed, and the first and the
/// longest delay after that.
pub const FREE_FAILURES: u32 = 10;
pub const FIRST_DELAY: Duration = Duration::from_millis(50);
pub const MAX_DELAY: Duration = Duration::from_secs(2);
/// A quiet time after which the wrong tokens seen before are forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// Slows guessing: every wrong token (whoever presents it: the count is the server's, not a
/// connection's or an address's) is answered no earlier than its turn: after [`FREE_FAILURES`]
/// turns are [`FIRST_DELAY`] after the previous one, doubling up to [`MAX_DELAY`], and never
/// more than [`MAX_DELAY`] after the token came (so a parallel flood is slowed, each of its
/// connections held at most that long, rather than queued without end). A
/// request with the right token never waits. The delay depends on how many wrong tokens came,
/// never on what they were, so the comparison stays constant-time. Thread-safe (one lock, held
/// for a few instructions).
#[derive(Default)]
pub struct Guesses {
    state: Mutex<GuessState>,
}

#[derive(Default)]
struct GuessState {
    failures: u32,
    /// When the last wrong token is answered.
    last_turn: Option<Instant>,
}

impl Guesses {
    /// Records a wrong token at `now` and returns when it may be answered.
    pub fn turn(&self, now: Instant) -> Instant {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state
            .last_turn
            .is_some_and(|last| now.saturating_duration_since(last) > FORGET_AFTER)
        {
            state.failures = 0;
        }
        state.failures = state.failures.saturating_add(1);
        let turn = match state.failures.checked_sub(FREE_FAILURES + 1) {
            None => now,
            Some(doublings) => {
                let delay = FIRST_DELAY
                    .saturating_mul(1u32.checked_shl(doublings).unwrap_or(u32::MAX))
                    .min(MAX_DELAY);
                // After the previous wrong token's turn, but never more than MAX_DELAY away: a
                // flood of them in parallel holds no connection longer than that.
                (state.last_turn.map_or(now, |last| last.max(now)) + delay).min(now + MAX_DELAY)
            }
        };
        state.last_turn = Some(turn);
        turn
    }
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
        assert_eq!(presented(Some(b"bearer a"), None), Some(&b"a"[..]));
        assert_eq!(presented(Some(b"BEARER  a"), None), Some(&b"a"[..]));
        assert_eq!(presented(Some(b"Bearerx a"), None), None);
        assert_eq!(presented(Some(b"Basic a"), Some(b"b")), Some(&b"b"[..]));
        assert_eq!(presented(None, None), None);
    }

    #[test]
    fn weak_tokens_are_estimated_weak() {
        assert_eq!(estimated_bits("aaaaaaaaaaaaaaaa"), 64);
        assert_eq!(estimated_bits(&"0123456789abcdef".repeat(2)), 128);
        assert_eq!(estimated_bits("serve-test-token-0123456789"), 162);
        assert_eq!(estimated_bits("!aaaaaaaaaaaaaaaaaa"), 124);
        assert_eq!(distinct_chars(&"a".repeat(40)), 1);
        let generated = Token::generate().unwrap();
        assert!(estimated_bits(generated.reveal()) >= MIN_TOKEN_BITS);
    }

    #[test]
    fn wrong_tokens_past_the_free_ones_wait_longer_each_time() {
        let guesses = Guesses::default();
        let now = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(guesses.turn(now), now);
        }
        // One after the other (each comes when the previous is answered): the wait doubles.
        let mut at = now;
        for expected in [50, 100, 200, 400, 800, 1600, 2000, 2000] {
            let turn = guesses.turn(at);
            assert_eq!(turn - at, Duration::from_millis(expected));
            at = turn;
        }
        // All at once: each after the previous one's turn, but never more than MAX_DELAY away.
        let turns: Vec<_> = (0..5).map(|_| guesses.turn(at)).collect();
        assert!(
            turns.iter().all(|&turn| turn - at == MAX_DELAY),
            "{turns:?}"
        );
        // Forgotten after a quiet minute.
        let later = at + FORGET_AFTER * 2;
        assert_eq!(guesses.turn(later), later);
    }

    #[test]
    fn generated_tokens_differ() {
        let (a, b) = (Token::generate().unwrap(), Token::generate().unwrap());
        assert_eq!(a.reveal().len(), 32);
        assert_ne!(a.reveal(), b.reveal());
    }
}
