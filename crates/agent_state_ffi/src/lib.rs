//! The C ABI: every exported `agent_*` function, every C-facing type, and all `unsafe` code.
//!
//! Every export runs inside `boundary::guard` (most through `boundary::run`, which maps
//! errors to statuses), so no Rust panic ever unwinds into C, and every failure sets the
//! calling thread's last-error message. `args` turns raw arguments into what the contract
//! says (input slices, output parameters, the agent behind a handle); `callback` is the one
//! type for C hooks; `status` holds the status table.
//!
//! This crate is the whole C boundary, and only that: the semantics live in the core crate,
//! `agent_state`, which knows nothing of C. `crates/libagent_state` links these exports into
//! `libagent_state.so` and `libagent_state.a`; `include/agent_state.h` is generated from this
//! crate by cbindgen (`cbindgen.toml` beside this crate's manifest).

// The C boundary: raw pointers from C, callbacks into it. Every block has its SAFETY note.
#![allow(unsafe_code)]

// One module per topic of the API (the header lists the topics in its contents and
// tests/header.rs orders the declarations by them): status.rs (version and errors), buffer.rs,
// handle.rs and agent.rs (opening and closing), state.rs (reading and writing), hooks.rs,
// history.rs (the change log), cancel.rs, store.rs (a store's agents), schema.rs (schema
// evolution), submit.rs and queue.rs (awaited calls: submission, completion, completion
// queues), watch.rs (watching a store's agents). Then the machinery every export uses.
mod agent;
mod buffer;
mod cancel;
mod handle;
mod history;
mod hooks;
mod queue;
mod schema;
mod state;
mod status;
mod store;
mod submit;
mod watch;

mod args;
mod boundary;
mod callback;
