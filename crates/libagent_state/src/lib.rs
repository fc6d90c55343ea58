//! The shared and static library C programs link: every `agent_*` export of
//! [`agent_state_ffi`], nothing else. A crate of its own because a Rust package has one library
//! target: this one is named `agent_state` (so the files are `libagent_state.so` and
//! `libagent_state.a`) while the Rust library of that name is the core, `crates/agent_state`;
//! the exports themselves live, tested, in `agent_state_ffi`.

// Linked for its `#[no_mangle]` exports, which a cdylib and a staticlib export from every crate
// they link: nothing here is named.
extern crate agent_state_ffi;
