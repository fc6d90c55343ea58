//! What an agent's change log holds, found through the library's public calls only.
//!
//! The library tells whether the log is on (`changes_since` refuses with INVALID_ARGUMENT when
//! it is off) and which versions it retains (`state_at` answers AGENT_ERR_GAP for a pruned
//! one), but not the oldest retained version directly. Retention only ever drops the oldest
//! changes, so the retained versions are one range ending at the current version, and its
//! start is found by a binary search over `state_at`.

use agent_state::{Agent, Error};

use crate::failure::Failure;

/// Whether the store logs its changes. `version` is the current version.
pub fn enabled(agent: &Agent, version: u64) -> Result<bool, Failure> {
    match agent.changes_since(version) {
        Ok(_) => Ok(true),
        Err(e) if is_off(&e) => Ok(false),
        // A commit between reading `version` and this call cannot make `version` the future,
        // so any other error is the store's.
        Err(e) => Err(e.into()),
    }
}

fn is_off(e: &Error) -> bool {
    matches!(e, Error::InvalidArgument(m) if m.contains("change log is off"))
}

/// The library's error, and when it says the log is off, how to switch it on from here.
pub fn explain(e: Error) -> Failure {
    let off = is_off(&e);
    let mut failure = Failure::from(e);
    if let (true, Failure::Failed { message, .. }) = (off, &mut failure) {
        message.push_str(
            " (from this command: run a writing command once with --change-log \
             '{\"keep_last\":N}'; this switches it on for every process using the store)",
        );
    }
    failure
}

/// The oldest version whose change the log retains, when the log is on and the state is at
/// `version` (>= 1). The current version always answers, so the search ends there at worst.
pub fn oldest_retained(agent: &Agent, version: u64) -> Result<u64, Failure> {
    let (mut low, mut high) = (1, version);
    while low < high {
        let mid = low + (high - low) / 2;
        match agent.state_at(mid) {
            Ok(_) => high = mid,
            Err(Error::Gap { .. }) => low = mid + 1,
            Err(e) => return Err(Failure::context(&format!("version {mid}"), e)),
        }
    }
    Ok(low)
}
