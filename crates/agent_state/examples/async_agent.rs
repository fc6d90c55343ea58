//! The agent in async code: `AsyncAgent`'s methods are `async fn`s run on the library's worker
//! pool, so many tasks share one agent without blocking the runtime's threads; a task whose
//! call is dropped (a timeout, a cancelled request) has written nothing or everything.
//!
//! `cargo run -p agent_state --example async_agent`

use std::time::Duration;

use agent_state::{Agent, Result};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Default, Debug)]
#[serde(default)]
struct Visits {
    count: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let agent = Agent::builder()
        .initial_state(&Visits::default())
        .open_async(":memory:")
        .await?;

    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let agent = agent.clone();
            tokio::spawn(async move { agent.update(|v: &mut Visits| v.count += 1).await })
        })
        .collect();
    for task in tasks {
        task.await.expect("the task ran")?;
    }
    let visits: Visits = agent.get().await?;
    println!("{} visits, none lost", visits.count);
    assert_eq!(visits.count, 100);

    // A call given a deadline: if it is dropped, it wrote nothing or everything.
    match tokio::time::timeout(Duration::from_secs(5), agent.set(&Visits { count: 0 })).await {
        Ok(written) => println!("reset at version {}", written?.version),
        Err(_) => println!("timed out: the version tells whether it was written"),
    }
    agent.close().await
}
