//! The library's behaviour through its Rust API: one module per topic, all in this one test
//! binary (one link of the core, tokio, rustls and SQLite, not one per topic).
//!
//! A test of the library's behaviour is declared once, with `#[each_backend]`
//! (crates/test-support), and runs as two tests: `NAME::sqlite` on a SQLite file and
//! `NAME::postgres` on the server `AGENT_STATE_TEST_PG_URI` names (skipped, and said so, without
//! one outside CI). The tests of SQLite files themselves are plain `#[test]`s; one that must be
//! alone in its process (it forks) is `#[own_process]`. A new module here runs on both backends,
//! in `make test` and through the pooler (tests/pg/pooler-suites.sh), with no build file to
//! touch.

mod agent;
mod agents;
mod cancel;
mod change_log;
mod conformance;
mod delta;
mod group_commit;
mod hooks;
mod hot_reads;
mod hot_reads_fork;
mod json_patch;
mod schema;
mod schema_fleet;
mod store_agents;
mod store_agents_race;
mod versions;
mod work;
