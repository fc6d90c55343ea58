//! The C ABI: every exported `agent_*` function, every C-facing type, and all `unsafe` code.
//!
//! Every export runs inside [`boundary::run`] (or [`boundary::run_value`]), so no Rust panic
//! ever unwinds into C, and every failure sets the calling thread's last-error message.

mod agent;
mod boundary;
mod buffer;
mod handle;
mod history;
mod hooks;
mod status;
