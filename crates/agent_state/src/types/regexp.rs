//! `{"$regexp": {"source": ..., "flags": ...}}`: JavaScript's `RegExp`.

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// A JavaScript regular expression, stored as the codec's `$regexp`: its source and flags
/// (distinct letters of `dgimsuvy`, checked by the codec on write), as JavaScript holds them.
/// Rust's `regex` crate reads another dialect: with the feature `regex`,
/// `RegExp::to_regex` compiles the source with the flags it has a meaning for. Plain data.
///
/// ```
/// use agent_state::types::RegExp;
///
/// let r = RegExp::new("^hi", "i");
/// assert_eq!(
///     serde_json::to_string(&r).unwrap(),
///     r#"{"$regexp":{"source":"^hi","flags":"i"}}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RegExp {
    /// The pattern, as JavaScript's `source`.
    pub source: String,
    /// The flags, as JavaScript's `flags`.
    pub flags: String,
}

impl RegExp {
    /// The expression `/source/flags`.
    pub fn new(source: impl Into<String>, flags: impl Into<String>) -> RegExp {
        RegExp {
            source: source.into(),
            flags: flags.into(),
        }
    }

    /// The expression compiled by the `regex` crate, with the flags `i`, `m` and `s` as its
    /// own (`(?ims)`); `g`, `y` and `d` are about how JavaScript iterates and have no
    /// counterpart, `u` and `v` are its default. Errors: [`crate::Error::InvalidArgument`]
    /// when `regex` cannot compile the source (JavaScript's dialect differs: lookaround and
    /// backreferences are not supported).
    #[cfg(feature = "regex")]
    pub fn to_regex(&self) -> crate::Result<regex::Regex> {
        let inline: String = self.flags.chars().filter(|f| "ims".contains(*f)).collect();
        let pattern = if inline.is_empty() {
            self.source.clone()
        } else {
            format!("(?{inline}){}", self.source)
        };
        regex::Regex::new(&pattern).map_err(|e| {
            crate::Error::InvalidArgument(format!(
                "the regular expression /{}/{} does not compile in Rust: {e}",
                self.source, self.flags
            ))
        })
    }
}

impl Serialize for RegExp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Inner<'a>(&'a RegExp);
        impl Serialize for Inner<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("source", &self.0.source)?;
                map.serialize_entry("flags", &self.0.flags)?;
                map.end()
            }
        }
        super::write_tagged(serializer, "$regexp", &Inner(self))
    }
}

impl<'de> Deserialize<'de> for RegExp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let inner = super::read_tagged(deserializer, "$regexp", "a regular expression")?;
        match (inner.get("source"), inner.get("flags")) {
            (Some(Value::String(source)), Some(Value::String(flags))) => {
                Ok(RegExp::new(source.as_str(), flags.as_str()))
            }
            _ => Err(de::Error::custom(
                "$regexp must be {\"source\": <string>, \"flags\": <string>}",
            )),
        }
    }
}
