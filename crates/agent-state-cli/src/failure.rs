//! Why a command failed, as the library's status, and the exit code that maps to it.
//!
//! The status numbers and names are the C ABI's (`include/agent_state.h`): a script that knows
//! one knows the other. The exit code is 64 + the status number, because clap already uses 2
//! for usage errors (which would collide with `AGENT_ERR_BAD_HANDLE`) and 64 + n stays below
//! 128, where shells report deaths by signal. `tests/cli` checks this table against the header.

use std::io;

use agent_state::Error;

/// Added to a status number to give the exit code.
pub const EXIT_BASE: i32 = 64;

/// The library's status codes (the numbers of `AGENT_ERR_*`, never renumbered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    InvalidArgument = 1,
    BadHandle = 2,
    Json = 3,
    Codec = 4,
    TooLarge = 5,
    Storage = 6,
    Busy = 7,
    Hook = 8,
    Conflict = 9,
    Rejected = 10,
    Gap = 11,
    Unavailable = 12,
    Panic = 99,
}

impl Status {
    /// Every status, in number order (the exit-code table of `--help` is made from it).
    pub const ALL: [Status; 13] = [
        Status::InvalidArgument,
        Status::BadHandle,
        Status::Json,
        Status::Codec,
        Status::TooLarge,
        Status::Storage,
        Status::Busy,
        Status::Hook,
        Status::Conflict,
        Status::Rejected,
        Status::Gap,
        Status::Unavailable,
        Status::Panic,
    ];

    /// The C ABI's name of the status.
    pub fn name(self) -> &'static str {
        match self {
            Status::InvalidArgument => "AGENT_ERR_INVALID_ARGUMENT",
            Status::BadHandle => "AGENT_ERR_BAD_HANDLE",
            Status::Json => "AGENT_ERR_JSON",
            Status::Codec => "AGENT_ERR_CODEC",
            Status::TooLarge => "AGENT_ERR_TOO_LARGE",
            Status::Storage => "AGENT_ERR_STORAGE",
            Status::Busy => "AGENT_ERR_BUSY",
            Status::Hook => "AGENT_ERR_HOOK",
            Status::Conflict => "AGENT_ERR_CONFLICT",
            Status::Rejected => "AGENT_ERR_REJECTED",
            Status::Gap => "AGENT_ERR_GAP",
            Status::Unavailable => "AGENT_ERR_UNAVAILABLE",
            Status::Panic => "AGENT_ERR_PANIC",
        }
    }

    pub fn exit_code(self) -> i32 {
        EXIT_BASE + self as i32
    }

    /// The status the C ABI gives for a library error. An exhaustive match, so a new error
    /// kind in the library fails this build instead of getting a wrong exit code.
    pub fn of(e: &Error) -> Status {
        match e {
            Error::InvalidArgument(_) => Status::InvalidArgument,
            Error::Closed => Status::BadHandle,
            Error::Json(_) => Status::Json,
            Error::Codec(_) => Status::Codec,
            Error::TooLarge(_) => Status::TooLarge,
            Error::Storage(_) | Error::Corrupt(_) | Error::Stale => Status::Storage,
            Error::Busy(_) => Status::Busy,
            Error::Hook(_) => Status::Hook,
            Error::Conflict(_) => Status::Conflict,
            Error::Rejected(_) => Status::Rejected,
            Error::Gap(_) => Status::Gap,
            Error::Unavailable(_) => Status::Unavailable,
        }
    }
}

/// How a command ends when it does not succeed.
#[derive(Debug)]
pub enum Failure {
    /// Reported on stderr as `agent-state: NAME: message`, exit code 64 + status.
    Failed { status: Status, message: String },
    /// Whoever read standard output went away (`agent-state watch s.db | head -1`): there is
    /// nobody left to tell, so the command ends quietly with exit 0, as `rg` and `git` do.
    OutputClosed,
}

impl Failure {
    pub fn new(status: Status, message: impl Into<String>) -> Failure {
        Failure::Failed {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(Status::InvalidArgument, message)
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
                Status::Storage,
                format!("cannot write standard output: {e}"),
            )
        }
    }

    /// Reading an input (standard input, an import file) failed.
    pub fn input(what: &str, e: io::Error) -> Failure {
        Failure::new(Status::Storage, format!("cannot read {what}: {e}"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::new(Status::of(&e), e.to_string())
    }
}

/// The exit-code table, for `--help` (the README repeats it).
pub fn exit_code_table() -> String {
    let mut text = String::from(
        "Exit codes:\n  0    success (also: interrupted `watch`, or the reader of stdout went away)\n  2    usage error (unknown option, missing argument)\n",
    );
    for status in Status::ALL {
        text.push_str(&format!(
            "  {:<4} {} ({})\n",
            status.exit_code(),
            status.name(),
            status as i32
        ));
    }
    text.push_str(
        "Exit code = 64 + the library's status number; errors print `agent-state: NAME: message` \
         on stderr.",
    );
    text
}
