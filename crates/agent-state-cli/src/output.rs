//! Standard output: JSON documents (pretty or compact) and JSON Lines.

use std::io::{self, IsTerminal, Write};

use agent_state::Snapshot;

use crate::args::Global;
use crate::failure::Failure;
use crate::pretty::reindent;

/// How JSON documents are printed.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    pretty: bool,
}

impl Output {
    /// Pretty for a person at a terminal, compact for a program reading a pipe or a file;
    /// `--pretty` / `--compact` override.
    pub fn new(global: &Global) -> Output {
        let pretty = if global.pretty {
            true
        } else if global.compact {
            false
        } else {
            io::stdout().is_terminal()
        };
        Output { pretty }
    }

    /// Prints one JSON document given in compact form, followed by a newline.
    pub fn document(&self, compact: &[u8]) -> Result<(), Failure> {
        if self.pretty {
            write_line(&reindent(compact))
        } else {
            write_line(compact)
        }
    }

    /// Prints a state.
    pub fn state(&self, state: &Snapshot) -> Result<(), Failure> {
        self.document(state.json())
    }

    /// Prints `{"version": V, "state": ...}`.
    pub fn versioned(&self, version: u64, state: &Snapshot) -> Result<(), Failure> {
        self.document(&versioned_json(version, state))
    }
}

/// `{"version":V,"state":...}` in compact form, the state's bytes exactly as the library
/// encoded them.
pub fn versioned_json(version: u64, state: &Snapshot) -> Vec<u8> {
    let mut out = format!("{{\"version\":{version},\"state\":").into_bytes();
    out.extend_from_slice(state.json());
    out.push(b'}');
    out
}

/// Writes `line` and a newline to stdout and flushes, so a reader at the other end of a pipe
/// sees each line as soon as it is printed (`watch`).
pub fn write_line(line: &[u8]) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(line)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
        .map_err(Failure::output)
}
