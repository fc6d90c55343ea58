//! RFC 7396 merge against a reference model; the properties are in `check_merge` (src/lib.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    agent_state_fuzz::check_merge(data);
});
