//! watch: a child process follows changes that other processes commit, until a signal.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use crate::{arg, run, store_with, TempDir, BIN};

/// Long enough for a debug build on a busy machine; a line that takes longer is a failure.
const PATIENCE: Duration = Duration::from_secs(20);

struct Watcher {
    child: Child,
    lines: Receiver<String>,
}

impl Watcher {
    fn start(path: &Path) -> Watcher {
        let mut child = Command::new(BIN)
            .args(["watch", arg(path), "--interval-ms", "20"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent-state watch");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = mpsc::channel();
        // Reading on a thread, so a line that never comes fails the test instead of hanging it.
        thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Watcher { child, lines }
    }

    fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => line,
            Err(e) => {
                let _ = self.child.kill();
                let output = self.child.wait_with_output_now();
                panic!("no line from watch ({e}); stderr: {output}");
            }
        }
    }

    /// Sends `signal` with kill(1) and returns the exit code and stderr.
    fn stop(mut self, signal: &str) -> (Option<i32>, String) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let code = self.child.wait().expect("wait for watch").code();
        (code, self.child.wait_with_output_now())
    }
}

trait Stderr {
    fn wait_with_output_now(&mut self) -> String;
}

impl Stderr for Child {
    fn wait_with_output_now(&mut self) -> String {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut stderr) = self.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

#[test]
fn watch_prints_each_change_of_other_processes_and_exits_0_on_sigint() {
    let dir = TempDir::new("cli_watch");
    let path = dir.file("s.db");
    let agent = store_with(&path, r#"{"n":0}"#, Some(100));
    let mut watcher = Watcher::start(&path);
    // The first line is the state when watching starts: from then on, nothing is missed.
    assert_eq!(watcher.next_line(), r#"{"version":1,"state":{"n":0}}"#);
    // One change through the library in this process, one through another process.
    agent.set_state(br#"{"n":1,"tags":["a"]}"#).unwrap();
    run(["replace", arg(&path), r#"{"done":true}"#]).ok();
    assert_eq!(
        watcher.next_line(),
        r#"{"version":2,"state":{"n":1,"tags":["a"]}}"#
    );
    assert_eq!(
        watcher.next_line(),
        r#"{"version":3,"state":{"done":true}}"#
    );
    let (code, stderr) = watcher.stop("-INT");
    assert_eq!(code, Some(0), "stderr: {stderr}");
}

#[test]
fn watch_exits_0_on_sigterm() {
    let dir = TempDir::new("cli_watch_term");
    let path = dir.file("s.db");
    store_with(&path, r#"{"n":0}"#, Some(10));
    let mut watcher = Watcher::start(&path);
    assert_eq!(watcher.next_line(), r#"{"version":1,"state":{"n":0}}"#);
    let (code, stderr) = watcher.stop("-TERM");
    assert_eq!(code, Some(0), "stderr: {stderr}");
}

#[test]
fn watch_needs_the_change_log_and_an_existing_store() {
    let dir = TempDir::new("cli_watch_off");
    let path = dir.file("s.db");
    store_with(&path, r#"{"n":0}"#, None);
    run(["watch", arg(&path)])
        .failed("AGENT_ERR_INVALID_ARGUMENT")
        .says("the change log is off");
    let missing = dir.file("missing.db");
    run(["watch", arg(&missing)]).failed("AGENT_ERR_STORAGE");
    assert!(!missing.exists());
    // An interval of 0 would spin: a usage error.
    assert_eq!(run(["watch", arg(&path), "--interval-ms", "0"]).code, 2);
}
