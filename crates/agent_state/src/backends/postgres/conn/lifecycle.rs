//! A connection's life: connecting (a runtime of its own made for it), the probe of an idle
//! one, and the close. Each blocks on the connection's runtime, or drops it, through
//! [`off_runtime`]: on the calling thread, or on a thread of its own when the caller is inside
//! a tokio runtime (where tokio refuses both).

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio_postgres::Config;

use super::super::wait::{drive, off_runtime, unless_cancelled, Heard};
use super::{error, Conn, ConnectError, ExecMode, Limits, Tls, CLOSE_WAIT, PROBE_AFTER_IDLE};
use crate::cancel;
use crate::store::process;

impl Conn {
    /// A new connection to the one server of `config` (see `super::hosts` for the choice
    /// among a URI's hosts), secured as `tls` says, within `limits.connect`; its round trips
    /// are then bounded by `limits.round_trip`. The error says why, and whether the server
    /// refused to let us in (see [`ConnectError`]).
    pub fn connect(
        config: &Config,
        tls: &Tls,
        limits: Limits,
        mode: ExecMode,
    ) -> std::result::Result<Conn, ConnectError> {
        // The calling thread's token, read here: the connecting may run on another thread.
        let token = cancel::current();
        off_runtime(|| Conn::connect_here(config, tls, limits, mode, token))
    }

    /// [`Conn::connect`] on this thread (never inside a tokio runtime: see [`off_runtime`]).
    fn connect_here(
        config: &Config,
        tls: &Tls,
        limits: Limits,
        mode: ExecMode,
        token: Option<cancel::Cancel>,
    ) -> std::result::Result<Conn, ConnectError> {
        let whole = limits.connect;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| ConnectError {
                refused: false,
                cancelled: false,
                why: format!("cannot set up the connection's I/O: {e}"),
            })?;
        let mut config = config.clone();
        config.connect_timeout(whole);
        // The timer is made inside: it needs the runtime's context.
        let attempt = runtime.block_on(async {
            unless_cancelled(token, tokio::time::timeout(whole, tls.connect(&config))).await
        });
        let Some(attempt) = attempt else {
            return Err(ConnectError {
                refused: false,
                cancelled: true,
                why: "the call was cancelled while connecting".to_string(),
            });
        };
        match attempt {
            Ok(Ok((client, io))) => Ok(Conn {
                client: Some(client),
                io: Some(io),
                runtime: Some(runtime),
                heard: Heard::default(),
                limit: limits.round_trip,
                timed_out: false,
                committing: false,
                pid: process::generation(),
                reused: false,
                idle_since: Instant::now(),
                mode,
                prepared: HashMap::new(),
                session: None,
            }),
            Ok(Err(e)) => Err(ConnectError {
                refused: error::refused(&e),
                cancelled: false,
                why: error::describe_connect(&e),
            }),
            Err(_) => Err(ConnectError {
                refused: false,
                cancelled: false,
                why: format!(
                    "the server did not answer within server_timeout_ms ({} ms)",
                    whole.as_millis()
                ),
            }),
        }
    }

    /// False when the server closed the connection while it sat idle (a restart, an idle
    /// timeout), or a round trip on it went unanswered. No round trip: the runtime's poller
    /// turns for a millisecond while the connection is polled, which reads the end of a closed
    /// socket. Only worth it for a connection idle for a while: a dead one is also caught when
    /// used (see the retries in `super`).
    pub fn alive(&mut self) -> bool {
        if self.timed_out || !self.reusable() {
            return false;
        }
        if self.idle_since.elapsed() < PROBE_AFTER_IDLE {
            return true;
        }
        if let (Some(runtime), Some(io)) = (self.runtime.as_ref(), self.io.as_mut()) {
            let heard = &mut self.heard;
            off_runtime(|| {
                runtime.block_on(async {
                    let mut sleep = pin!(tokio::time::sleep(Duration::from_millis(1)));
                    std::future::poll_fn(|cx| {
                        // The connection first: when the socket's end and the timer come in
                        // the same turn, the end is read.
                        if drive(io, heard, cx).is_err() || heard.ended {
                            return Poll::Ready(());
                        }
                        sleep.as_mut().poll(cx)
                    })
                    .await
                })
            });
        }
        self.reusable()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let client = self.client.take();
        let io = self.io.take();
        let runtime = self.runtime.take();
        if !self.belongs_here() {
            // Inherited: the socket is the parent's, and so are the runtime's own descriptors
            // (its epoll and wake-up ones). Leak it all rather than send Terminate on it or
            // wake the parent's runtime.
            std::mem::forget(client);
            std::mem::forget(io);
            std::mem::forget(runtime);
            return;
        }
        // Without its client, the connection sends Terminate and ends (at once: the message
        // only fills the socket's buffer). After a round trip that went unanswered, the socket
        // is simply closed.
        drop(client);
        if let (Some(mut io), Some(runtime)) = (io, runtime) {
            let wait = !self.timed_out && !self.heard.ended;
            let heard = &mut self.heard;
            off_runtime(move || {
                if wait {
                    runtime.block_on(async {
                        let mut sleep = pin!(tokio::time::sleep(CLOSE_WAIT));
                        std::future::poll_fn(|cx| {
                            if drive(&mut io, heard, cx).is_err() || heard.ended {
                                return Poll::Ready(());
                            }
                            sleep.as_mut().poll(cx)
                        })
                        .await
                    });
                }
                // The socket is deregistered from the runtime's poller before the poller goes.
                drop(io);
                drop(runtime);
            });
        }
    }
}
