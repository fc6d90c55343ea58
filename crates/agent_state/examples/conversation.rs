//! The reference's `Conversation`, in Rust, typed: an initial state, a hook on every committed
//! change (`onStateChanged(next, prev)`), and a step that merges two patches. It opens its
//! store twice, as two runs of a program would, to show what persisted.
//!
//! `cargo run -p agent_state --example conversation [STORE]` (a SQLite file, or a
//! `postgresql://` URI; a temporary file by default).

use std::time::{SystemTime, UNIX_EPOCH};

use agent_state::{Agent, HookGuard, Result};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Status {
    Idle,
    Processing,
}

/// The state: what the reference's `ConvState` declares.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
struct ConvState {
    status: Status,
    last_reply: String,
    at: u64,
}

/// A patch: the fields to merge (`None`: left as stored).
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct ConvPatch {
    status: Option<Status>,
    last_reply: Option<String>,
    at: Option<u64>,
}

struct Conversation {
    agent: Agent,
    /// The hook lives as long as the conversation.
    _transitions: HookGuard,
}

impl Conversation {
    fn open(store: &str) -> Result<Conversation> {
        let agent = Agent::builder()
            .agent_id("c1")
            .initial_state(&ConvState {
                status: Status::Idle,
                last_reply: String::new(),
                at: 0,
            })
            .open(store)?;
        // onStateChanged(next, prev): after each commit, in commit order.
        let transitions = agent.on_change_as(|next: &ConvState, prev: &ConvState| {
            println!("{:?} -> {:?}", prev.status, next.status);
        })?;
        Ok(Conversation {
            agent,
            _transitions: transitions,
        })
    }

    fn process(&self) -> Result<()> {
        // An RFC 7396 merge, committed: the other members are untouched.
        self.agent.set(&ConvPatch {
            status: Some(Status::Processing),
            ..ConvPatch::default()
        })?;
        // ...
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.agent.set(&ConvPatch {
            status: Some(Status::Idle),
            at: Some(now),
            ..ConvPatch::default()
        })?;
        Ok(())
    }
}

fn main() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("agent_state_conversation_{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| agent_state::Error::InvalidArgument(e.to_string()))?;
    let default = dir.join("conv.db").to_string_lossy().into_owned();
    let store = std::env::args().nth(1).unwrap_or(default);

    for run in 1..=2 {
        let conv = Conversation::open(&store)?;
        let read = conv.agent.get_state_versioned()?;
        let state: ConvState = read.get()?;
        println!("run {run}: version {}: {state:?}", read.version);
        conv.process()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
