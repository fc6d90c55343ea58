//! `make bench`, PostgreSQL part: agent_state's PostgreSQL backend through its C ABI against
//! the SQL a user would write instead, through the same client crate (`postgres`) to the same
//! server, in one run, with ratios as the result. The server is the one at
//! `AGENT_STATE_TEST_PG_URI` (bench/run.sh starts a throwaway one when it is unset); without it
//! the bench says it was skipped.
//!
//! Method, as in benches/abi.rs: alternating rounds, median time per operation of each
//! contender, ratio `alternative time / our time` (above 1: we are faster).
//! - set_state against the write floor: a prepared
//!   `UPDATE bench_floor SET state = $2, version = version + 1 WHERE agent_id = $1 AND version = $3`
//!   of the very bytes our merge produces, on a connection with the same `synchronous_commit`;
//!   at 1 KiB in both of the URI's `default_query_exec_mode`s (`exec`, the default: unnamed
//!   statements; `cache_statement`: prepared ones and session settings), each row saying which.
//! - get_state of an unchanged state against a prepared `SELECT state ... WHERE agent_id = $1`.
//! - Through a connection pooler: set_state (1 KiB, synchronous full) and get_state again, through
//!   PgBouncer in transaction mode (`AGENT_STATE_TEST_PG_POOLER_URI`; bench/run.sh starts one in
//!   front of its server), as extra rows beside the direct ones. The floor there is the same SQL
//!   as unnamed statements (`query_typed`): prepared statements do not survive transaction
//!   pooling.
//! - Bytes sent per write (a write-cost target): a 2-member patch on a 256 KiB state, the
//!   bytes our client sends the server per set_state counted by a proxy between them
//!   (postgres/bytes.rs).
//! - Throughput: 8 processes (this program again, `--child`) with 8 agents each, set_state
//!   round robin for a fixed time, against the same processes running the floor UPDATE on 8
//!   rows each; total commits per second, alternating, median of the rounds; in both modes.
//! - The freshness query (what a get_state of an unchanged state costs): get_state of an
//!   unchanged 1 KiB state with `cache_statement` (the query prepared) against the same with
//!   `exec` (unnamed).
//!
//! - A member added deep in the state: 300 writes each adding one ~200-byte member 1, 2 or 4
//!   levels down, against the same at the top level (postgres/nested.rs).
//!
//! - Appending to a list: 300 appends of one ~200-byte message to a conversation's list from
//!   ~1 KiB and from 256 KiB, by JSON Patch and by RFC 7396 (the whole list again), and the
//!   bytes sent per append (postgres/append.rs).
//!
//! Usage: `cargo bench --bench postgres -- [--smoke] [--out FILE] [--only GROUPS]`, GROUPS
//! one or more of `set` (set_state 1 KiB, both modes), `throughput`, `pooler`, `freshness`,
//! `nested` and `append`, separated by commas.

mod support;

// The write-cost target on bytes sent per write, through a counting proxy.
#[path = "postgres/bytes.rs"]
mod bytes;
// A member added 1, 2 and 4 levels down against the same at the top level.
#[path = "postgres/nested.rs"]
mod nested;
// Appends to a growing list by JSON Patch and by RFC 7396, and the bytes an append sends.
#[path = "postgres/append.rs"]
mod append;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use postgres::types::Type;
use postgres::{Client, NoTls, Statement};
use support::{
    make_patches, make_state, median, print_table, race, states_after, store_list, Abi, Args, Row,
};

const FLOOR_TABLE: &str = "CREATE TABLE IF NOT EXISTS bench_floor (
    agent_id text PRIMARY KEY, state text NOT NULL, version bigint NOT NULL)";
const FLOOR_UPDATE: &str =
    "UPDATE bench_floor SET state = $2, version = version + 1 WHERE agent_id = $1 AND version = $3";
const FLOOR_SELECT: &str = "SELECT state FROM bench_floor WHERE agent_id = $1";

/// Processes and agents per process of the throughput case.
const PROCESSES: usize = 8;
const AGENTS_PER_PROCESS: usize = 8;
/// The state size of the throughput case.
const THROUGHPUT_SIZE: usize = 1024;

/// `synchronous` option and the `synchronous_commit` it sets.
const SYNCS: [(&str, &str); 2] = [("full", "on"), ("normal", "off")];

/// The URI parameter choosing how statements are sent, and its values (the first the
/// default).
const MODE_PARAM: &str = "default_query_exec_mode";
const MODES: [&str; 2] = ["exec", "cache_statement"];

/// `uri` with statements sent in `mode` (the default's as it is).
fn in_mode(uri: &str, mode: &str) -> String {
    if mode == MODES[0] {
        return uri.to_string();
    }
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}{MODE_PARAM}={mode}")
}

/// Whether `--only` (a comma-separated list) asks for the group `case` (all run without it).
fn runs(cfg: &Args, case: &str) -> bool {
    cfg.only
        .as_deref()
        .is_none_or(|only| only.split(',').any(|c| c == case))
}

/// Agent ids and floor rows of this run start with this (several runs may share a server).
fn prefix() -> String {
    format!("bench-{}", std::process::id())
}

/// Our handle on agent `agent` of the server at `uri`.
fn ours(uri: &str, agent: &str, sync: &str) -> Abi {
    Abi::open(
        Path::new(uri),
        &format!(r#"{{"agent_id":"{agent}","synchronous":"{sync}","max_value_bytes":4194304}}"#),
    )
}

/// The code a user would write instead: a row per agent, its state as text, updated with a
/// version check, on a connection of its own.
struct Floor {
    client: Client,
    /// The prepared statements; `None` through a pooler in transaction mode, where the same
    /// SQL runs as unnamed statements.
    prepared: Option<(Statement, Statement)>,
}

impl Floor {
    fn connect(uri: &str, synchronous_commit: &str) -> Floor {
        let mut client = Client::connect(uri, NoTls).unwrap();
        client
            .batch_execute(&format!("SET synchronous_commit = {synchronous_commit}"))
            .unwrap();
        let update = client.prepare(FLOOR_UPDATE).unwrap();
        let select = client.prepare(FLOOR_SELECT).unwrap();
        Floor {
            client,
            prepared: Some((update, select)),
        }
    }
    /// Through a pooler in transaction mode: no prepared statement, no session setting (the
    /// server's `synchronous_commit`, on).
    fn through_pooler(uri: &str) -> Floor {
        Floor {
            client: Client::connect(uri, NoTls).unwrap(),
            prepared: None,
        }
    }
    /// Sets row `agent` to `state` at version 0 (inserted when missing); returns its version.
    fn reset(&mut self, agent: &str, state: &str) -> i64 {
        // Unnamed (query_typed): also through a pooler in transaction mode.
        self.client
            .query_typed(
                "INSERT INTO bench_floor VALUES ($1, $2, 0)
                 ON CONFLICT (agent_id) DO UPDATE SET state = excluded.state, version = 0",
                &[(&agent, Type::TEXT), (&state, Type::TEXT)],
            )
            .unwrap();
        0
    }
    /// The conditional UPDATE from `version`; returns the next version.
    fn update(&mut self, agent: &str, state: &str, version: i64) -> i64 {
        let n = match &self.prepared {
            Some((update, _)) => self
                .client
                .execute(update, &[&agent, &state, &version])
                .unwrap(),
            None => {
                // query_typed gives rows, not the command tag's count: RETURNING.
                self.client
                    .query_typed(
                        &format!("{FLOOR_UPDATE} RETURNING version"),
                        &[
                            (&agent, Type::TEXT),
                            (&state, Type::TEXT),
                            (&version, Type::INT8),
                        ],
                    )
                    .unwrap()
                    .len() as u64
            }
        };
        assert_eq!(n, 1, "the floor's row {agent} was not at version {version}");
        version + 1
    }
    fn select(&mut self, agent: &str) -> String {
        match &self.prepared {
            Some((_, select)) => self.client.query_one(select, &[&agent]).unwrap().get(0),
            None => self
                .client
                .query_typed_one(FLOOR_SELECT, &[(&agent, Type::TEXT)])
                .unwrap()
                .get(0),
        }
    }
}

fn texts(states: Vec<Vec<u8>>) -> Vec<String> {
    states
        .into_iter()
        .map(|s| String::from_utf8(s).unwrap())
        .collect()
}

/// set_state of `size` bytes against the floor, at each synchronous setting, with statements
/// sent in `mode`.
fn bench_writes(cfg: &Args, uri: &str, size: usize, mode: &str, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let patches = make_patches(64);
    let merged = texts(states_after(&state, &patches));
    let initial = String::from_utf8(state.clone()).unwrap();
    for (sync, synchronous_commit) in SYNCS {
        let agent = format!("{}-set-{size}-{sync}-{mode}", prefix());
        let ours = ours(&in_mode(uri, mode), &agent, sync);
        ours.replace(&state);
        let mut floor = Floor::connect(uri, synchronous_commit);
        let mut version = floor.reset(&agent, &initial);
        let ops = if cfg.smoke {
            10
        } else if sync == "full" {
            50
        } else {
            200
        };
        let mut set_ours = |i: usize| ours.set(&patches[i % patches.len()]);
        let mut set_floor =
            |i: usize| version = floor.update(&agent, &merged[i % merged.len()], version);
        let t = race(&mut [&mut set_ours, &mut set_floor], cfg.rounds(), ops);
        rows.push(Row {
            op: format!("set_state ({MODE_PARAM}={mode})"),
            size,
            dir: String::new(),
            sync: sync.into(),
            ours_ns: t[0],
            alternative: "prepared conditional UPDATE (floor)".into(),
            alt_ns: t[1],
            target: Some(if size == 1024 { 0.8 } else { 0.7 }),
            ..Row::default()
        });
    }
}

/// get_state of an unchanged 1 KiB state, which asks the server for the agent's version (the
/// freshness query), prepared (`cache_statement`) against unnamed (`exec`).
fn bench_freshness(cfg: &Args, uri: &str, rows: &mut Vec<Row>) {
    let state = make_state(1024);
    let agent = format!("{}-fresh", prefix());
    let [exec, cached] = MODES.map(|mode| ours(&in_mode(uri, mode), &agent, "full"));
    exec.replace(&state);
    let ops = if cfg.smoke { 10 } else { 500 };
    let mut sink = 0usize;
    let mut get_cached = |_: usize| sink = sink.wrapping_add(cached.get());
    let mut get_exec = |_: usize| {
        std::hint::black_box(exec.get());
    };
    let t = race(&mut [&mut get_cached, &mut get_exec], cfg.rounds(), ops);
    std::hint::black_box(sink);
    rows.push(Row {
        op: format!(
            "get_state, unchanged: the freshness query prepared ({MODE_PARAM}=cache_statement)"
        ),
        size: 1024,
        dir: String::new(),
        sync: "full".into(),
        ours_ns: t[0],
        alternative: format!("the same, unnamed ({MODE_PARAM}=exec)"),
        alt_ns: t[1],
        target: None,
        ..Row::default()
    });
}

fn bench_reads(cfg: &Args, uri: &str, size: usize, rows: &mut Vec<Row>) {
    let state = make_state(size);
    let agent = format!("{}-get-{size}", prefix());
    let ours = ours(uri, &agent, "full");
    ours.replace(&state);
    let mut floor = Floor::connect(uri, "on");
    floor.reset(&agent, std::str::from_utf8(&state).unwrap());
    let ops = if cfg.smoke { 10 } else { 100 };
    let mut sink = 0usize;
    let mut get_ours = |_: usize| sink = sink.wrapping_add(ours.get());
    let mut select = |_: usize| {
        std::hint::black_box(floor.select(&agent));
    };
    let t = race(&mut [&mut get_ours, &mut select], cfg.rounds(), ops);
    std::hint::black_box(sink);
    rows.push(Row {
        op: "get_state, unchanged".into(),
        size,
        dir: String::new(),
        sync: "full".into(),
        ours_ns: t[0],
        alternative: "prepared SELECT".into(),
        alt_ns: t[1],
        target: Some(3.0),
        ..Row::default()
    });
}

/// set_state (1 KiB, synchronous full) and get_state (256 KiB, unchanged) through the pooler
/// at `pooler` (transaction mode), against the same SQL as unnamed statements through it.
fn bench_pooler(cfg: &Args, pooler: &str, rows: &mut Vec<Row>) {
    let size = 1024;
    let state = make_state(size);
    let patches = make_patches(64);
    let merged = texts(states_after(&state, &patches));
    let agent = format!("{}-pooler-set-{size}", prefix());
    let ours_w = ours(pooler, &agent, "full");
    ours_w.replace(&state);
    let mut floor = Floor::through_pooler(pooler);
    let mut version = floor.reset(&agent, std::str::from_utf8(&state).unwrap());
    let ops = if cfg.smoke { 10 } else { 50 };
    let mut set_ours = |i: usize| ours_w.set(&patches[i % patches.len()]);
    let mut set_floor =
        |i: usize| version = floor.update(&agent, &merged[i % merged.len()], version);
    let t = race(&mut [&mut set_ours, &mut set_floor], cfg.rounds(), ops);
    rows.push(Row {
        op: format!("set_state, through PgBouncer (transaction mode; {MODE_PARAM}=exec)"),
        size,
        dir: String::new(),
        sync: "full".into(),
        ours_ns: t[0],
        alternative: "unnamed conditional UPDATE (floor), through PgBouncer".into(),
        alt_ns: t[1],
        target: Some(0.9),
        ..Row::default()
    });

    let size = 256 * 1024;
    let state = make_state(size);
    let agent = format!("{}-pooler-get-{size}", prefix());
    let ours_r = ours(pooler, &agent, "full");
    ours_r.replace(&state);
    floor.reset(&agent, std::str::from_utf8(&state).unwrap());
    let ops = if cfg.smoke { 10 } else { 100 };
    let mut sink = 0usize;
    let mut get_ours = |_: usize| sink = sink.wrapping_add(ours_r.get());
    let mut select = |_: usize| {
        std::hint::black_box(floor.select(&agent));
    };
    let t = race(&mut [&mut get_ours, &mut select], cfg.rounds(), ops);
    std::hint::black_box(sink);
    rows.push(Row {
        op: "get_state, unchanged, through PgBouncer (transaction mode)".into(),
        size,
        dir: String::new(),
        sync: "full".into(),
        ours_ns: t[0],
        alternative: "unnamed SELECT, through PgBouncer".into(),
        alt_ns: t[1],
        target: None,
        ..Row::default()
    });
}

/// What being pooler-safe costs the server, in one run: the freshness test each get_state of
/// an unchanged state makes (the agent's version, log setting and stamp by its key), as the
/// library sends it (an unnamed statement: parsed and planned each time) against the same
/// SELECT prepared once (what a session-bound connection could do).
fn bench_unnamed_cost(cfg: &Args, uri: &str, rows: &mut Vec<Row>) {
    const HEAD: &str = "SELECT version, state FROM bench_floor WHERE agent_id = $1";
    let agent = format!("{}-head", prefix());
    let mut floor = Floor::connect(uri, "on");
    floor.reset(&agent, "{}");
    let mut unnamed = Client::connect(uri, NoTls).unwrap();
    let mut prepared = Client::connect(uri, NoTls).unwrap();
    let statement = prepared.prepare(HEAD).unwrap();
    let ops = if cfg.smoke { 10 } else { 500 };
    let mut run_unnamed = |_: usize| {
        std::hint::black_box(
            unnamed
                .query_typed(HEAD, &[(&agent, Type::TEXT)])
                .unwrap()
                .len(),
        );
    };
    let mut run_prepared = |_: usize| {
        std::hint::black_box(prepared.query(&statement, &[&agent]).unwrap().len());
    };
    let t = race(
        &mut [&mut run_unnamed, &mut run_prepared],
        cfg.rounds(),
        ops,
    );
    rows.push(Row {
        op: "freshness query, unnamed (pooler-safe, as the library sends it)".into(),
        size: 0,
        dir: String::new(),
        sync: String::new(),
        ours_ns: t[0],
        alternative: "the same SELECT, prepared once".into(),
        alt_ns: t[1],
        target: None,
        ..Row::default()
    });
}

/// `uri` naming the database `db` of the same server.
fn with_database(uri: &str, db: &str) -> String {
    let (scheme, rest) = uri.split_once("://").unwrap();
    let path_start = rest.find('/').unwrap_or(rest.len());
    let (authority, after) = rest.split_at(path_start);
    let query = after.find('?').map_or("", |q| &after[q..]);
    format!("{scheme}://{authority}/{db}{query}")
}

/// Listing a store's agents on PostgreSQL: a page of 100 of `agent_store_list` from the middle
/// of a database of 100,000 agents against the same page of a database of 1,000 (each a
/// database of its own, made by the library, filled in bulk with SQL, dropped afterwards).
fn bench_listing(cfg: &Args, uri: &str, rows: &mut Vec<Row>) {
    let (small_n, large_n) = if cfg.smoke {
        (100, 1000)
    } else {
        (1000, 100_000)
    };
    let mut admin = Client::connect(uri, NoTls).unwrap();
    let mut made = Vec::new();
    for n in [small_n, large_n] {
        let db = format!("bench_agents_{}_{n}", std::process::id());
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .unwrap();
        let db_uri = with_database(uri, &db);
        drop(ours(&db_uri, "seed", "normal")); // the library's tables
        let mut c = Client::connect(&db_uri, NoTls).unwrap();
        c.execute(
            "INSERT INTO agent_state (agent, value, version, written_ms, written_grain)
             SELECT 'agent-' || lpad(i::text, 6, '0'), repeat('x', 1024), 1, 0, 0
             FROM generate_series(0, $1::bigint - 1) i",
            &[&(n as i64)],
        )
        .unwrap();
        c.batch_execute("ANALYZE agent_state").unwrap();
        let after = CString::new(format!("agent-{:06}", n / 2)).unwrap();
        made.push((db, CString::new(db_uri).unwrap(), after));
    }
    let ops = if cfg.smoke { 5 } else { 100 };
    let (small, large) = (&made[0], &made[1]);
    let mut list_large = |_: usize| {
        std::hint::black_box(store_list(&large.1, &large.2, 100));
    };
    let mut list_small = |_: usize| {
        std::hint::black_box(store_list(&small.1, &small.2, 100));
    };
    let t = race(&mut [&mut list_large, &mut list_small], cfg.rounds(), ops);
    rows.push(Row {
        op: format!("agent_store_list, a page of 100 of {large_n} agents"),
        size: 1024,
        dir: String::new(),
        sync: String::new(),
        ours_ns: t[0],
        alternative: format!("the same page of {small_n} agents"),
        alt_ns: t[1],
        target: Some(0.5),
        note: "listing: a page costs what it holds".into(),
        ..Row::default()
    });
    for (db, _, _) in made {
        admin
            .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
            .unwrap();
    }
}

/// A throughput child: opens its 8 agents (ours) or rows (floor), says `ready`, waits for a
/// line on stdin, writes round robin for `secs`, then prints `commits seconds`.
fn child(uri: &str, kind: &str, sync: &str, mode: &str, id: &str, secs: f64) {
    let state = make_state(THROUGHPUT_SIZE);
    let patches = make_patches(64);
    let agents: Vec<String> = (0..AGENTS_PER_PROCESS)
        .map(|a| format!("{id}-{a}"))
        .collect();
    let go = || {
        println!("ready");
        std::io::stdout().flush().unwrap();
        std::io::stdin().read_line(&mut String::new()).unwrap();
        let deadline = Duration::from_secs_f64(secs);
        (Instant::now(), deadline)
    };
    let mut commits = 0usize;
    let elapsed;
    if kind == "ours" {
        let uri = in_mode(uri, mode);
        let handles: Vec<Abi> = agents.iter().map(|a| ours(&uri, a, sync)).collect();
        for h in &handles {
            h.replace(&state);
        }
        let (start, deadline) = go();
        while start.elapsed() < deadline {
            let h = &handles[commits % AGENTS_PER_PROCESS];
            h.set(&patches[(commits / AGENTS_PER_PROCESS) % patches.len()]);
            commits += 1;
        }
        elapsed = start.elapsed();
    } else {
        let merged = texts(states_after(&state, &patches));
        let synchronous_commit = SYNCS.iter().find(|(s, _)| *s == sync).unwrap().1;
        let mut floor = Floor::connect(uri, synchronous_commit);
        let initial = String::from_utf8(state).unwrap();
        let mut versions: Vec<i64> = agents.iter().map(|a| floor.reset(a, &initial)).collect();
        let (start, deadline) = go();
        while start.elapsed() < deadline {
            let a = commits % AGENTS_PER_PROCESS;
            let next = &merged[(commits / AGENTS_PER_PROCESS) % merged.len()];
            versions[a] = floor.update(&agents[a], next, versions[a]);
            commits += 1;
        }
        elapsed = start.elapsed();
    }
    println!("{commits} {}", elapsed.as_secs_f64());
}

/// Runs the 8 children of one contender at once; returns their total commits per second.
fn throughput_round(uri: &str, kind: &str, sync: &str, mode: &str, round: usize, secs: f64) -> f64 {
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let id = format!("{}-tp-{kind}-{sync}-{mode}-{round}-{p}", prefix());
            Command::new(&exe)
                .args(["--child", kind, sync, mode, &id, &secs.to_string()])
                .env("AGENT_STATE_TEST_PG_URI", uri)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut outputs: Vec<_> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().unwrap()))
        .collect();
    for out in &mut outputs {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "a throughput child failed to start");
    }
    for c in &mut children {
        c.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let mut total = 0.0;
    for (c, mut out) in children.iter_mut().zip(outputs) {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(c.wait().unwrap().success(), "a throughput child failed");
        let mut fields = line.split_whitespace().map(|f| f.parse::<f64>().unwrap());
        let (commits, seconds) = (fields.next().unwrap(), fields.next().unwrap());
        total += commits / seconds;
    }
    total
}

/// Commits per second of 8 processes x 8 agents, ours against the floor, alternating rounds.
/// The rows carry time per commit (1/throughput), so that the ratio reads as elsewhere.
fn bench_throughput(cfg: &Args, uri: &str, rows: &mut Vec<Row>) -> Vec<(String, f64, f64)> {
    let (rounds, secs) = if cfg.smoke { (1, 0.2) } else { (5, 2.0) };
    let mut figures = Vec::new();
    for mode in MODES {
        for (sync, _) in SYNCS {
            let mut samples = [Vec::new(), Vec::new()];
            for round in 0..rounds {
                for k in 0..2 {
                    let c = (round + k) % 2;
                    let kind = ["ours", "floor"][c];
                    samples[c].push(throughput_round(uri, kind, sync, mode, round, secs));
                }
            }
            let [ours, floor] = samples.map(median);
            rows.push(Row {
                op: format!(
                    "set_state, {PROCESSES} processes x {AGENTS_PER_PROCESS} agents \
                     ({MODE_PARAM}={mode})"
                ),
                size: THROUGHPUT_SIZE,
                dir: String::new(),
                sync: sync.into(),
                ours_ns: 1e9 / ours,
                alternative: format!(
                    "floor UPDATE, {PROCESSES} processes x {AGENTS_PER_PROCESS} rows"
                ),
                alt_ns: 1e9 / floor,
                target: Some(0.8),
                ..Row::default()
            });
            figures.push((format!("{sync}, {MODE_PARAM}={mode}"), ours, floor));
        }
    }
    figures
}

/// Prints the throughput figures (commits per second); returns them as JSON, for the results
/// file.
fn print_throughput(figures: &[(String, f64, f64)]) -> String {
    let mut extra = String::from(r#","throughput":["#);
    for (i, (sync, ours, floor)) in figures.iter().enumerate() {
        println!(
            "throughput, {PROCESSES} processes x {AGENTS_PER_PROCESS} agents, {sync}: ours {ours:.0} commits/s, floor {floor:.0} commits/s, ratio ours/floor {:.2}×",
            ours / floor
        );
        if i > 0 {
            extra.push(',');
        }
        extra.push_str(&format!(
            r#"{{"sync":"{sync}","processes":{PROCESSES},"agents_per_process":{AGENTS_PER_PROCESS},"ours_commits_per_s":{ours:.1},"floor_commits_per_s":{floor:.1}}}"#
        ));
    }
    extra.push(']');
    extra
}

/// Removes what this run stored: the floor's rows and our agents.
fn clean_up(uri: &str) {
    let mut client = Client::connect(uri, NoTls).unwrap();
    let like = format!("{}-%", prefix());
    for sql in [
        "DELETE FROM bench_floor WHERE agent_id LIKE $1",
        "DELETE FROM agent_changes WHERE agent LIKE $1",
        "DELETE FROM agent_state WHERE agent LIKE $1",
    ] {
        client.execute(sql, &[&like]).unwrap();
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let uri = std::env::var("AGENT_STATE_TEST_PG_URI").unwrap_or_default();
    if let Some(i) = argv.iter().position(|a| a == "--child") {
        let a = &argv[i + 1..];
        child(&uri, &a[0], &a[1], &a[2], &a[3], a[4].parse().unwrap());
        return;
    }
    if uri.is_empty() {
        println!("PostgreSQL bench skipped: AGENT_STATE_TEST_PG_URI is not set");
        return;
    }
    let cfg = Args::parse("target/bench/postgres.json");
    Client::connect(&uri, NoTls)
        .unwrap()
        .batch_execute(FLOOR_TABLE)
        .unwrap();
    let mut rows = Vec::new();
    if cfg.only.is_some() {
        // `--only GROUPS`: those rows alone.
        if runs(&cfg, "set") {
            for mode in MODES {
                eprintln!("bench: PostgreSQL set_state 1 KiB, {MODE_PARAM}={mode} ...");
                bench_writes(&cfg, &uri, 1024, mode, &mut rows);
            }
        }
        if runs(&cfg, "freshness") {
            eprintln!("bench: PostgreSQL freshness query, prepared against unnamed ...");
            bench_unnamed_cost(&cfg, &uri, &mut rows);
            bench_freshness(&cfg, &uri, &mut rows);
        }
        if runs(&cfg, "pooler") {
            match std::env::var("AGENT_STATE_TEST_PG_POOLER_URI") {
                Ok(pooler) if !pooler.is_empty() => bench_pooler(&cfg, &pooler, &mut rows),
                _ => eprintln!("bench: no pooler rows (AGENT_STATE_TEST_PG_POOLER_URI is unset)"),
            }
        }
        let mut throughput = Vec::new();
        if runs(&cfg, "throughput") {
            eprintln!("bench: PostgreSQL throughput, {PROCESSES} processes ...");
            throughput = bench_throughput(&cfg, &uri, &mut rows);
        }
        if runs(&cfg, "nested") {
            eprintln!("bench: PostgreSQL, a member added 1, 2 and 4 levels down ...");
            nested::bench_nested(&cfg, &uri, &mut rows);
        }
        let mut extra = String::new();
        let mut appended = None;
        if runs(&cfg, "append") {
            eprintln!("bench: PostgreSQL, appending to a list ...");
            appended = append::bench_append(&cfg, &uri, &mut rows);
        }
        clean_up(&uri);
        let mut misses = print_table(&rows, false);
        print_throughput(&throughput);
        if let Some(appended) = appended {
            let (lines, json) = appended.report();
            println!("\n{lines}");
            extra.push_str(&json);
            misses += usize::from(appended.verdict() == "MISS");
        }
        println!("{misses} target(s) missed");
        support::write_json(&cfg.out, cfg.smoke, &rows, false, &extra);
        return;
    }
    for mode in MODES {
        eprintln!("bench: PostgreSQL set_state 1024 B, {MODE_PARAM}={mode} ...");
        bench_writes(&cfg, &uri, 1024, mode, &mut rows);
    }
    eprintln!("bench: PostgreSQL set_state 16384 B ...");
    bench_writes(&cfg, &uri, 16 * 1024, MODES[0], &mut rows);
    eprintln!("bench: PostgreSQL get_state 256 KiB ...");
    bench_reads(&cfg, &uri, 256 * 1024, &mut rows);
    eprintln!("bench: PostgreSQL, a store's agents: a page of the listing ...");
    bench_listing(&cfg, &uri, &mut rows);
    eprintln!("bench: PostgreSQL unnamed against prepared statements ...");
    bench_unnamed_cost(&cfg, &uri, &mut rows);
    bench_freshness(&cfg, &uri, &mut rows);
    match std::env::var("AGENT_STATE_TEST_PG_POOLER_URI") {
        Ok(pooler) if !pooler.is_empty() => {
            eprintln!("bench: PostgreSQL through PgBouncer (transaction mode) ...");
            bench_pooler(&cfg, &pooler, &mut rows);
        }
        _ => eprintln!(
            "bench: no pooler rows (AGENT_STATE_TEST_PG_POOLER_URI is not set; bench/run.sh \
             starts one)"
        ),
    }
    eprintln!("bench: PostgreSQL, a member added 1, 2 and 4 levels down ...");
    nested::bench_nested(&cfg, &uri, &mut rows);
    eprintln!("bench: PostgreSQL, appending to a list ...");
    let appended = append::bench_append(&cfg, &uri, &mut rows);
    eprintln!("bench: PostgreSQL bytes sent per write ...");
    let sent = bytes::bench_bytes_per_write(&cfg, &uri);
    eprintln!("bench: PostgreSQL throughput, {PROCESSES} processes ...");
    let figures = bench_throughput(&cfg, &uri, &mut rows);
    clean_up(&uri);

    let mut misses = print_table(&rows, false);
    println!();
    let mut extra = print_throughput(&figures);
    match sent {
        Some(sent) => {
            let (line, json) = sent.report();
            println!("{line}");
            extra.push_str(&json);
            misses += usize::from(sent.verdict() == "MISS");
        }
        None => println!("bytes sent per write: skipped (the server is not on a Unix socket)"),
    }
    match appended {
        Some(appended) => {
            let (lines, json) = appended.report();
            println!("{lines}");
            extra.push_str(&json);
            misses += usize::from(appended.verdict() == "MISS");
        }
        None => println!("bytes sent per append: skipped (the server is not on a Unix socket)"),
    }
    println!("{misses} target(s) missed");
    support::write_json(&cfg.out, cfg.smoke, &rows, false, &extra);
}
