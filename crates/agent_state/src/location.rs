//! Where a store is: a SQLite file or a PostgreSQL server, said as what it is.
//!
//! A URI is not a file path, so the Rust API does not take one as a [`Path`]: a [`Location`]
//! is either a [`Location::File`] (a path, opened as a SQLite file, `":memory:"` included) or
//! a [`Location::Server`] (a `postgres://` or `postgresql://` URI). Text (`&str`, `String`)
//! is read by its scheme, which is how every other language's binding reads its location
//! argument. A [`Path`] or [`PathBuf`] is read the same way, as the C ABI and the command read
//! the location they are given (a program that kept a URI in a `PathBuf` opens the server it
//! names); [`Location::file`] is a file whatever its name looks like.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A store's location: a SQLite file or a PostgreSQL server.
///
/// Built from text or a path by its scheme (`From<&str>`, `From<String>`, `From<&Path>`,
/// `From<PathBuf>`: `postgres://` and `postgresql://` are servers, anything else a file path),
/// as a file whatever its name ([`Location::file`]), or checked as a server
/// ([`Location::server`]). Cheap to clone; `Send` and `Sync`; it opens nothing by itself.
///
/// ```
/// use std::path::Path;
/// use agent_state::Location;
///
/// assert!(matches!(Location::from("conv.db"), Location::File(_)));
/// assert!(matches!(Location::from("postgresql://app@db/agents"), Location::Server(_)));
/// assert!(matches!(Location::from(Path::new("conv.db")), Location::File(_)));
/// // A file, whatever its name looks like.
/// assert!(matches!(Location::file("postgres://x"), Location::File(_)));
/// assert!(Location::server("conv.db").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Location {
    /// A SQLite file (created on first open unless `read_only`). `":memory:"` is a store
    /// private to the handle, gone when it closes.
    File(PathBuf),
    /// A PostgreSQL server and database, as a `postgres://` or `postgresql://` URI (libpq's
    /// form; `agent_id` is then required). Needs the crate's `postgres` feature (a default).
    Server(String),
}

impl Location {
    /// A server location from `uri`, checked: [`Error::InvalidArgument`] when it is not a
    /// `postgres://` or `postgresql://` URI (the rest of it is read when the store opens).
    pub fn server(uri: impl Into<String>) -> Result<Location> {
        let uri = uri.into();
        if !is_server_uri(&uri) {
            return Err(Error::InvalidArgument(format!(
                "{uri:?} is not a PostgreSQL URI (postgres://... or postgresql://...)"
            )));
        }
        Ok(Location::Server(uri))
    }

    /// A file location at `path`, whatever its name looks like (a file named like a URI is
    /// opened as a file, relative to the working directory).
    pub fn file(path: impl Into<PathBuf>) -> Location {
        Location::File(path.into())
    }

    /// The private in-memory store (`":memory:"`): each handle opened on it has its own.
    pub fn memory() -> Location {
        Location::File(PathBuf::from(":memory:"))
    }

    /// The path the store layer reads: a server's URI as its text, a file whose name would read
    /// as a URI with `./` before it (so that it stays a file).
    pub(crate) fn store_path(&self) -> Cow<'_, Path> {
        match self {
            Location::Server(uri) => Cow::Borrowed(Path::new(uri.as_str())),
            Location::File(path) if path.to_str().is_some_and(is_server_uri) => {
                Cow::Owned(Path::new(".").join(path))
            }
            Location::File(path) => Cow::Borrowed(path.as_path()),
        }
    }
}

fn is_server_uri(text: &str) -> bool {
    matches!(text.split_once("://"), Some(("postgres" | "postgresql", _)))
}

impl From<&str> for Location {
    fn from(text: &str) -> Location {
        Location::from(text.to_string())
    }
}

impl From<String> for Location {
    fn from(text: String) -> Location {
        if is_server_uri(&text) {
            Location::Server(text)
        } else {
            Location::File(PathBuf::from(text))
        }
    }
}

impl From<&String> for Location {
    fn from(text: &String) -> Location {
        Location::from(text.as_str())
    }
}

/// Read by its scheme when it is UTF-8 (as the C ABI reads its path argument), else a file.
impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::from(path.to_path_buf())
    }
}

/// Read by its scheme when it is UTF-8, else a file.
impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        match path.into_os_string().into_string() {
            Ok(text) => Location::from(text),
            Err(other) => Location::File(PathBuf::from(other)),
        }
    }
}

/// Read by its scheme when it is UTF-8, else a file.
impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::from(path.as_path())
    }
}

impl From<&Location> for Location {
    fn from(location: &Location) -> Location {
        location.clone()
    }
}

/// The file's path, or the URI with its password hidden (a location is often logged).
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Server(uri) => f.write_str(&without_password(uri)),
        }
    }
}

/// `uri` with the password of its user information (`user:secret@`) replaced by `***`.
fn without_password(uri: &str) -> Cow<'_, str> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Cow::Borrowed(uri);
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return Cow::Borrowed(uri);
    };
    let Some(colon) = authority[..at].find(':') else {
        return Cow::Borrowed(uri);
    };
    Cow::Owned(format!(
        "{scheme}://{}:***{}",
        &authority[..colon],
        &rest[at..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_read_by_its_scheme_and_a_path_is_a_file() {
        assert_eq!(
            Location::from("postgres://h/db"),
            Location::Server("postgres://h/db".into())
        );
        assert_eq!(
            Location::from("pg.db"),
            Location::File(PathBuf::from("pg.db"))
        );
        assert_eq!(
            Location::from(Path::new("postgres://h/db")),
            Location::Server("postgres://h/db".into())
        );
        let odd = Location::file("postgres://h/db");
        assert_eq!(odd.store_path(), Path::new("./postgres://h/db"));
        assert_eq!(Location::memory().store_path(), Path::new(":memory:"));
    }

    #[test]
    fn a_password_is_not_displayed() {
        let l = Location::from("postgresql://app:s3cret@db:5432/agents?sslmode=require");
        assert_eq!(
            l.to_string(),
            "postgresql://app:***@db:5432/agents?sslmode=require"
        );
        assert_eq!(
            Location::from("postgres://app@db/x").to_string(),
            "postgres://app@db/x"
        );
    }
}
