//! `agent-state serve`: a store's agents, read-only, over HTTP/1.1 and WebSocket.
//!
//! One watch of the store (the library's `agent_state::watch`, pushed every process's commits
//! by its watcher) carries the changes of every watched agent; a dispatcher thread encodes each
//! once and broadcasts it to that agent's feed ([`feed`]), which its watch streams
//! ([`watch`]) follow, each of them having begun with a snapshot or exactly the changes after
//! the client's version ([`catch_up`]). The server's threads do not depend on how many agents
//! are watched. The JSON
//! endpoints ([`api`]) read through shared handles ([`handles`]); every request passes the
//! `Host` check ([`host`]) and the bearer token ([`auth`]) before its path is looked at
//! ([`route`]), and a watch upgrade the `Origin` check ([`origin`]). The inspector page
//! ([`page`]) is built into the binary. The protocol is in PROTOCOL.md beside this crate.
//!
//! All the network code of the project lives here: the library knows nothing of it.

mod api;
mod auth;
mod catch_up;
mod feed;
mod handles;
mod host;
mod limits;
mod listen;
mod message;
mod origin;
mod page;
mod reply;
mod route;
mod watch;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_state::{Error, OpenOptions, Result};
use axum::http::{header, HeaderValue};
use axum::Router;

pub use auth::Token;
pub use feed::BACKLOG;
pub use limits::*;
pub use watch::{CLOSE_TOO_SLOW, DEFAULT_PING_INTERVAL};

/// The port of `--listen`'s default, `127.0.0.1:7420`.
pub const DEFAULT_PORT: u16 = 7420;
/// The most threads reading the store at once (the JSON endpoints, the starts of watch
/// streams). Tokio's default, 512, let a burst of stream starts (a fleet of subscribers
/// connecting) leave hundreds of idle threads behind for a while; more than this gains
/// nothing, as a SQLite file's handles take turns on one connection and PostgreSQL's share the
/// pool (`--max-connections`, 4 by default). Beyond it, reads wait for a thread in turn.
const MAX_BLOCKING_THREADS: usize = 32;
/// How long open streams get to be closed when the server stops.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What to serve, where, and to whom.
pub struct Config {
    /// A SQLite file or a PostgreSQL URI, as `Agent::open` takes it.
    pub store: PathBuf,
    /// The connection's options (opened read-only whatever they say; `agent_id` per agent).
    pub options: OpenOptions,
    pub listen: SocketAddr,
    pub token: Token,
    /// Whether the token was given (`--token-file`) rather than generated: a server on an
    /// address other than loopback needs one that was given.
    pub token_given: bool,
    /// Names a request's `Host` may give besides the listening address (and, on loopback, the
    /// loopback names): `name` (with the listening port or none) or `name:port`.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) a watch upgrade may come from besides the server's own.
    pub allowed_origins: Vec<String>,
    /// The bounds on what clients can make the server hold.
    pub limits: Limits,
    /// PostgreSQL: `Some(interval)` learns of commits by one store-wide query of the watched
    /// agents' versions per interval instead of LISTEN/NOTIFY (a connection through a
    /// transaction pooler cannot carry LISTEN). `None`: notifications. Ignored on SQLite.
    pub watch_poll: Option<Duration>,
    /// How often each watch stream pings (`--ping-interval`, [`DEFAULT_PING_INTERVAL`]): the
    /// clients take a stream silent for three intervals as dead.
    pub ping_interval: Duration,
}

/// Serves until SIGINT or SIGTERM, then gives what is open `limits.shutdown_timeout` to finish
/// and returns; a second signal meanwhile ends the process at once (`std::process::exit` with
/// 130 or 143). `ready` is called with the address bound (a port 0 made real) once requests
/// are accepted. Fails with `InvalidArgument` for a configuration that is
/// refused, and `Unavailable` when the address cannot be bound.
pub fn serve(config: Config, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    if !config.listen.ip().is_loopback() && !config.token_given {
        return Err(Error::InvalidArgument(format!(
            "--listen {}: not a loopback address; a server others can reach needs \
             --token-file (a generated token would be printed for anyone reading the output)",
            config.listen
        )));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("serve")
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .map_err(|e| Error::Storage(format!("cannot start the server's runtime: {e}").into()))?;
    let result = runtime.block_on(run(config, ready));
    runtime.shutdown_timeout(STOP_GRACE);
    result
}

async fn run(config: Config, ready: impl FnOnce(SocketAddr)) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| {
            Error::Unavailable(format!("cannot listen on {}: {e}", config.listen).into())
        })?;
    let bound = listener.local_addr().map_err(|e| {
        Error::Unavailable(format!("cannot listen on {}: {e}", config.listen).into())
    })?;
    let handles = Arc::new(handles::Handles::new(config.store, config.options));
    let (stop, stopping) = tokio::sync::watch::channel(false);
    // Every stream holds a sender; none is ever sent on: the receiver ends when all are gone.
    let (streams, mut streams_ended) = tokio::sync::mpsc::channel::<()>(1);
    let app = Arc::new(route::App {
        streams,
        token: config.token,
        feeds: Arc::new(feed::Feeds::new(Arc::clone(&handles), config.watch_poll)),
        handles,
        page: page::Page::new(),
        hosts: host::Hosts::new(bound, &config.allowed_hosts),
        origins: origin::Origins::new(&config.allowed_origins),
        guesses: auth::Guesses::default(),
        stopping,
        limits: config.limits,
        stream_slots: Arc::new(tokio::sync::Semaphore::new(config.limits.max_streams)),
        pings: crate::watch::Pings::new(config.ping_interval),
    });
    let router = Router::new()
        .fallback(route::handle)
        .with_state(app)
        .layer(axum::middleware::map_response(common_headers));
    // The handlers first: a signal right after the ready line is the server's to handle.
    let mut signals = Signals::new();
    ready(bound);
    let connections = Arc::new(tokio::sync::Semaphore::new(config.limits.max_connections));
    let accepting = tokio::spawn(listen::accept(
        listener,
        router,
        config.limits,
        Arc::clone(&connections),
        stop.subscribe(),
    ));
    let first = signals.next().await;
    let _ = stop.send(true);
    // The listener is closed once accepting has ended: new connections are refused.
    let _ = accepting.await;
    // Open requests and streams get the shutdown deadline to finish (streams close with
    // 1001); a second signal ends the process at once, with the status that signal's default
    // action would give (128 + its number: 130 for SIGINT, 143 for SIGTERM).
    let max = u32::try_from(config.limits.max_connections).unwrap_or(u32::MAX);
    let finished = async {
        let _ = connections.acquire_many(max).await;
        let _ = streams_ended.recv().await;
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "agent-state serve: stopping ({first}); open requests get {} ms",
        config.limits.shutdown_timeout.as_millis()
    )
    .and_then(|()| out.flush());
    drop(out);
    tokio::select! {
        _ = tokio::time::timeout(config.limits.shutdown_timeout, finished) => Ok(()),
        second = signals.next() => std::process::exit(128 + second.number()),
    }
}

/// Headers on every answer: nothing is cached (states change, tokens travel in URLs), and
/// nothing is sniffed into another type.
async fn common_headers(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// SIGINT and SIGTERM, as they come.
struct Signals {
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

/// A signal that stops the server.
#[derive(Clone, Copy)]
enum Stop {
    Interrupt,
    Terminate,
}

impl Stop {
    fn number(self) -> i32 {
        match self {
            Stop::Interrupt => 2,
            Stop::Terminate => 15,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
        })
    }
}

impl Signals {
    fn new() -> Signals {
        use tokio::signal::unix::{signal, SignalKind};
        let handlers = match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Some((int, term)),
            _ => None,
        };
        Signals { handlers }
    }

    /// The next SIGINT or SIGTERM. Without handlers the default actions stay: the signal ends
    /// the process, and this never returns.
    async fn next(&mut self) -> Stop {
        let Some((int, term)) = self.handlers.as_mut() else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => Stop::Interrupt,
            _ = term.recv() => Stop::Terminate,
        }
    }
}
