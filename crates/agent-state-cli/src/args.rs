//! The command line (clap derive): every subcommand, its arguments and its `--help`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

const ABOUT: &str = "Look at and change agent state stores through the agent_state library, so \
versions, the change log, the codec and every check stay in force (an edit in the sqlite3 shell \
skips them all).";

const OUTPUT_RULE: &str = "Output is JSON: pretty when stdout is a terminal, compact (the \
library's exact encoding) otherwise; --pretty / --compact force one. `watch`, `export`, `ls` and \
`expire` always write JSON Lines.";

#[derive(Debug, Parser)]
#[command(name = "agent-state", version, about = ABOUT, long_about = None)]
#[command(after_help = after_help())]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// The most agents one page of a listing or one batch of expiry holds (the library's bound).
const MAX_BATCH: u64 = agent_state::agents::MAX_LIST_LIMIT as u64;

const STORE_RULE: &str = "STORE is a SQLite file path, or a PostgreSQL connection URI \
(postgres:// or postgresql://, libpq syntax, e.g. \
'postgresql:///app?host=/var/run/postgresql&user=app'; TLS with libpq's sslmode etc.), which needs \
--agent.";

fn after_help() -> String {
    format!(
        "{STORE_RULE}\n\n{OUTPUT_RULE}\n\n{}",
        crate::failure::exit_code_table()
    )
}

/// Options that apply to every subcommand that opens a store.
#[derive(Debug, Args)]
pub struct Global {
    /// Which agent of the store (the library's agent_id: 1 to 255 bytes of UTF-8). Required
    /// for a PostgreSQL server; on a SQLite file, without it the file's single agent. `rm`
    /// needs it (any id `ls` prints, '' for a file's single agent); `ls` and `expire` take none
    #[arg(long, global = true, value_name = "ID")]
    pub agent: Option<String>,
    /// PostgreSQL: the most connections to the server (1 to 1000, library default: 4)
    #[arg(long, global = true, value_name = "N")]
    pub max_connections: Option<u64>,
    /// Pretty-print JSON output even when stdout is not a terminal
    #[arg(long, global = true, conflicts_with = "compact")]
    pub pretty: bool,
    /// Print compact JSON (the library's exact encoding) even on a terminal
    #[arg(long, global = true)]
    pub compact: bool,
    /// Open the store read-only even for a command that writes (which then fails). Commands
    /// that only read always open read-only: they never create or modify a store
    #[arg(long, global = true)]
    pub read_only: bool,
    /// How long a call waits for what another connection holds: SQLite's write lock, on
    /// PostgreSQL a row lock or a pooled connection (library default: 5000; 0: fail at once)
    #[arg(long, global = true, value_name = "MS")]
    pub busy_timeout_ms: Option<u64>,
    /// PostgreSQL: how long the server may take to answer before the call fails as
    /// unavailable (exit 76): a connect gets this long, a statement busy timeout plus this
    /// (library default: 10000)
    #[arg(long, global = true, value_name = "MS")]
    pub server_timeout_ms: Option<u64>,
    /// Durability of a write: full survives power loss, normal a process crash (default: full;
    /// on PostgreSQL synchronous_commit on or off)
    #[arg(long, global = true, value_enum, value_name = "MODE")]
    pub synchronous: Option<Synchronous>,
    /// Largest encoded state and input document accepted, in bytes (default: the store's cap,
    /// else 2097152)
    #[arg(long, global = true, value_name = "BYTES")]
    pub max_value_bytes: Option<u64>,
    /// Record this cap in the store, for every handle opened later without its own
    /// max_value_bytes (this command's too), when a writing command opens it
    #[arg(long, global = true, value_name = "BYTES")]
    pub store_max_value_bytes: Option<u64>,
    /// Switch the agent's change log on ('{"keep_last":N}' and/or '{"keep_seconds":T}') or off
    /// ('false') when a writing command opens it. This is the agent's setting, recorded in the
    /// store for every process, so no command ever changes it unless told
    #[arg(long, global = true, value_name = "JSON")]
    pub change_log: Option<String>,
    /// The schema version this command reads and writes states under (the library's
    /// schema_version, 0 to 1000000; default 0). A write to a state stored under an older
    /// version migrates it first (with --steps); a state stored under a newer one is refused
    /// (AGENT_ERR_NEWER_SCHEMA, exit 79). `get` and `at`, which open read-only, show an older
    /// state upgraded without writing it and refuse a newer one; without this option they
    /// print every state as stored. `migrate` takes --to instead
    #[arg(long, global = true, value_name = "N")]
    pub schema_version: Option<u64>,
    /// A file holding the declarative schema steps (the library's schema_steps: a JSON array
    /// of {"from": K, "ops": [...]}, one per version K -> K+1), for --schema-version or
    /// `migrate --to`
    #[arg(long, global = true, value_name = "FILE")]
    pub steps: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Synchronous {
    Full,
    Normal,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the state (the initial state, {}, while nothing is stored), or one place of it
    ///
    /// With --path, only the value at that RFC 6901 JSON Pointer ('/messages/0/text'; '' is the
    /// whole state); AGENT_ERR_PATH (exit 81) when the state has nothing there. With --tail N
    /// too, the last N elements of the array there, as a JSON array, oldest first: the last
    /// message is `--path /messages --tail 1`.
    Get {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// Print {"version": V, "state": ...} (version 0: nothing stored)
        #[arg(long, conflicts_with = "path")]
        versioned: bool,
        /// Print only the value at this JSON Pointer (RFC 6901: '/a/0', '~1' for '/', '~0'
        /// for '~')
        #[arg(long, value_name = "POINTER")]
        path: Option<String>,
        /// With --path naming an array: print its last N elements, as a JSON array, oldest
        /// first (AGENT_ERR_INVALID_ARGUMENT when the value there is not an array)
        #[arg(long, value_name = "N", requires = "path")]
        tail: Option<usize>,
    },
    /// Merge an RFC 7396 patch into the state and print the merged state
    Set {
        /// The store: a file path (created when absent) or a postgresql:// URI
        store: PathBuf,
        /// The patch, a JSON object; '-' reads it from standard input
        patch: OsString,
        /// Write only if the state is still at version V (else AGENT_ERR_CONFLICT, nothing
        /// written); 0 means nothing stored yet
        #[arg(long, value_name = "V")]
        if_version: Option<u64>,
        /// Print {"version": V, "state": ...}
        #[arg(long)]
        versioned: bool,
    },
    /// Apply an RFC 6902 JSON Patch to the state and print the new state
    ///
    /// OPS is a JSON array of operations (add, remove, replace, move, copy, test), applied in
    /// order, all or nothing: `[{"op":"add","path":"/messages/-","value":{"text":"hi"}}]`
    /// appends to an array without sending it whole. Nothing is written when one fails:
    /// AGENT_ERR_PATH (exit 81) for a path that does not exist, AGENT_ERR_TEST_FAILED (exit
    /// 82) for a `test` that does not hold, AGENT_ERR_INVALID_ARGUMENT (exit 65) for a
    /// malformed patch or a result that is not an object.
    Patch {
        /// The store: a file path (created when absent) or a postgresql:// URI
        store: PathBuf,
        /// The operations, a JSON array; '-' reads them from standard input
        ops: OsString,
        /// Write only if the state is still at version V (else AGENT_ERR_CONFLICT, nothing
        /// written); 0 means nothing stored yet
        #[arg(long, value_name = "V")]
        if_version: Option<u64>,
        /// Print {"version": V, "state": ...}
        #[arg(long)]
        versioned: bool,
    },
    /// Replace the whole state and print it
    Replace {
        /// The store: a file path (created when absent) or a postgresql:// URI
        store: PathBuf,
        /// The new state, a JSON object; '-' reads it from standard input
        state: OsString,
        /// Write only if the state is still at version V (else AGENT_ERR_CONFLICT, nothing
        /// written); 0 means nothing stored yet
        #[arg(long, value_name = "V")]
        if_version: Option<u64>,
        /// Print {"version": V, "state": ...}
        #[arg(long)]
        versioned: bool,
    },
    /// Print the state's version, or without STORE this program's (= the library's) version
    ///
    /// With STORE: a JSON number, 0 while nothing is stored; each committed change adds 1.
    /// Without STORE: {"agent_state": "X.Y.Z"}.
    Version {
        /// The store: a file path or a postgresql:// URI
        store: Option<PathBuf>,
    },
    /// Print the change log (needs the agent's change log)
    ///
    /// A JSON array of {"version", "at" (ms since the epoch), "kind" ("merge", "json_patch",
    /// "replace" or "migration"), "schema" (the schema version the state was written under),
    /// "migrated_from" (for a schema migration, the version it upgraded from, else null),
    /// "patch" (the merge patch, or a JSON Patch's operations array; null for a replacement or
    /// a migration), "next"}, oldest first, as the library's changes_since gives it. Without the change log:
    /// AGENT_ERR_INVALID_ARGUMENT (see --change-log).
    History {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// Only the changes after version V (default: every change the log retains);
        /// AGENT_ERR_GAP when the log no longer holds them all
        #[arg(long, value_name = "V")]
        since: Option<u64>,
    },
    /// Print the state at version V
    ///
    /// V is the current version, one the change log retains, or 0 (the initial state);
    /// AGENT_ERR_GAP for a version the log does not retain.
    At {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// The version
        version: u64,
    },
    /// Write the state of version V back as a new change and print it
    ///
    /// Point-in-time recovery: the state of V (see `at`) becomes the next version, logged and
    /// seen by watchers like any write.
    Restore {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// The version to restore (see `at`)
        version: u64,
        /// Print {"version": V, "state": ...} (V: the new version)
        #[arg(long)]
        versioned: bool,
    },
    /// Follow the state's changes, one JSON line each (needs the agent's change log)
    ///
    /// Prints {"version": V, "state": ...} for the state when it starts, then one such line
    /// for each change any process commits, in commit order, until interrupted (SIGINT or
    /// SIGTERM: exit 0). The store is opened read-only. Without the change log it fails with
    /// AGENT_ERR_INVALID_ARGUMENT: `watch` never switches it on, since that would change the
    /// store for every process (see --change-log).
    Watch {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// How often to look for changes, in milliseconds
        #[arg(long, value_name = "MS", default_value_t = 100,
              value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        interval_ms: u64,
    },
    /// Serve the store's agents, read-only, over HTTP and WebSocket, with an inspector page
    ///
    /// JSON endpoints for the agents, a state, its changes and the state at a version, and a
    /// watch stream per agent (a snapshot, then each change as an RFC 7396 merge patch, an RFC
    /// 6902 JSON Patch or a replacement, in commit order, whichever process commits it), as crates/agent-state-serve/PROTOCOL.md says. The
    /// inspector page is at /. Every request needs the token (`Authorization: Bearer TOKEN` or
    /// `?access_token=TOKEN`). Prints `agent-state serve: listening on http://ADDR` when it
    /// accepts requests; runs until SIGINT or SIGTERM, then gives what is open
    /// --shutdown-timeout to finish (exit 0; a second signal exits at once, 130 or 143). Every
    /// resource a client can hold is bounded by the flags below. Takes no --agent: it serves
    /// every agent of the store.
    Serve {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// The address and port to listen on (port 0: a free one, printed at start)
        #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7420")]
        listen: std::net::SocketAddr,
        /// A file holding the token, private to its owner (chmod 600) and of at least 128 bits
        /// (e.g. 32 random hex digits); without it, one is generated and printed. Required on
        /// an address other than loopback
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// A name the Host header may give besides the listening address (and the loopback
        /// names on loopback): NAME (with the listening port or none) or NAME:PORT; repeatable
        #[arg(long, value_name = "HOST")]
        allowed_host: Vec<String>,
        /// An origin (scheme://host[:port]) whose pages may open watch streams, besides the
        /// server's own; repeatable
        #[arg(long, value_name = "ORIGIN")]
        allowed_origin: Vec<String>,
        #[command(flatten)]
        limits: crate::serve::LimitArgs,
    },
    /// Write the store's agents as JSON Lines (for `import`)
    ///
    /// One line per agent: {"agent": ID, "version": V, "schema": S, "state": {...}}, the state
    /// exactly as stored and S the schema version it was written under (read as stored, never
    /// upgraded, whatever --schema-version says); the agent is the one --agent selects (ID
    /// null: a file's single agent). An agent with nothing stored has no state to export and
    /// prints nothing. The change log is not exported. A progress bar shows on stderr when it
    /// is a terminal.
    Export {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
    },
    /// Write agents from `export`'s JSON Lines into the store
    ///
    /// Each state is written exactly as given, through the library, as a replacement: the
    /// store gives it its own next version (1 in a fresh store), and prints both versions:
    /// {"imported": N, "agents": [{"agent": ID, "source_version": V, "version": W}]}.
    /// The state goes to the agent --agent selects (ID null: a file's single agent), whatever
    /// agent the line came from. An agent that already holds a state is left alone
    /// (AGENT_ERR_CONFLICT) unless --force. One agent is written: more than one line is
    /// AGENT_ERR_INVALID_ARGUMENT. All lines are checked before the store is opened.
    ///
    /// Schema versions: the state is stored under the line's "schema" (0 when absent, as in
    /// older exports), so the program of that version finds it current. With --schema-version
    /// N it is stored under N instead: a line of an older schema is upgraded first with the
    /// steps of --steps (AGENT_ERR_MIGRATION when one is missing or fails), a line of a newer
    /// one is refused (AGENT_ERR_NEWER_SCHEMA); nothing is written for a refused line. With
    /// --force, a state the target holds under a newer schema than the one written is refused
    /// (AGENT_ERR_NEWER_SCHEMA), and one under an older schema is first migrated (its own
    /// version and change-log entry, so --steps must cover it, else AGENT_ERR_MIGRATION and
    /// nothing written), then replaced.
    Import {
        /// The store: a file path (created when absent) or a postgresql:// URI
        store: PathBuf,
        /// The JSON Lines to read; '-' (the default) is standard input
        #[arg(default_value = "-")]
        input: PathBuf,
        /// Replace a state the store already holds
        #[arg(long)]
        force: bool,
    },
    /// List the store's agents, one JSON line each, ordered by id
    ///
    /// Each line is {"id": ID, "version": V, "bytes": N, "written_at": MS}: the agent's id, its
    /// state's version, the stored state's size in bytes and when it was last written, in
    /// milliseconds since the Unix epoch (the library's listing entry, as the C ABI gives it;
    /// `jq '.written_at / 1000 | todate'` shows it as a date). Only agents with a state stored
    /// are listed (deleted ones and ones never written are not); a SQLite file's single agent,
    /// the one a command without --agent uses, is listed first with the id "". The whole
    /// store is listed, read in pages of 1000 ids, so a store of any size streams; --limit
    /// stops early, --after resumes after an id. The store is opened read-only and never
    /// created. Takes no --agent (--prefix selects agents).
    Ls {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// Only the agents whose id starts with P (byte-wise)
        #[arg(long, value_name = "P")]
        prefix: Option<String>,
        /// Only the agents after this id (the last id of an earlier listing: the next page)
        #[arg(long, value_name = "ID")]
        after: Option<String>,
        /// Print at most N agents (default: every one)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
    },
    /// Delete an agent: its state, versions and change log, in one transaction
    ///
    /// --agent ID (required) names the agent, as `ls` prints it: "" is a SQLite file's single
    /// agent. Prints {"id": ID, "deleted_version": V}, the version it had, or
    /// {"id": ID, "deleted_version": null} when nothing was stored (nothing done; exit 0).
    /// Handles open to it in other processes find it gone at their next call (their initial
    /// state at version 0), and its next first write takes a version above every deleted
    /// one, so a compare-and-set against a version read before the deletion fails. On SQLite
    /// no byte of its state or history is left in the file or its WAL when `rm` returns
    /// (AGENT_ERR_BUSY if another connection's read held up the erasure past the busy
    /// timeout: the agent is deleted, run `rm` again to erase). On PostgreSQL the rows are
    /// deleted (VACUUM, WAL archives and backups are the server's). The store is never
    /// created.
    Rm {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// Delete only if the state is still at version V (else AGENT_ERR_CONFLICT, nothing
        /// deleted); 0 means nothing stored
        #[arg(long, value_name = "V")]
        if_version: Option<u64>,
    },
    /// Delete the agents not written for longer than --idle, one JSON line each
    ///
    /// Prints each deleted agent as `ls` does, the longest idle first, deleting in batches
    /// of --batch agents (each one transaction, bounded whatever the store holds) until a
    /// batch finds fewer, or --limit agents are deleted: a cron job can run it on a store of
    /// any size. An agent written during the run is not deleted. Each agent goes as with `rm`
    /// (erased on SQLite). --dry-run deletes nothing and prints the agents the first batch
    /// would delete (with a note on stderr when that batch is full: more may be idle). Takes
    /// no --agent.
    Expire {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// How long an agent must not have been written: a whole number and a unit, ms, s,
        /// m, h, d or w (30d, 12h, 90m, 45s, 500ms, 1h30m)
        #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse)]
        idle: Duration,
        /// Print what would be deleted (the first batch), delete nothing
        #[arg(long)]
        dry_run: bool,
        /// Delete at most N agents (default: every idle one)
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// The most agents one transaction deletes (1 to 10000)
        #[arg(long, value_name = "N", default_value_t = 1000,
              value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH))]
        batch: u64,
    },
    /// Upgrade every agent of the store to schema version --to with the steps of --steps
    ///
    /// Lists the store's agents by id in batches of --batch and opens each with
    /// schema_version N and the steps (--steps FILE, required: a JSON array of
    /// {"from": K, "ops": [...]}), and reads it: the library migrates an older state on
    /// that first touch, once, in its own transaction (a program running at the same time is
    /// safe: the state is migrated once, whoever touches it first). An agent already at N is
    /// read, not written. With --agent, only that agent; with --prefix, only those ids.
    ///
    /// Prints a summary on stdout: {"to": N, "dry_run": B, "migrated": M, "current": C,
    /// "failed": F, "failures": [{"id": ID, "status": NAME, "message": ...}] (the first 10),
    /// "interrupted": null or the signal's name, "last": the last id gone through}; progress goes to stderr (a bar on a terminal, else a line per
    /// batch: `agent-state migrate: D/T agents (M migrated, C current, F failed), R/s`).
    /// Exits 0 when no agent failed, else with the first failure's status (a state of a newer
    /// schema version is AGENT_ERR_NEWER_SCHEMA and is left alone; a step that fails is
    /// AGENT_ERR_MIGRATION, the state left as it was).
    ///
    /// Resumable: SIGINT or SIGTERM stops after the agent being migrated, prints the summary
    /// and exits 130 (SIGINT) or 143 (SIGTERM); a run killed outright loses at most that
    /// agent's migration, which is one transaction. No checkpoint is kept: run the same
    /// command again and it goes through the store from the start, counting the agents
    /// already at N as current without writing them (a read each), so an agent is never
    /// migrated twice and one an old program wrote meanwhile is not skipped. --after ID (the
    /// last id the interrupted run's stderr names) skips the agents before it.
    ///
    /// --dry-run opens the store read-only and writes nothing: it upgrades each state in
    /// memory (as the library would), counts what would be migrated, and adds the first
    /// --sample changes to the summary, as "sample": [{"id", "from", "before", "after",
    /// "patch"}] (patch: the RFC 7396 merge patch from before to after).
    Migrate {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
        /// The schema version to upgrade every agent to (0 to 1000000)
        #[arg(long, value_name = "N")]
        to: u64,
        /// Write nothing: count what would be migrated and show a sample of the changes
        #[arg(long)]
        dry_run: bool,
        /// How many agent ids one listing of the store reads (1 to 10000)
        #[arg(long, value_name = "N", default_value_t = 1000,
              value_parser = clap::value_parser!(u64).range(1..=MAX_BATCH))]
        batch: u64,
        /// Start after this agent id (the ids are gone through in byte order)
        #[arg(long, value_name = "ID")]
        after: Option<String>,
        /// Only the agents whose id starts with P (byte-wise)
        #[arg(long, value_name = "P")]
        prefix: Option<String>,
        /// With --dry-run, how many changes the summary shows (0: none)
        #[arg(long, value_name = "N", default_value_t = 3)]
        sample: u64,
    },
    /// Check a store (read-only) and print a JSON report
    ///
    /// Checks SQLite's integrity, that the file is an agent store of a schema this library
    /// reads, that the state decodes and, with the change log, that every retained logged
    /// state decodes. Exits with the first failed check's status (AGENT_ERR_STORAGE for a
    /// corrupt or foreign file).
    Check {
        /// The store: a file path or a postgresql:// URI
        store: PathBuf,
    },
}
