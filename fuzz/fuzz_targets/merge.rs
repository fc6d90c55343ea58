//! RFC 7396 merge against a reference model, and the member-wise merge of a scanned patch
//! against the value merge; the properties are in `check_merge` and `check_merge_snapshot`
//! (src/lib.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    agent_state_fuzz::check_merge(data);
    agent_state_fuzz::check_merge_snapshot(data);
});
