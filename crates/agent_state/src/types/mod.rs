//! The storage codec's extended types as Rust types, for states read and written through
//! serde ([`Agent::get`](crate::Agent::get), [`Agent::set`](crate::Agent::set)...).
//!
//! Each writes the codec's tagged value, exactly as the other languages' bindings write it,
//! and reads what they write:
//!
//! | stored | JavaScript | Rust |
//! | --- | --- | --- |
//! | `{"$date": "2026-11-30T03:06:44.123Z"}` | `Date` | [`Date`] (a `time::OffsetDateTime`; `From` a `SystemTime`, and `chrono`'s `DateTime<Utc>` with the feature `chrono`), or a field with `#[serde(with = "agent_state::types::date")]` |
//! | `{"$bigint": "-12345678901234567890"}` | `bigint` | [`BigInt<T>`] of any integer type with `Display` and `FromStr`: `i128`, `u128`, `num_bigint::BigInt` |
//! | `{"$map": [[k, v], ...]}` | `Map` | [`Map<C>`] of a `BTreeMap`, `HashMap` or `Vec<(K, V)>` (keys of any type) |
//! | `{"$set": [v, ...]}` | `Set` | [`Set<C>`] of a `BTreeSet`, `HashSet` or `Vec` |
//! | `{"$arraybuffer": "<base64>"}` | `ArrayBuffer` | [`Bytes<T>`] of a `Vec<u8>` or `bytes::Bytes`, or a field with `#[serde(with = "agent_state::types::bytes")]` |
//! | `{"$typedarray": {"type": ..., "base64": ...}}` | typed arrays, `DataView` | [`TypedArray`] |
//! | `{"$regexp": {"source": ..., "flags": ...}}` | `RegExp` | [`RegExp`] (to a `regex::Regex` with the feature `regex`) |
//!
//! A `HashMap` or `HashSet` writes its members in no fixed order, so two writes of equal ones
//! may store different bytes (and the codec refuses a set that holds a value twice, which a
//! `Vec` could): prefer the `BTree` kinds where bytes matter.
//!
//! ```
//! use std::collections::{BTreeMap, BTreeSet};
//! use serde::{Deserialize, Serialize};
//! use agent_state::types::{BigInt, Bytes, Date, Map, Set};
//! use agent_state::Agent;
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Session {
//!     started: Date,
//!     tags: Set<BTreeSet<String>>,
//!     scores: Map<BTreeMap<u32, String>>,
//!     id: BigInt<u128>,
//!     blob: Bytes,
//! }
//!
//! let agent = Agent::builder().open(":memory:")?;
//! let session = Session {
//!     started: Date::from_unix_millis(1_796_008_004_123).unwrap(),
//!     tags: Set(BTreeSet::from(["urgent".to_string()])),
//!     scores: Map(BTreeMap::from([(1, "one".to_string())])),
//!     id: BigInt(1 << 70),
//!     blob: Bytes(vec![0, 255]),
//! };
//! agent.replace(&session)?;
//! assert_eq!(
//!     agent.get_state()?.json(),
//!     br#"{"started":{"$date":"2026-11-30T03:06:44.123Z"},"tags":{"$set":["urgent"]},"scores":{"$map":[[1,"one"]]},"id":{"$bigint":"1180591620717411303424"},"blob":{"$arraybuffer":"AP8="}}"#
//! );
//! assert_eq!(agent.get::<Session>()?, session);
//! # Ok::<(), agent_state::Error>(())
//! ```

mod bigint;
mod binary;
mod collections;
pub mod date;
pub(crate) mod finite;
mod regexp;

pub use bigint::BigInt;
pub use binary::{bytes, Bytes, TypedArray};
pub use collections::{Map, MapEntries, Set};
pub use date::Date;
pub use regexp::RegExp;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

/// Writes `{"<tag>": inner}`.
fn write_tagged<S: Serializer, T: Serialize + ?Sized>(
    serializer: S,
    tag: &str,
    inner: &T,
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(1))?;
    map.serialize_entry(tag, inner)?;
    map.end()
}

/// Reads `{"<tag>": inner}` and gives `inner`; anything else is an error naming what was
/// expected (`what`).
fn read_tagged<'de, D: Deserializer<'de>>(
    deserializer: D,
    tag: &str,
    what: &str,
) -> Result<Value, D::Error> {
    match Value::deserialize(deserializer)? {
        Value::Object(mut map) if map.len() == 1 && map.contains_key(tag) => {
            Ok(map.remove(tag).unwrap_or(Value::Null))
        }
        other => Err(de::Error::custom(format_args!(
            "expected {what} (a {{\"{tag}\": ...}} tagged value), found {}",
            short(&other)
        ))),
    }
}

/// A value's JSON, cut short for a message.
fn short(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > 60 {
        let mut end = 57;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}
