//! The Node.js addon of agent_state: a thin layer of napi-rs over the core crate. The npm package
//! (`bindings/node`) wraps it in the JavaScript API (the `Agent` class, the codec in JavaScript's
//! own types, the error classes); nothing here is meant to be called by users directly.
//!
//! What runs where: every call that may wait (the handle's lock, the disk's sync, the server)
//! runs on the library's worker pool ([`agent_state::work::spawn`], see [`task`]) and returns a
//! Promise, settled on the JavaScript thread; libuv's thread pool, which fs, dns, zlib and
//! crypto share, is left to them. The JavaScript thread only copies strings in and out, and
//! answers a read from the handle's last one when the core says nothing was committed since
//! ([`agent_state::Agent::is_current`], shared memory only). Each call runs under its cancel
//! token, bound to the worker thread, so an `AbortSignal` stops a wait without writing.
//!
//! Errors reach JavaScript as `Error`s whose message starts with the status code and a `\u{1}`
//! (see [`error`]); the package turns them into its error classes. Panics are caught at the
//! boundary of every call ([`error::guarded`], around each worker job and each synchronous
//! method), so none unwinds into Node.
//!
//! Thread-safety: a `NativeAgent` is used from the JavaScript thread that made it; the core
//! handle inside is shared with the library's worker threads (it is `Send + Sync`). Node's
//! worker threads each load the addon and open handles of their own; their calls share the one
//! worker pool of the process.

// Node-API's glue (the `#[napi]` macros) is generated unsafe code; this crate writes none of
// its own.
#![allow(unsafe_code)]
#![allow(clippy::undocumented_unsafe_blocks)]
// napi-rs registers the exports only outside `cfg(test)`, so a test build (clippy's
// --all-targets) sees them as unused.
#![cfg_attr(test, allow(dead_code))]

mod agent;
mod cancel;
mod error;
mod hooks;
mod ready;
mod store;
mod task;
mod watch;
