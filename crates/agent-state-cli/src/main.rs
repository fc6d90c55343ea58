//! `agent-state`: look at and change agent state stores from a shell (and list, delete and
//! expire a store's agents).
//!
//! Every read and write goes through the agent_state library, so versions, the change log,
//! the codec and the checks apply exactly as for any program using it, and other processes'
//! change feeds see the command's writes. Output is JSON on stdout; a failure is one line on
//! stderr, `agent-state: AGENT_ERR_NAME: message`, and exit code 64 + the status number
//! (see `failure`).

#![forbid(unsafe_code)]

mod agents;
mod args;
mod changelog;
mod check;
mod duration;
mod export;
mod failure;
mod history;
mod import;
mod input;
mod migrate;
mod open;
mod output;
mod pretty;
mod progress;
mod serve;
mod state;
mod transfer;
mod watch;

use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use agents::Expiry;
use args::{Cli, Command};
use failure::{Failure, Status};
use output::Output;
use state::Write;

fn main() -> ExitCode {
    // Usage errors exit 2 and --help / --version exit 0, both by clap, before anything opens.
    let cli = Cli::parse();
    // `rm` needs --agent, a global option (so clap cannot require it of one subcommand): its
    // absence is a usage error like any missing argument.
    if matches!(cli.command, Command::Rm { .. }) && cli.global.agent.is_none() {
        let mut command = Cli::command();
        command.build();
        if let Some(rm) = command.find_subcommand_mut("rm") {
            rm.error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "the following required arguments were not provided:\n  --agent <ID>\n\n\
                 (the agent to delete, as `agent-state ls` prints its id: '' is a SQLite \
                 file's single agent)",
            )
            .exit();
        }
    }
    // A panic would be a bug (in the library or here): report it like the C ABI does, as
    // AGENT_ERR_PANIC, after the default hook has printed where it happened.
    let result = panic::catch_unwind(AssertUnwindSafe(|| run(&cli))).unwrap_or_else(|_| {
        Err(Failure::new(
            Status::Panic,
            "a bug was caught (the panic message is above); nothing more was done",
        ))
    });
    match result {
        Ok(()) | Err(Failure::OutputClosed) => ExitCode::SUCCESS,
        Err(Failure::Exit { code, message }) => {
            eprintln!("{message}");
            ExitCode::from(code)
        }
        Err(Failure::Failed { status, message }) => {
            eprintln!("agent-state: {}: {message}", status.name());
            // Exit codes are 65..=82 and 163, all within u8.
            ExitCode::from(u8::try_from(status.exit_code()).unwrap_or(u8::MAX))
        }
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let global = &cli.global;
    let out = Output::new(global);
    match &cli.command {
        Command::Get {
            store,
            versioned,
            path,
            tail,
        } => match path {
            Some(pointer) => state::get_part(store, global, out, pointer, *tail),
            None => state::get(store, global, out, *versioned),
        },
        Command::Set {
            store,
            patch,
            if_version,
            versioned,
        } => state::write(
            Write::Merge,
            store,
            global,
            out,
            patch,
            *if_version,
            *versioned,
        ),
        Command::Patch {
            store,
            ops,
            if_version,
            versioned,
        } => state::write(
            Write::JsonPatch,
            store,
            global,
            out,
            ops,
            *if_version,
            *versioned,
        ),
        Command::Replace {
            store,
            state,
            if_version,
            versioned,
        } => state::write(
            Write::Replace,
            store,
            global,
            out,
            state,
            *if_version,
            *versioned,
        ),
        Command::Version { store } => state::version(store.as_deref(), global, out),
        Command::History { store, since } => history::history(store, global, out, *since),
        Command::At { store, version } => state::at(store, global, out, *version),
        Command::Restore {
            store,
            version,
            versioned,
        } => state::restore(store, global, out, *version, *versioned),
        Command::Watch { store, interval_ms } => {
            watch::watch(store, global, Duration::from_millis(*interval_ms))
        }
        Command::Serve {
            store,
            listen,
            token_file,
            allowed_host,
            allowed_origin,
            limits,
        } => serve::serve(
            store,
            global,
            *listen,
            token_file.as_deref(),
            (allowed_host, allowed_origin),
            limits,
        ),
        Command::Export { store } => export::export(store, global),
        Command::Import {
            store,
            input,
            force,
        } => import::import(store, global, out, input, *force),
        Command::Migrate {
            store,
            to,
            dry_run,
            batch,
            after,
            prefix,
            sample,
        } => migrate::migrate(
            store,
            global,
            out,
            &migrate::Migration {
                to: *to,
                dry_run: *dry_run,
                batch: *batch,
                after: after.clone(),
                prefix: prefix.clone(),
                sample: *sample,
            },
        ),
        Command::Check { store } => check::check(store, global, out),
        Command::Ls {
            store,
            prefix,
            after,
            limit,
        } => agents::ls(store, global, prefix.as_deref(), after.as_deref(), *limit),
        Command::Rm { store, if_version } => match global.agent.as_deref() {
            Some(id) => agents::rm(store, global, out, id, *if_version),
            // main() has refused this already, as a usage error.
            None => Err(Failure::invalid("rm needs --agent ID")),
        },
        Command::Expire {
            store,
            idle,
            dry_run,
            limit,
            batch,
        } => agents::expire(
            store,
            global,
            Expiry {
                idle: *idle,
                dry_run: *dry_run,
                limit: *limit,
                batch: *batch,
            },
        ),
    }
}
