//! The bounds on what a client can make the server hold: each one a `serve` flag with the
//! default here (PROTOCOL.md, "Limits").

use std::time::Duration;

/// The changes of one `/changes` page when the request names no `limit`.
pub const DEFAULT_CHANGES_LIMIT: usize = 100;
/// The largest `limit` a `/changes` request may name.
pub const MAX_CHANGES_LIMIT: usize = 1000;
/// `--page-bytes`' default: the JSON of a `/changes` page's changes stays within 1 MiB, but for
/// a page's first change, which is sent whatever its size so that paging always moves on.
pub const DEFAULT_PAGE_BYTES: usize = 1024 * 1024;
/// `--header-timeout`'s default: a connection sends each request's complete headers within
/// 10 s of its opening or of the end of the previous answer (nginx allows 60 s, hyper 30 s; a
/// dashboard on the same machine needs milliseconds).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// `--write-timeout`'s default: a client that reads nothing of its answer for 30 s is dropped.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// `--max-http-connections`' default: HTTP connections open at once, counted as they are accepted.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// `--max-streams`' default: watch streams open at once.
pub const DEFAULT_MAX_STREAMS: usize = 2048;
/// `--shutdown-timeout`'s default: how long open requests and streams get to finish after
/// SIGINT or SIGTERM before the process exits with them open.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The server's bounds. Plain values: `Copy`, shared freely between threads.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The byte budget of a `/changes` page's changes (at least one change is always sent).
    pub page_bytes: usize,
    /// Each request's complete headers within it, from the connection's opening or the end of
    /// the previous answer; else the connection is closed (silent, slow and idle ones alike).
    pub header_timeout: Duration,
    /// A write that waits this long for the client to read fails, and the connection closes.
    pub write_timeout: Duration,
    /// HTTP connections served at once; one beyond is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Watch streams open at once; an upgrade beyond is refused with `503 too_many_streams`.
    pub max_streams: usize,
    /// After the first SIGINT or SIGTERM, how long open requests and streams get to finish.
    pub shutdown_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            page_bytes: DEFAULT_PAGE_BYTES,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_streams: DEFAULT_MAX_STREAMS,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}
