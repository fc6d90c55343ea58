//! A server that cannot answer at all (its processes stopped: a hung host, a network cut): no
//! server-side timeout can fire and nothing refuses a connection, so each call must give up
//! by the client's own clock, with Unavailable, within busy_timeout_ms + server_timeout_ms (a
//! connection attempt: server_timeout_ms); once the server runs again the same handle carries
//! on.
//!
//! On a server of its own (freezing the shared one would stall the tests running alongside).

use std::process::Command;
use std::time::{Duration, Instant};

use agent_state::Error;
use serde_json::{json, Value};

use crate::crash::Server;
use crate::{open, server_or_skip, unique};

/// The server's processes stopped (SIGSTOP) while it lives; resumed (SIGCONT) when dropped,
/// also when the test panics, so the server is never left frozen.
pub(crate) struct Frozen {
    postmaster: String,
}

impl Frozen {
    pub(crate) fn freeze(server: &Server) -> Frozen {
        let pid_file = format!("{}/data/postmaster.pid", server.dir);
        let text = std::fs::read_to_string(&pid_file).unwrap();
        let postmaster = text.lines().next().unwrap().trim().to_string();
        let frozen = Frozen { postmaster };
        // The postmaster first, so that it starts no new process meanwhile.
        frozen.signal("-STOP");
        frozen
    }

    fn signal(&self, signal: &str) {
        let kill = Command::new("kill")
            .args([signal, &self.postmaster])
            .status()
            .unwrap();
        assert!(kill.success(), "kill {signal} {}", self.postmaster);
        // Its children (pkill exits 1 when there is none: not expected, but not an error).
        Command::new("pkill")
            .args([signal, "-P", &self.postmaster])
            .status()
            .unwrap();
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.signal("-CONT");
    }
}

#[test]
fn a_frozen_server_fails_calls_within_the_server_timeout_and_the_handle_recovers() {
    let _shared = server_or_skip!(); // a server is there to be had
    let Some((server, uri)) = Server::start() else {
        return;
    };
    let options = json!({"busy_timeout_ms": 1000, "server_timeout_ms": 500});
    // The client gives a round trip 1000 + 500 ms; the rest is slack for a loaded machine
    // (the point: the call ends by itself while the server stays frozen).
    let bound = Duration::from_millis(1500) + Duration::from_secs(3);
    let a = open(&uri, &unique("freeze"), options.clone()).unwrap();
    a.set_state(br#"{"n":1}"#).unwrap();
    assert_eq!(a.get_state().unwrap().json(), br#"{"n":1}"#);

    let frozen = Frozen::freeze(&server);
    // A write on the pool's connection: its commit is sent and never answered.
    let t0 = Instant::now();
    let err = a.set_state(br#"{"n":2}"#).unwrap_err();
    let write_took = t0.elapsed();
    assert!(matches!(&err, Error::Unavailable(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("did not answer within busy_timeout_ms + server_timeout_ms (1500 ms)"),
        "{message}"
    );
    assert!(message.contains("outcome is unknown"), "{message}");
    assert!(write_took < bound, "the write took {write_took:?}");
    // A read: the connection was given up, and a new one gets no answer either.
    let t0 = Instant::now();
    let err = a.get_state().unwrap_err();
    let read_took = t0.elapsed();
    assert!(matches!(&err, Error::Unavailable(_)), "{err}");
    assert!(read_took < bound, "the read took {read_took:?}");
    // And a handle opened meanwhile.
    let t0 = Instant::now();
    let err = open(&uri, &unique("freeze-b"), options.clone())
        .and_then(|b| b.get_state().map(|_| ()))
        .unwrap_err();
    let other_took = t0.elapsed();
    assert!(matches!(&err, Error::Unavailable(_)), "{err}");
    assert!(other_took < bound, "the other handle took {other_took:?}");
    eprintln!(
        "against a frozen server (busy_timeout_ms 1000, server_timeout_ms 500): write failed after {write_took:?}, \
         read after {read_took:?}, another handle after {other_took:?}"
    );
    drop(frozen);

    // The same handle, without reopening. The unanswered commit may have been applied once
    // the server ran again (it was in the server's socket buffer): the outcome was unknown.
    let v = a.get_state_versioned().unwrap();
    let state: Value = serde_json::from_slice(v.state.json()).unwrap();
    assert!(
        (v.version == 1 && state == json!({"n": 1}))
            || (v.version == 2 && state == json!({"n": 2})),
        "{} {state}",
        v.version
    );
    let before = v.version;
    a.set_state(br#"{"n":3}"#).unwrap();
    let v = a.get_state_versioned().unwrap();
    assert_eq!(v.version, before + 1);
    assert_eq!(v.state.json(), br#"{"n":3}"#);
}
