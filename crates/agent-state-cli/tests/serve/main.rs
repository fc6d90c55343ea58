//! `agent-state serve` end to end: the real binary as a child process, real sockets, writes
//! by this (another) process through the library; on SQLite, and on PostgreSQL with
//! AGENT_STATE_TEST_BACKEND=postgres (as `make test` runs it).

#[path = "../../../agent_state/tests/common/mod.rs"]
mod common;

mod client;
mod endpoints;
mod watch;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-state");
