//! `agent-state serve` end to end: the real binary as a child process, real sockets, writes
//! by this (another) process through the library; each test on SQLite and on PostgreSQL
//! (`#[each_backend]`, crates/test-support), but for those of SQLite or of the command line alone.

mod client;
mod endpoints;
mod hygiene;
mod limits;
mod scale;
mod watch;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-state");
