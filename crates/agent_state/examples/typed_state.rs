//! States through serde: read into a struct, merge a patch of `Option`s (`set` skips `None`,
//! `merge` deletes with it), replace, read-modify-write with `update`, and the untyped
//! `serde_json::Value` forms.
//!
//! `cargo run -p agent_state --example typed_state`

use agent_state::{Agent, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Serialize, Deserialize, Debug, Default, PartialEq)]
struct Job {
    id: String,
    step: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Default)]
struct State {
    status: String,
    job: Job,
}

/// A patch of a job: `step` is left alone when `None`; `note` says per call whether to leave
/// it (`None`), delete it (`Some(None)`, with `merge`) or set it.
#[derive(Serialize, Default)]
struct JobPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<Option<String>>,
}

fn main() -> Result<()> {
    let agent = Agent::builder().open(":memory:")?;
    agent.replace(&State {
        status: "processing".into(),
        job: Job {
            id: "j1".into(),
            step: 2,
            note: Some("retrying".into()),
        },
    })?;

    // set: None is skipped, so only `step` changes.
    agent.set(&json!({"job": JobPatch { step: Some(3), note: Some(None) }}))?;
    println!("after set:   {}", agent.get_value()?);

    // merge: a null deletes, as RFC 7396 says: Some(None) deletes the note.
    let v = agent.merge(&json!({"job": JobPatch { step: None, note: Some(None) }}))?;
    println!(
        "after merge: {} (version {})",
        v.get::<serde_json::Value>()?,
        v.version
    );

    // update: read into the type, change it, write it back as a compare-and-set.
    let v = agent.update(|s: &mut State| s.job.step += 1)?;
    let state: State = v.get()?;
    println!(
        "after update: step {} at version {}",
        state.job.step, v.version
    );
    assert_eq!(
        state.job,
        Job {
            id: "j1".into(),
            step: 4,
            note: None
        }
    );
    Ok(())
}
