//! RFC 6901 JSON Pointers: `/messages/0/text` names one place in a document.
//!
//! A pointer is `""` (the whole document) or a sequence of reference tokens, each after a `/`,
//! in which `~1` stands for `/` and `~0` for `~`; any other `~` is malformed. Against an array a
//! token is an index: `0`, or digits without a leading zero, below the array's length (`-`, the
//! place after the last element, exists only where JSON Patch's `add` asks for it). Parsing
//! checks the syntax only; whether a place exists depends on the document it is used with.

use std::fmt;

use serde_json::Value;

/// A parsed JSON Pointer (RFC 6901).
///
/// Owns its tokens; cheap to clone for short pointers. Immutable and `Send + Sync`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pointer {
    tokens: Vec<String>,
}

/// Why a pointer's text is not a JSON Pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it, in words.
    pub reason: String,
}

impl fmt::Display for PointerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a JSON Pointer: {}", self.text, self.reason)
    }
}

impl std::error::Error for PointerError {}

/// What an array index token means for an array of some length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// An element's index (not yet checked against the length).
    At(usize),
    /// `-`: the place after the last element.
    End,
}

impl Pointer {
    /// The pointer to the whole document (`""`).
    pub fn root() -> Pointer {
        Pointer { tokens: Vec::new() }
    }

    /// Parses `text` (RFC 6901 syntax: `""`, or `/` followed by tokens with `~0` and `~1`
    /// escapes). A text not starting with `/`, or with a `~` not followed by `0` or `1`, is an
    /// error.
    pub fn parse(text: &str) -> Result<Pointer, PointerError> {
        if text.is_empty() {
            return Ok(Pointer::root());
        }
        let bad = |reason: &str| PointerError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(rest) = text.strip_prefix('/') else {
            return Err(bad("a pointer is empty or starts with '/'"));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            let mut token = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    token.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => token.push('~'),
                    Some('1') => token.push('/'),
                    _ => return Err(bad("'~' is followed by neither '0' nor '1'")),
                }
            }
            tokens.push(token);
        }
        Ok(Pointer { tokens })
    }

    /// The reference tokens, unescaped.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// True for the pointer to the whole document.
    pub fn is_root(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The pointer to the parent of this place and the last token; `None` for the root.
    pub fn split_last(&self) -> Option<(Pointer, &str)> {
        let (last, parent) = self.tokens.split_last()?;
        Some((
            Pointer {
                tokens: parent.to_vec(),
            },
            last,
        ))
    }

    /// True when `self` is a proper prefix of `other` (a place strictly inside `self`'s).
    pub fn is_proper_prefix_of(&self, other: &Pointer) -> bool {
        self.tokens.len() < other.tokens.len() && other.tokens.starts_with(&self.tokens)
    }

    /// The value at this place of `doc`, if there is one.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        self.tokens.iter().try_fold(doc, |at, token| match at {
            Value::Object(map) => map.get(token),
            Value::Array(items) => match array_index(token)? {
                Index::At(i) => items.get(i),
                Index::End => None,
            },
            _ => None,
        })
    }

    /// The value at this place of `doc`, mutable, if there is one.
    pub fn get_mut<'a>(&self, doc: &'a mut Value) -> Option<&'a mut Value> {
        self.tokens.iter().try_fold(doc, |at, token| match at {
            Value::Object(map) => map.get_mut(token),
            Value::Array(items) => match array_index(token)? {
                Index::At(i) => items.get_mut(i),
                Index::End => None,
            },
            _ => None,
        })
    }
}

/// A token as an array index: `-`, `0`, or ASCII digits without a leading zero that fit a
/// `usize`; `None` for anything else (`01`, `+1`, `1.0`, `x`).
pub fn array_index(token: &str) -> Option<Index> {
    if token == "-" {
        return Some(Index::End);
    }
    let digits = token.as_bytes();
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
    {
        return None;
    }
    token.parse().ok().map(Index::At)
}

impl fmt::Display for Pointer {
    /// The pointer's text, escaped (`~0`, `~1`): what [`Pointer::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for token in &self.tokens {
            f.write_str("/")?;
            f.write_str(&token.replace('~', "~0").replace('/', "~1"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 6901, section 5: every pointer of the example against its document.
    #[test]
    fn the_rfcs_examples_resolve() {
        let doc = json!({
            "foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4,
            "i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8
        });
        let cases = [
            ("", doc.clone()),
            ("/foo", json!(["bar", "baz"])),
            ("/foo/0", json!("bar")),
            ("/", json!(0)),
            ("/a~1b", json!(1)),
            ("/c%d", json!(2)),
            ("/e^f", json!(3)),
            ("/g|h", json!(4)),
            ("/i\\j", json!(5)),
            ("/k\"l", json!(6)),
            ("/ ", json!(7)),
            ("/m~0n", json!(8)),
        ];
        for (text, want) in cases {
            let pointer = Pointer::parse(text).unwrap();
            assert_eq!(pointer.get(&doc), Some(&want), "{text}");
            assert_eq!(pointer.to_string(), text, "round trip of {text}");
        }
    }

    #[test]
    fn malformed_pointers_are_refused_with_the_reason() {
        for text in ["foo", "/a~2", "/a~", "~0"] {
            let err = Pointer::parse(text).unwrap_err();
            assert_eq!(err.text, text);
            assert!(err.to_string().contains("is not a JSON Pointer"), "{err}");
        }
    }

    #[test]
    fn array_indexes_are_digits_without_a_leading_zero() {
        assert_eq!(array_index("0"), Some(Index::At(0)));
        assert_eq!(array_index("10"), Some(Index::At(10)));
        assert_eq!(array_index("-"), Some(Index::End));
        for bad in [
            "01",
            "00",
            "",
            "+1",
            "-1",
            "1.0",
            "1e1",
            "x",
            "99999999999999999999999",
        ] {
            assert_eq!(array_index(bad), None, "{bad:?}");
        }
        let doc = json!({"a": [1, 2]});
        assert_eq!(Pointer::parse("/a/01").unwrap().get(&doc), None);
        assert_eq!(Pointer::parse("/a/2").unwrap().get(&doc), None);
        assert_eq!(Pointer::parse("/a/-").unwrap().get(&doc), None);
    }

    #[test]
    fn prefixes_and_parents() {
        let a = Pointer::parse("/a/b").unwrap();
        let ab = Pointer::parse("/a/b/c").unwrap();
        assert!(a.is_proper_prefix_of(&ab));
        assert!(!a.is_proper_prefix_of(&a));
        assert!(!ab.is_proper_prefix_of(&a));
        assert!(Pointer::root().is_proper_prefix_of(&a));
        let (parent, last) = ab.split_last().unwrap();
        assert_eq!((parent.to_string().as_str(), last), ("/a/b", "c"));
        assert!(Pointer::root().split_last().is_none());
    }
}
