//! Hooks and the validation gate as closures: a typed hook after each commit (unregistered
//! when its guard drops), a validator that rejects a change with nothing written, and an
//! initial state computed when nothing is stored.
//!
//! `cargo run -p agent_state --example hooks`

use agent_state::{Agent, Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Serialize, Deserialize, Debug)]
struct Cart {
    items: Vec<String>,
    total_cents: u64,
}

fn main() -> Result<()> {
    let agent = Agent::builder().open(":memory:")?;
    agent.initial_state_with(|| Cart {
        items: Vec::new(),
        total_cents: 0,
    })?;
    let guard = agent.on_change_as(|next: &Cart, prev: &Cart| {
        println!("total {} -> {}", prev.total_cents, next.total_cents);
    })?;
    agent.validate_as(|next: &Cart| match next.total_cents {
        0..=100_000 => Ok(()),
        _ => Err("a cart holds at most 1000.00".to_string()),
    })?;

    agent.set(&json!({"items": ["book"], "total_cents": 1999}))?;
    match agent.set(&json!({"total_cents": 1_000_000})) {
        Err(Error::Rejected(reason)) => println!("rejected: {reason}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    drop(guard); // no more deliveries
    agent.set(&json!({"total_cents": 2999}))?;
    println!("stored: {}", agent.get_value()?);
    Ok(())
}
