//! Opening with the builder: every option it names reaches the agent as the JSON option would,
//! bad values are refused before anything opens, and a location says file or server.

use std::time::Duration;

use agent_state::ChangeLog::{KeepFor, KeepLast, KeepLastFor};
use agent_state::{Agent, ChangeLog, Error, Location};
use serde::{Deserialize, Serialize};
use serde_json::json;
use test_support::{each_backend, TempDir};

use crate::at;

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct ConvState {
    status: String,
    #[serde(rename = "lastReply")]
    last_reply: String,
    at: u64,
}

fn idle() -> ConvState {
    ConvState {
        status: "idle".into(),
        last_reply: String::new(),
        at: 0,
    }
}

#[each_backend]
fn the_builder_opens_with_a_typed_initial_state_and_a_change_log() {
    let dir = TempDir::new("builder_opens");
    let place = dir.store("conv");
    let (builder, location) = at(&place);
    let agent = builder
        .initial_state(&idle())
        .change_log(KeepLast(2))
        .open(&location)
        .unwrap();
    // The initial state is shown, not stored.
    let v = agent.get_state_versioned().unwrap();
    assert_eq!((v.version, v.get::<ConvState>().unwrap()), (0, idle()));
    for step in 1..=3u64 {
        agent.set(&json!({"at": step})).unwrap();
    }
    // The log keeps the last two changes: version 1 is gone, 2 and 3 are there.
    assert!(matches!(agent.state_at(1), Err(Error::Gap { .. })));
    assert_eq!(
        agent.state_at(2).unwrap().to_value()["at"],
        json!(2),
        "kept by KeepLast(2)"
    );
    agent.close().unwrap();
    // What persisted reads the same through a plain open with the JSON options.
    let (builder, location) = at(&place);
    let again = builder.open(location).unwrap();
    assert_eq!(
        again.get::<ConvState>().unwrap(),
        ConvState { at: 3, ..idle() }
    );
}

#[test]
fn bad_values_are_refused_before_anything_opens() {
    let dir = TempDir::new("builder_refuses");
    let path = dir.file("never.db");
    let refused = [
        Agent::builder().change_log(KeepLast(0)).open(&path),
        Agent::builder()
            .change_log(KeepFor(Duration::from_millis(1500)))
            .open(&path),
        Agent::builder()
            .change_log(KeepLastFor {
                last: 1,
                for_: Duration::ZERO,
            })
            .open(&path),
        Agent::builder().max_connections(0).open(&path),
        Agent::builder().initial_state(&[1, 2]).open(&path),
        Agent::builder().initial_state(&"text").open(&path),
    ];
    for (i, r) in refused.into_iter().enumerate() {
        match r {
            Err(Error::InvalidArgument(m)) => assert!(!m.is_empty(), "{i}"),
            other => panic!("{i}: expected InvalidArgument, got {other:?}"),
        }
    }
    assert!(!path.exists(), "nothing was opened, so no file was made");
    // An initial state serde cannot write (a map with keys that are not strings).
    let keys = std::collections::BTreeMap::from([((1, 2), "pair")]);
    let e = Agent::builder()
        .initial_state(&keys)
        .open(&path)
        .unwrap_err();
    assert!(matches!(e, Error::Serde(_)), "{e:?}");
    assert!(
        std::error::Error::source(&e).is_some(),
        "serde's error is the source"
    );
    assert_eq!(e.kind(), agent_state::ErrorKind::Codec);
}

#[test]
fn a_location_is_read_by_its_scheme_unless_said_to_be_a_file() {
    let dir = TempDir::new("builder_locations");
    let odd = dir.file("postgres:");
    std::fs::create_dir_all(&odd).unwrap();
    // <dir>/postgres:/x.db is an absolute path, so no scheme: a file.
    let agent = Agent::open_with(odd.join("x.db"), &Default::default()).unwrap();
    agent.set(&json!({"a": 1})).unwrap();
    assert!(odd.join("x.db").exists());
    assert!(matches!(
        Location::from("postgres://h/db"),
        Location::Server(_)
    ));
    assert!(matches!(
        Location::from(std::path::PathBuf::from("postgresql://h/db")),
        Location::Server(_)
    ));
    // A file named like a URI, relative to the working directory, when said to be a file.
    assert_eq!(
        Location::file("postgres://h/db"),
        Location::File("postgres://h/db".into())
    );
    assert!(matches!(
        Location::server("conv.db"),
        Err(Error::InvalidArgument(_))
    ));
    // The in-memory store, by name or by constructor.
    let memory = Agent::builder().open(Location::memory()).unwrap();
    assert_eq!(memory.get_value().unwrap(), json!({}));
    let _ = ChangeLog::Off;
}

#[each_backend]
fn change_log_off_drops_the_log() {
    let dir = TempDir::new("builder_log_off");
    let place = dir.store("a");
    let (builder, location) = at(&place);
    let agent = builder.change_log(KeepLast(10)).open(&location).unwrap();
    agent.set(&json!({"n": 1})).unwrap();
    agent.close().unwrap();
    let (builder, location) = at(&place);
    let agent = builder.change_log(ChangeLog::Off).open(&location).unwrap();
    agent.set(&json!({"n": 2})).unwrap();
    assert!(
        matches!(agent.state_at(1), Err(Error::Gap { .. })),
        "the log was dropped with its changes"
    );
}
