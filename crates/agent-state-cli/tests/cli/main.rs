//! End-to-end tests of the `agent-state` command: each test spawns the real binary on real
//! SQLite files in a fresh temporary directory, and checks what it prints, its exit code and
//! what the library then finds in the store.

mod agents;
mod check;
mod interface;
mod log;
mod migrate;
mod patch;
mod state;
mod transfer;
mod watch;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use agent_state::Agent;
use serde_json::json;

pub use test_support::{opts, TempDir};

/// The binary under test, built by cargo for this test target.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-state");

/// What one run of the command did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn stdout(&self) -> &str {
        std::str::from_utf8(&self.stdout).expect("stdout is UTF-8")
    }

    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "expected success, got {self:?}");
        self.stdout()
    }

    /// Asserts a failure with `status`: its exit code, its name on stderr, nothing on stdout.
    pub fn failed(&self, status: &str) -> &Self {
        self.failed_with_output(status);
        assert!(self.stdout.is_empty(), "nothing on stdout: {self:?}");
        self
    }

    /// Like [`Run::failed`], for a command that prints a report even when it fails.
    pub fn failed_with_output(&self, status: &str) -> &Self {
        assert_eq!(self.code, exit_code(status), "{self:?}");
        assert!(
            self.stderr.starts_with(&format!("agent-state: {status}: ")),
            "stderr names {status}: {self:?}"
        );
        self
    }

    /// Asserts that stderr says `text`.
    pub fn says(&self, text: &str) -> &Self {
        assert!(self.stderr.contains(text), "stderr says {text:?}: {self:?}");
        self
    }
}

/// The exit code of a status name: 64 + its number.
pub fn exit_code(status: &str) -> i32 {
    let number = match status {
        "AGENT_ERR_INVALID_ARGUMENT" => 1,
        "AGENT_ERR_JSON" => 3,
        "AGENT_ERR_CODEC" => 4,
        "AGENT_ERR_TOO_LARGE" => 5,
        "AGENT_ERR_STORAGE" => 6,
        "AGENT_ERR_CONFLICT" => 9,
        "AGENT_ERR_GAP" => 11,
        "AGENT_ERR_UNAVAILABLE" => 12,
        "AGENT_ERR_AUTH" => 13,
        "AGENT_ERR_CANCELLED" => 14,
        "AGENT_ERR_NEWER_SCHEMA" => 15,
        "AGENT_ERR_MIGRATION" => 16,
        "AGENT_ERR_PATH" => 17,
        "AGENT_ERR_TEST_FAILED" => 18,
        other => panic!("no exit code in the tests for {other}"),
    };
    64 + number
}

/// Runs the command with `args` and no standard input.
pub fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_with_stdin(args, None)
}

/// Runs the command with `args`, writing `stdin` (when given) to its standard input.
pub fn run_with_stdin<I, S>(args: I, stdin: Option<&[u8]>) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-state");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        // The command may stop reading early (a refused input): a broken pipe is fine here.
        let _ = pipe.write_all(bytes);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("wait for agent-state");
    Run {
        code: status.code().expect("exited, not killed"),
        stdout,
        stderr: String::from_utf8(stderr).expect("stderr is UTF-8"),
    }
}

/// A store with `state` written through the library (version 1), and optionally its change
/// log on.
pub fn store_with(path: &Path, state: &str, keep_last: Option<u64>) -> Agent {
    let options = match keep_last {
        Some(n) => opts(json!({ "change_log": { "keep_last": n } })),
        None => opts(json!({})),
    };
    let agent = Agent::open_with(path, &options).unwrap();
    agent.replace_state(state.as_bytes()).unwrap();
    agent
}

/// The state in the store, as the library reads it (compact bytes) with its version.
pub fn stored(path: &Path) -> (String, u64) {
    let agent = Agent::open_with(path, &opts(json!({ "read_only": true }))).unwrap();
    let current = agent.get_state_versioned().unwrap();
    (
        String::from_utf8(current.state.json().to_vec()).unwrap(),
        current.version,
    )
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}
