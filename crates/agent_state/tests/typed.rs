//! The core's Rust surface, as a Rust program uses it: the builder and locations, states read
//! and written through serde (the codec's types included), hooks and the validator as
//! closures, and the asynchronous agent. One test binary (one link), a module per concept;
//! each test of behaviour runs on SQLite and PostgreSQL (`#[each_backend]`).

mod typed {
    pub mod async_agent;
    pub mod builder;
    pub mod callbacks;
    pub mod state;
    pub mod types;
}

use agent_state::{Agent, AgentBuilder, Location};
use test_support::Place;

/// A builder for the agent at `place` (its agent id set where the place names one), and the
/// place's location.
pub fn at(place: &Place) -> (AgentBuilder, Location) {
    match place {
        Place::Sqlite { path, agent } => {
            let b = Agent::builder();
            let b = match agent {
                Some(id) => b.agent_id(id.as_str()),
                None => b,
            };
            (b, Location::from(path.as_path()))
        }
        Place::Postgres { uri, agent } => (
            Agent::builder().agent_id(agent.as_str()),
            Location::server(uri.as_str()).unwrap(),
        ),
    }
}
