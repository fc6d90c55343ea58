//! Parser + codec on arbitrary bytes; the properties are in `check_json_codec` (src/lib.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    agent_state_fuzz::check_json_codec(data);
});
