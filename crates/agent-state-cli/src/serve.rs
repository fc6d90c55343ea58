//! `serve`: the store's agents over HTTP and WebSocket (crates/agent-state-serve, where all the
//! network code is); this file turns the command line into its configuration.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use agent_state_serve::{Config, Limits, Token};

use crate::args::Global;
use crate::failure::Failure;
use crate::open::{store_options, Access};

pub fn serve(
    store: &Path,
    global: &Global,
    listen: SocketAddr,
    token_file: Option<&Path>,
    (allowed_hosts, allowed_origins): (&[String], &[String]),
    limits: &LimitArgs,
) -> Result<(), Failure> {
    let options = store_options(global, Access::Read, "serve", false)?;
    let token = match token_file {
        Some(path) => Token::from_file(path)?,
        None => Token::generate()?,
    };
    let config = Config {
        store: store.to_path_buf(),
        options,
        listen,
        token: token.clone(),
        token_given: token_file.is_some(),
        allowed_hosts: allowed_hosts.to_vec(),
        allowed_origins: allowed_origins.to_vec(),
        limits: limits.limits(),
        watch_poll: limits.watch_poll,
        ping_interval: limits.ping_interval,
    };
    agent_state_serve::serve(config, |bound| {
        // The lines a script waits for (PROTOCOL.md); stdout is flushed so a pipe sees them.
        let mut lines = format!("agent-state serve: listening on http://{bound}\n");
        if token_file.is_none() {
            let token = token.reveal();
            lines.push_str(&format!("agent-state serve: token {token}\n"));
            lines.push_str(&format!(
                "agent-state serve: inspector http://{bound}/?access_token={token}\n"
            ));
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
    })?;
    Ok(())
}

/// `serve`'s bounds on what clients can make it hold (PROTOCOL.md, "Limits"), and how it
/// learns of commits on PostgreSQL.
#[derive(clap::Args, Debug)]
pub struct LimitArgs {
    /// The byte budget of a /changes page: its changes' JSON stays within it, but for the
    /// page's first change, sent whatever its size
    #[arg(long, value_name = "BYTES", default_value_t = agent_state_serve::DEFAULT_PAGE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    page_bytes: u64,
    /// A connection that has not sent a request's complete headers this long after it opened,
    /// or after its previous answer, is closed (silent, slow and idle keep-alive ones alike)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive)]
    header_timeout: Duration,
    /// A client that reads nothing of its answer (or of its watch stream) this long is dropped
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = positive)]
    write_timeout: Duration,
    /// HTTP connections served at once, counted when accepted (before authentication); one
    /// more is closed at once. A watch stream leaves this count when it upgrades
    #[arg(long, value_name = "N", default_value_t = agent_state_serve::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_http_connections: u64,
    /// Watch streams open at once; one more is refused with 503 too_many_streams
    #[arg(long, value_name = "N", default_value_t = agent_state_serve::DEFAULT_MAX_STREAMS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_streams: u64,
    /// After SIGINT or SIGTERM, how long open requests and streams get to finish before the
    /// process exits with them open (a second signal exits at once, status 130 or 143)
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::duration::parse)]
    shutdown_timeout: Duration,
    /// PostgreSQL through a transaction pooler, which cannot carry LISTEN: learn of commits by
    /// one query of the watched agents' versions this often (a change then reaches its streams
    /// within about this long) instead of by notifications, the default. Ignored on SQLite
    #[arg(long, value_name = "DURATION", value_parser = positive)]
    watch_poll: Option<Duration>,
    /// How often each watch stream pings; a client takes a stream silent for three intervals
    /// as dead. Under the idle timeout of any proxy on the way (often 60 s)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = positive)]
    ping_interval: Duration,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Limits {
            page_bytes: count(self.page_bytes),
            header_timeout: self.header_timeout,
            write_timeout: self.write_timeout,
            max_connections: count(self.max_http_connections),
            max_streams: count(self.max_streams),
            shutdown_timeout: self.shutdown_timeout,
        }
    }
}

/// A duration above zero (a timeout of 0 would close every connection at once).
fn positive(text: &str) -> Result<Duration, String> {
    match crate::duration::parse(text)? {
        d if d.is_zero() => Err(format!("{text:?}: a timeout must be above zero")),
        d => Ok(d),
    }
}
