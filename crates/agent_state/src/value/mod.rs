//! The state value: everything about JSON states that needs no storage.
//!
//! [`json`] (strict I-JSON input), [`codec`] (which values may be stored), [`merge`]
//! (RFC 7396), [`snapshot`] (immutable shared states), [`scan`] (the fast path that checks and
//! encodes a state's text without building a value), and [`accept`], the one way bytes from
//! outside (a caller's patch or state, an initial-state hook's answer, an entry read back from
//! the store) become a checked state or a precise error. It knows nothing of storage or C: the
//! fuzz targets link only this.

pub mod accept;
pub mod codec;
pub mod json;
pub mod merge;
pub mod scan;
pub mod snapshot;
