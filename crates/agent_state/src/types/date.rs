//! `{"$date": "YYYY-MM-DDTHH:MM:SS.sssZ"}`: JavaScript's `Date`, Python's aware `datetime`, Go's
//! `time.Time`. As a type ([`Date`]) or, for a field of `time::OffsetDateTime`, as this module
//! used with `#[serde(with = "agent_state::types::date")]`.
//!
//! Written in UTC with the shortest fraction of 3, 6 or 9 digits that holds the instant
//! exactly (what every binding writes: a whole millisecond reads the same in JavaScript); read
//! from any of the three. The codec stores years 0000 to 9999 only: an instant outside them
//! cannot be written ([`crate::Error::Serde`]).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use time::OffsetDateTime;
//!
//! #[derive(Serialize, Deserialize)]
//! struct Reply {
//!     #[serde(with = "agent_state::types::date")]
//!     at: OffsetDateTime,
//! }
//!
//! let reply = Reply { at: OffsetDateTime::from_unix_timestamp_nanos(1_500_000).unwrap() };
//! let text = serde_json::to_string(&reply).unwrap();
//! assert_eq!(text, r#"{"at":{"$date":"1970-01-01T00:00:00.001500Z"}}"#);
//! let back: Reply = serde_json::from_str(&text).unwrap();
//! assert_eq!(back.at, reply.at);
//! ```

use std::time::SystemTime;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{self, Serialize, Serializer};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// An instant, stored as the codec's `$date` (see the module's text). Ordered, hashable, plain
/// data (`Copy`, `Send`, `Sync`).
///
/// ```
/// use agent_state::types::Date;
///
/// let d = Date::from_unix_millis(0).unwrap();
/// assert_eq!(serde_json::to_string(&d).unwrap(), r#"{"$date":"1970-01-01T00:00:00.000Z"}"#);
/// assert_eq!(d.unix_millis(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(pub OffsetDateTime);

impl Date {
    /// Now, by the system clock.
    pub fn now() -> Date {
        Date(OffsetDateTime::now_utc())
    }

    /// The instant `ms` milliseconds after the Unix epoch (before it when negative), as
    /// JavaScript's `new Date(ms)`; `None` beyond what `time` represents.
    pub fn from_unix_millis(ms: i64) -> Option<Date> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .ok()
            .map(Date)
    }

    /// Milliseconds since the Unix epoch (JavaScript's `getTime()`), finer parts dropped
    /// toward the past.
    pub fn unix_millis(&self) -> i64 {
        let nanos = self.0.unix_timestamp_nanos();
        i64::try_from(nanos.div_euclid(1_000_000)).unwrap_or(i64::MAX)
    }

    /// The codec's text of the instant: UTC, 3, 6 or 9 fraction digits. `None` outside the
    /// years 0000 to 9999.
    pub fn to_codec_text(&self) -> Option<String> {
        let t = self.0.to_offset(UtcOffset::UTC);
        if !(0..=9999).contains(&t.year()) {
            return None;
        }
        let nanos = t.nanosecond();
        let fraction = if nanos.is_multiple_of(1_000_000) {
            format!("{:03}", nanos / 1_000_000)
        } else if nanos.is_multiple_of(1000) {
            format!("{:06}", nanos / 1000)
        } else {
            format!("{nanos:09}")
        };
        Some(format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{fraction}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ))
    }
}

impl From<OffsetDateTime> for Date {
    fn from(t: OffsetDateTime) -> Date {
        Date(t)
    }
}

impl From<Date> for OffsetDateTime {
    fn from(d: Date) -> OffsetDateTime {
        d.0
    }
}

impl From<SystemTime> for Date {
    fn from(t: SystemTime) -> Date {
        Date(OffsetDateTime::from(t))
    }
}

impl From<Date> for SystemTime {
    fn from(d: Date) -> SystemTime {
        SystemTime::from(d.0)
    }
}

impl Serialize for Date {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for Date {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize(deserializer).map(Date)
    }
}

/// Writes `t` as a `$date` (for `#[serde(with = "agent_state::types::date")]`).
pub fn serialize<S: Serializer>(t: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
    let text = Date(*t).to_codec_text().ok_or_else(|| {
        ser::Error::custom(format_args!(
            "the date {t} is outside the years 0000 to 9999, which the codec stores"
        ))
    })?;
    super::write_tagged(serializer, "$date", &text)
}

/// Reads a `$date` (for `#[serde(with = "agent_state::types::date")]`), in UTC.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<OffsetDateTime, D::Error> {
    let inner = super::read_tagged(deserializer, "$date", "a date")?;
    let Value::String(text) = &inner else {
        return Err(de::Error::custom("$date must be a string"));
    };
    OffsetDateTime::parse(text, &Rfc3339)
        .map(|t| t.to_offset(UtcOffset::UTC))
        .map_err(|e| de::Error::custom(format_args!("$date {text:?} is not a timestamp: {e}")))
}

#[cfg(feature = "chrono")]
mod chrono_dates {
    use super::Date;
    use time::OffsetDateTime;

    /// A `chrono` instant, to the nanosecond.
    impl From<chrono::DateTime<chrono::Utc>> for Date {
        fn from(t: chrono::DateTime<chrono::Utc>) -> Date {
            let nanos =
                i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
            // chrono's range (years ±262,143) is within time's with its large dates off only
            // up to ±9999; beyond that the instant is clamped, and the codec refuses it anyway.
            Date(
                OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(if nanos < 0 {
                    time::PrimitiveDateTime::MIN.assume_utc()
                } else {
                    time::PrimitiveDateTime::MAX.assume_utc()
                }),
            )
        }
    }

    /// The same instant as a `chrono` one.
    impl From<Date> for chrono::DateTime<chrono::Utc> {
        fn from(d: Date) -> chrono::DateTime<chrono::Utc> {
            let nanos = d.0.unix_timestamp_nanos();
            let secs = nanos.div_euclid(1_000_000_000) as i64;
            let sub = nanos.rem_euclid(1_000_000_000) as u32;
            chrono::DateTime::from_timestamp(secs, sub).unwrap_or_default()
        }
    }
}
