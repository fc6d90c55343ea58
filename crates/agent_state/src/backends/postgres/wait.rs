//! Waiting for the server on a connection's own runtime: the I/O driven only while a call
//! waits, every round trip against the client's clock (`busy_timeout_ms +
//! server_timeout_ms`) and, when the calling thread has one, its cancel token
//! ([`crate::Cancel`]), which wakes the wait when fired.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::Socket;

use super::error::{PgError, PgResult};
use super::tls;
use crate::cancel::Cancel;

pub(super) type Io = tokio_postgres::Connection<Socket, tls::Stream>;

/// Polls `io` until it has nothing more to do now. An error or its end is terminal: `ended`
/// is set, and the error returned (the request in flight then fails as well).
pub(super) fn drive(
    io: &mut Io,
    ended: &mut bool,
    cx: &mut std::task::Context<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    while !*ended {
        match io.poll_message(cx) {
            // Notices (CREATE TABLE IF NOT EXISTS's "already exists, skipping") and
            // notifications (this library listens to none): ignored.
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(e))) => {
                *ended = true;
                return Err(e);
            }
            Poll::Ready(None) => *ended = true,
            Poll::Pending => break,
        }
    }
    Ok(())
}

/// Waits for `future` (a request of the client of `io`) on `runtime`, driving `io`, at most
/// `limit`; `timed_out` is set when it did not finish. An error of the connection itself (a
/// closed socket, say) is the request's error, as with the synchronous client.
pub(super) fn bounded<T>(
    runtime: &Runtime,
    io: &mut Io,
    ended: &mut bool,
    limit: Duration,
    timed_out: &mut bool,
    cancel: Option<&Cancel>,
    future: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> PgResult<T> {
    runtime.block_on(async {
        // Made here: a timer needs the runtime's context.
        let mut sleep = pin!(tokio::time::sleep(limit));
        // The token's deadline, if it comes first (a far one otherwise: never polled ready).
        let until = cancel
            .and_then(Cancel::deadline)
            .map(tokio::time::Instant::from_std);
        let mut deadline = pin!(tokio::time::sleep_until(
            until.unwrap_or_else(|| tokio::time::Instant::now() + limit + limit)
        ));
        let mut future = pin!(future);
        std::future::poll_fn(|cx| {
            if let Err(e) = drive(io, ended, cx) {
                return Poll::Ready(Err(PgError::Client(e)));
            }
            if let Poll::Ready(result) = future.as_mut().poll(cx) {
                return Poll::Ready(result.map_err(PgError::Client));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                *timed_out = true;
                return Poll::Ready(Err(PgError::TimedOut(limit)));
            }
            if let Some(token) = cancel {
                token.wake_on_cancel(cx.waker());
                let _ = deadline.as_mut().poll(cx);
                if token.is_cancelled() {
                    // The request's effect is unknown, and so is the connection's state: it is
                    // given up (the server rolls back the transaction it had open; no commit
                    // was in flight, see `Conn::committing`).
                    *timed_out = true;
                    return Poll::Ready(Err(PgError::Cancelled));
                }
            }
            Poll::Pending
        })
        .await
    })
}

/// Waits for two futures at once, polled in their order (see [`join3`]).
pub(super) async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (a, b, ()) = join3(a, b, std::future::ready(())).await;
    (a, b)
}

/// Waits for three futures at once, polled in their order (the first poll of a client's
/// request sends it: so are the requests sent); their outputs, once all are done.
pub(super) async fn join3<A: Future, B: Future, C: Future>(
    a: A,
    b: B,
    c: C,
) -> (A::Output, B::Output, C::Output) {
    let (mut a, mut b, mut c) = (pin!(a), pin!(b), pin!(c));
    let (mut ra, mut rb, mut rc) = (None, None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            ra = poll_once(a.as_mut(), cx);
        }
        if rb.is_none() {
            rb = poll_once(b.as_mut(), cx);
        }
        if rc.is_none() {
            rc = poll_once(c.as_mut(), cx);
        }
        match (ra.take(), rb.take(), rc.take()) {
            (Some(a), Some(b), Some(c)) => Poll::Ready((a, b, c)),
            (a, b, c) => {
                (ra, rb, rc) = (a, b, c);
                Poll::Pending
            }
        }
    })
    .await
}

fn poll_once<F: Future>(
    f: std::pin::Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> Option<F::Output> {
    match f.poll(cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// `future`, or `None` as soon as the calling thread's cancel token fires (for connecting: a
/// new connection has done nothing yet, so giving it up writes nothing).
pub(super) async fn unless_cancelled<F: Future>(future: F) -> Option<F::Output> {
    let token = crate::cancel::current();
    let until = token
        .as_ref()
        .and_then(Cancel::deadline)
        .map(tokio::time::Instant::from_std);
    let mut deadline = pin!(tokio::time::sleep_until(
        until.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86_400))
    ));
    let mut future = pin!(future);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        if let Some(token) = &token {
            token.wake_on_cancel(cx.waker());
            let _ = deadline.as_mut().poll(cx);
            if token.is_cancelled() {
                return Poll::Ready(None);
            }
        }
        Poll::Pending
    })
    .await
}
