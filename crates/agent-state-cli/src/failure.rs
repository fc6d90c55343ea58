//! Why a command failed, as the library's status, and the exit code that maps to it.
//!
//! The status numbers and names are the library's error kinds (`agent_state::ErrorKind`), which
//! the C ABI's statuses are too (`include/agent_state.h`): a script that knows one knows the
//! other. The exit code is 64 + the status number, because clap already uses 2
//! for usage errors (which would collide with `AGENT_ERR_BAD_HANDLE`) and 64 + n stays below
//! 128, where shells report deaths by signal. `tests/cli` checks this table against the header.

use std::io;

use agent_state::{Error, ErrorKind};

/// Added to a status number to give the exit code.
pub const EXIT_BASE: i32 = 64;

/// Why a command failed: one of the library's error kinds (numbered as the C ABI's statuses,
/// see [`ErrorKind`]), or a panic caught in the command, which the C ABI reports as
/// `AGENT_ERR_PANIC` (99) and the library's safe API never returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A failure the library reports as this kind (or the command, for its own input and
    /// output).
    Kind(ErrorKind),
    /// A bug, caught (exit 64 + 99).
    Panic,
}

impl Status {
    /// The status of a panic: the C ABI's number and name (not one of the core's kinds).
    const PANIC: (i32, &'static str) = (99, "PANIC");

    /// Every status, in number order (the exit-code table of `--help` is made from it).
    pub fn all() -> impl Iterator<Item = Status> {
        ErrorKind::ALL
            .into_iter()
            .map(Status::Kind)
            .chain([Status::Panic])
    }

    /// The status number.
    pub fn code(self) -> i32 {
        match self {
            Status::Kind(kind) => kind.code(),
            Status::Panic => Self::PANIC.0,
        }
    }

    /// The C ABI's name of the status, `AGENT_ERR_` + the kind's name.
    pub fn name(self) -> String {
        let name = match self {
            Status::Kind(kind) => kind.name(),
            Status::Panic => Self::PANIC.1,
        };
        format!("AGENT_ERR_{name}")
    }

    pub fn exit_code(self) -> i32 {
        EXIT_BASE + self.code()
    }

    /// The status of a library error: its kind.
    pub fn of(e: &Error) -> Status {
        Status::Kind(e.kind())
    }

    // The kinds the command reports for failures of its own.
    pub const INVALID_ARGUMENT: Status = Status::Kind(ErrorKind::InvalidArgument);
    pub const STORAGE: Status = Status::Kind(ErrorKind::Storage);
    pub const TOO_LARGE: Status = Status::Kind(ErrorKind::TooLarge);
    pub const CONFLICT: Status = Status::Kind(ErrorKind::Conflict);
    pub const GAP: Status = Status::Kind(ErrorKind::Gap);
}

/// How a command ends when it does not succeed.
#[derive(Debug)]
pub enum Failure {
    /// Reported on stderr as `agent-state: NAME: message`, exit code 64 + status.
    Failed { status: Status, message: String },
    /// Whoever read standard output went away (`agent-state watch s.db | head -1`): there is
    /// nobody left to tell, so the command ends quietly with exit 0, as `rg` and `git` do.
    OutputClosed,
    /// Ended by a signal before its work was done (`migrate`): `message` on stderr as it is,
    /// exit `code` (128 + the signal, as shells report it).
    Exit { code: u8, message: String },
}

impl Failure {
    pub fn new(status: Status, message: impl Into<String>) -> Failure {
        Failure::Failed {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(Status::INVALID_ARGUMENT, message)
    }

    /// A library error with what the command was doing in front of it.
    pub fn context(context: &str, e: Error) -> Failure {
        Failure::new(Status::of(&e), format!("{context}: {e}"))
    }

    /// Writing standard output failed. A closed pipe is no error (see [`Failure::OutputClosed`]);
    /// anything else (a full disk behind `> file`) is an I/O failure, which the library's
    /// statuses call STORAGE.
    pub fn output(e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::OutputClosed
        } else {
            Failure::new(
                Status::STORAGE,
                format!("cannot write standard output: {e}"),
            )
        }
    }

    /// Reading an input (standard input, an import file) failed.
    pub fn input(what: &str, e: io::Error) -> Failure {
        Failure::new(Status::STORAGE, format!("cannot read {what}: {e}"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::new(Status::of(&e), e.to_string())
    }
}

/// The exit-code table, for `--help` (the book's statuses page repeats it, generated from this).
pub fn exit_code_table() -> String {
    let mut text = String::from(
        "Exit codes:\n  0    success (also: interrupted `watch`, or the reader of stdout went away)\n  2    usage error (unknown option, missing argument)\n",
    );
    for status in Status::all() {
        text.push_str(&format!(
            "  {:<4} {} ({})\n",
            status.exit_code(),
            status.name(),
            status.code()
        ));
    }
    text.push_str(
        "  130  `migrate` interrupted by SIGINT (143: by SIGTERM): run it again to go on\n",
    );
    text.push_str(
        "Exit code = 64 + the library's status number; errors print `agent-state: NAME: message` \
         on stderr.",
    );
    text
}
