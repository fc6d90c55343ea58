//! `watch`: follow the state's changes, committed by any process, one JSON line each.
//!
//! The library starts no thread: a handle's `poll` delivers to its `on_state_changed` hooks the
//! changes other handles committed since its last delivery, in commit order, each once (it
//! needs the agent's change log). So: open read-only, register a hook that prints a line, and
//! poll every interval until SIGINT or SIGTERM sets a flag.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use agent_state::{Error, StateChange, StateChangedHook};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::args::Global;
use crate::changelog;
use crate::failure::{Failure, Status};
use crate::open::{open, Access};
use crate::output::{versioned_json, write_line};

/// Exit code of a second SIGINT/SIGTERM while the first is being handled (a poll stuck
/// behind a lock): the shell's code for death by SIGINT.
const FORCED_EXIT: i32 = 130;
/// The longest sleep between two looks at the stop flag, so an interrupt ends the command
/// promptly whatever `--interval-ms` is.
const SLICE: Duration = Duration::from_millis(50);

/// Prints each delivered change as `{"version":V,"state":...}`.
struct Printer {
    /// The last version printed: the first line (the state when watching began) may already
    /// show a change that the first poll delivers again, and no line is printed twice.
    last: Mutex<u64>,
    /// Why printing failed (the hook can only return text to the library).
    failure: Mutex<Option<Failure>>,
}

impl StateChangedHook for Printer {
    fn on_state_changed(&self, change: &StateChange) -> Result<(), String> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if change.version <= *last {
            return Ok(());
        }
        match write_line(&versioned_json(change.version, &change.next)) {
            Ok(()) => {
                *last = change.version;
                Ok(())
            }
            Err(failure) => {
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure);
                Err("cannot print the change".into())
            }
        }
    }
}

pub fn watch(store: &Path, global: &Global, interval: Duration) -> Result<(), Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // The first signal sets `stop`; a second one, while `stop` is set, exits at once.
        signal_hook::flag::register_conditional_shutdown(signal, FORCED_EXIT, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .map_err(|e| {
                Failure::new(
                    Status::STORAGE,
                    format!("cannot handle signal {signal}: {e}"),
                )
            })?;
    }
    let agent = open(store, global, Access::Read)?;
    let printer = Arc::new(Printer {
        last: Mutex::new(0),
        failure: Mutex::new(None),
    });
    agent.on_state_changed(Arc::clone(&printer) as Arc<dyn StateChangedHook>)?;
    let current = agent.get_state_versioned()?;
    // Refuse at once, in the library's words, when the log is off: polling would never show
    // anything. Switching the log on here would change the store for every process using it.
    agent
        .changes_since(current.version)
        .map_err(changelog::explain)?;
    {
        let mut last = printer.last.lock().unwrap_or_else(|p| p.into_inner());
        write_line(&versioned_json(current.version, &current.state))?;
        *last = current.version;
    }
    while !stop.load(Ordering::SeqCst) {
        let (_, result) = agent.poll_counted();
        match result {
            Ok(()) => {}
            // Some changes were pruned before this watch saw them: say so, and go on from the
            // current state (the next line is still a true state, its version tells the jump).
            Err(Error::Gap { message: m, .. }) => {
                eprintln!("agent-state: {}: {m}", Status::GAP.name())
            }
            Err(e) => {
                let printed = printer
                    .failure
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                return Err(printed.unwrap_or_else(|| changelog::explain(e)));
            }
        }
        sleep_unless_stopped(interval, &stop);
    }
    Ok(())
}

fn sleep_unless_stopped(interval: Duration, stop: &AtomicBool) {
    let end = Instant::now() + interval;
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Ordering::SeqCst) {
            return;
        }
        thread::sleep(SLICE.min(end - now));
    }
}
