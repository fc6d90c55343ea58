//! `{"$bigint": "<decimal digits>"}`: JavaScript's `bigint`, Python's int beyond 2^53, Go's
//! `*big.Int`.

use std::fmt::Display;
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};
use serde_json::Value;

/// An integer stored as the codec's `$bigint`, whatever its size: `T` is any integer type that
/// prints and parses its decimal digits (`i64`, `i128`, `u128`, `num_bigint::BigInt`, ...).
///
/// Reads a `$bigint`, and also a plain JSON integer (JavaScript writes a safe integer as a
/// number; a reader of a `$bigint` member gets both). A value out of `T`'s range is an error
/// ([`crate::Error::Serde`]). Plain data: `Send`/`Sync` as `T` is.
///
/// ```
/// use agent_state::types::BigInt;
///
/// let text = serde_json::to_string(&BigInt(-(1i128 << 100))).unwrap();
/// assert_eq!(text, r#"{"$bigint":"-1267650600228229401496703205376"}"#);
/// let back: BigInt<i128> = serde_json::from_str(&text).unwrap();
/// assert_eq!(back.0, -(1i128 << 100));
/// let plain: BigInt<u64> = serde_json::from_str("42").unwrap();
/// assert_eq!(plain, BigInt(42));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BigInt<T = i128>(pub T);

impl<T: Display> Serialize for BigInt<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        super::write_tagged(serializer, "$bigint", &self.0.to_string())
    }
}

impl<'de, T> Deserialize<'de> for BigInt<T>
where
    T: FromStr,
    T::Err: Display,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let digits = match &value {
            Value::Number(n) if !n.to_string().contains(['.', 'e', 'E']) => n.to_string(),
            Value::Object(map) if map.len() == 1 => match map.get("$bigint") {
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        if digits.is_empty() {
            return Err(de::Error::custom(format_args!(
                "expected a big integer ({{\"$bigint\": \"digits\"}} or an integer), found {}",
                super::short(&value)
            )));
        }
        digits.parse().map(BigInt).map_err(|e| {
            de::Error::custom(format_args!(
                "the integer {digits} does not fit {}: {e}",
                std::any::type_name::<T>()
            ))
        })
    }
}

impl<T> From<T> for BigInt<T> {
    fn from(n: T) -> Self {
        BigInt(n)
    }
}
