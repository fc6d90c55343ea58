//! The fast accept path (the scanner) against today's steps; the properties are in
//! `check_scan` (src/lib.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    agent_state_fuzz::check_scan(data);
});
