//! What lets the SQLite suites' tests run on PostgreSQL unchanged but for two names: a
//! "directory" is a namespace of agent ids, a "file" in it one agent, and `pg_open` opens it.

use std::path::Path;

use agent_state::{Agent, OpenOptions, Result};

/// A namespace of agent ids unique to one test.
pub struct TempDir {
    uri: String,
    name: String,
}

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        TempDir {
            uri: crate::server().expect("the test checked for a server"),
            name: crate::unique(name),
        }
    }

    pub fn file(&self, name: &str) -> Place {
        Place {
            uri: self.uri.clone(),
            agent: format!("{}/{name}", self.name),
        }
    }
}

/// One agent of the test server.
#[derive(Clone, Debug)]
pub struct Place {
    uri: String,
    agent: String,
}

/// `Agent::open` of the agent `place` with `options`.
pub fn pg_open(place: &Place, options: &OpenOptions) -> Result<Agent> {
    let mut options = options.clone();
    options.agent_id = Some(place.agent.clone());
    Agent::open(Path::new(&place.uri), &options)
}
