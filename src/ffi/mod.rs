//! The C ABI: every exported `agent_*` function, every C-facing type, and all `unsafe` code.
//!
//! Every export runs inside [`boundary::guard`] (most through [`boundary::run`], which maps
//! errors to statuses), so no Rust panic ever unwinds into C, and every failure sets the
//! calling thread's last-error message. [`args`] turns raw arguments into what the contract
//! says (input slices, output parameters, the agent behind a handle); [`callback`] is the one
//! type for C hooks; [`status`] holds the status table.

mod agent;
mod args;
mod boundary;
mod buffer;
mod callback;
mod handle;
mod history;
mod hooks;
mod status;
