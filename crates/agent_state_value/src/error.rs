//! The failures of the value layer: what is wrong with a document, as the kinds the library
//! reports (the core turns each into its own `Error` of the same kind, message unchanged).

use std::fmt;

/// Result alias of the value layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What is wrong with a document or a state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Not a JSON object where one is required.
    InvalidArgument(String),
    /// Not well-formed JSON (syntax, invalid UTF-8, lone surrogate, nesting beyond the
    /// parser's limit).
    Json(String),
    /// JSON, but not a value the storage codec accepts.
    Codec(String),
    /// Over the size cap the caller gave.
    TooLarge(String),
    /// A state read back from the store does not decode: it was changed behind the library's
    /// back.
    Corrupt(String),
    /// A JSON Patch (RFC 6902) is malformed, or one of its operations cannot be applied to the
    /// state, or a `test` does not hold: which one and why.
    Patch(crate::json_patch::PatchError),
    /// A JSON Pointer names nothing in the state (a read of one path).
    NoSuchPath(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Json(m) => write!(f, "malformed JSON: {m}"),
            Error::Codec(m) => write!(f, "codec error: {m}"),
            Error::TooLarge(m) => write!(f, "too large: {m}"),
            Error::Corrupt(m) => write!(f, "storage error: the stored state is corrupt: {m}"),
            Error::Patch(e) => write!(f, "JSON Patch: {e}"),
            Error::NoSuchPath(m) => write!(f, "no such path: {m}"),
        }
    }
}

impl std::error::Error for Error {}
