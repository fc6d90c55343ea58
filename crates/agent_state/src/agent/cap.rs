//! One handle's cap on an encoded state: how large, where it came from, and the error that
//! says which cap refused a write and how to raise it.
//!
//! A store remembers the cap it was given (`store_max_value_bytes`), so that a state one
//! handle was allowed to store stays writable by the next handle opened with the defaults; a
//! handle's own `max_value_bytes` still wins. When a write is refused, the message names the
//! cap in force and both ways to raise it, and says so when the stored state was already over
//! it (a handle with a larger cap wrote it): a small patch refused because of the whole state
//! should never be a mystery.

use crate::error::Error;
use crate::options::{OpenOptions, DEFAULT_MAX_VALUE_BYTES};

/// Where a handle's cap came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The handle's own `max_value_bytes`.
    Handle,
    /// The store's `store_max_value_bytes`.
    Store,
    /// Neither was given: [`DEFAULT_MAX_VALUE_BYTES`].
    Default,
}

/// A handle's cap on an encoded state (and on an input document).
#[derive(Debug, Clone, Copy)]
pub(super) struct Cap {
    pub bytes: usize,
    pub source: Source,
}

impl Cap {
    /// The handle's own cap when given, else the store's (`stored`), else the default.
    pub fn resolve(options: &OpenOptions, stored: Option<usize>) -> Cap {
        match (options.max_value_bytes, stored) {
            (Some(bytes), _) => Cap {
                bytes,
                source: Source::Handle,
            },
            (None, Some(bytes)) => Cap {
                bytes,
                source: Source::Store,
            },
            (None, None) => Cap {
                bytes: DEFAULT_MAX_VALUE_BYTES,
                source: Source::Default,
            },
        }
    }

    /// The cap in words, for a message: which it is and its size.
    pub fn describe(&self) -> String {
        let bytes = self.bytes;
        match self.source {
            Source::Handle => format!("this handle's max_value_bytes ({bytes})"),
            Source::Store => format!("the store's cap, store_max_value_bytes ({bytes})"),
            Source::Default => format!(
                "the default cap ({bytes} bytes: no max_value_bytes given, none recorded for \
                 the store)"
            ),
        }
    }

    /// An input document refused as over the cap, its message completed with which cap it
    /// is and how to raise it; other errors as they are.
    pub fn explain(&self, error: Error) -> Error {
        match error {
            Error::TooLarge(m) => Error::TooLarge(format!(
                "{m}: the cap is {}; to raise it, open the agent with a larger \
                 max_value_bytes, or record one for every handle of the store with \
                 store_max_value_bytes",
                self.describe()
            )),
            other => other,
        }
    }

    /// A state of `size` bytes would be over the cap; `stored` is the size of the state it
    /// came from, when there is one.
    pub fn refuses_state(&self, size: usize, stored: Option<usize>) -> Error {
        let already = match stored {
            Some(stored) if stored > self.bytes => format!(
                " (the stored state is already {stored} bytes: a handle with a larger cap wrote \
                 it)"
            ),
            _ => String::new(),
        };
        Error::TooLarge(format!(
            "the encoded state would be {size} bytes, over {}{already}; nothing was written. \
             To allow it, open the agent with max_value_bytes of at least {size}, or record \
             that cap for every handle of the store with store_max_value_bytes",
            self.describe()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handles_own_cap_wins_then_the_stores_then_the_default() {
        let mut options = OpenOptions::default();
        let cap = Cap::resolve(&options, None);
        assert_eq!(
            (cap.bytes, cap.source),
            (DEFAULT_MAX_VALUE_BYTES, Source::Default)
        );
        let cap = Cap::resolve(&options, Some(10));
        assert_eq!((cap.bytes, cap.source), (10, Source::Store));
        options.max_value_bytes = Some(5);
        let cap = Cap::resolve(&options, Some(10));
        assert_eq!((cap.bytes, cap.source), (5, Source::Handle));
    }

    #[test]
    fn a_refusal_names_the_cap_and_how_to_raise_it() {
        let cap = Cap {
            bytes: 100,
            source: Source::Default,
        };
        let Error::TooLarge(m) = cap.refuses_state(150, Some(140)) else {
            panic!("not TooLarge")
        };
        for part in [
            "150 bytes",
            "the default cap (100 bytes",
            "already 140 bytes",
            "max_value_bytes of at least 150",
            "store_max_value_bytes",
        ] {
            assert!(m.contains(part), "{part:?} not in {m:?}");
        }
    }
}
