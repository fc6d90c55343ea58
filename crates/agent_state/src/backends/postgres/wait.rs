//! Waiting for the server on a connection's own runtime: the I/O driven only while a call
//! waits, every round trip against the client's clock (`busy_timeout_ms +
//! server_timeout_ms`) and, when the calling thread has one, its cancel token
//! ([`crate::Cancel`]), which wakes the wait when fired.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::{AsyncMessage, Notification, Socket};

use super::error::{PgError, PgResult};
use super::tls;
use crate::cancel::Cancel;

pub(super) type Io = tokio_postgres::Connection<Socket, tls::Stream>;

/// What driving a connection's I/O learned.
#[derive(Default)]
pub(super) struct Heard {
    /// `io` has ended (the server closed the connection, or it failed): not polled again.
    pub ended: bool,
    /// The notifications received and not yet taken (only a listening connection gets any:
    /// see `super::listen`; a pool's connections listen to nothing).
    pub notified: Vec<Notification>,
}

/// Polls `io` until it has nothing more to do now, keeping the notifications it reads. An
/// error or its end is terminal: `heard.ended` is set, and the error returned (the request in
/// flight then fails as well).
pub(super) fn drive(
    io: &mut Io,
    heard: &mut Heard,
    cx: &mut std::task::Context<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    while !heard.ended {
        match io.poll_message(cx) {
            // A notification comes while the connection listens, between or during round
            // trips (a heartbeat's): kept either way.
            Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => heard.notified.push(n),
            // Notices (CREATE TABLE IF NOT EXISTS's "already exists, skipping"): ignored.
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(e))) => {
                heard.ended = true;
                return Err(e);
            }
            Poll::Ready(None) => heard.ended = true,
            Poll::Pending => break,
        }
    }
    Ok(())
}

/// Runs `f`, which blocks on a connection's own runtime or drops it, on the calling thread; or,
/// when that thread is inside a tokio runtime (a Rust program calling a synchronous method from
/// async code), where tokio refuses to block or to drop a runtime, on a thread of its own that
/// the caller waits for. The call then blocks the caller's executor thread as any blocking call
/// does ([`crate::AsyncAgent`] is the form for async code), but it works, as it does on SQLite.
pub(super) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// Waits for `future` (a request of the client of `io`) on `runtime`, driving `io`, at most
/// `limit`; `timed_out` is set when it did not finish. An error of the connection itself (a
/// closed socket, say) is the request's error, as with the synchronous client.
pub(super) fn bounded<T>(
    runtime: &Runtime,
    io: &mut Io,
    heard: &mut Heard,
    limit: Duration,
    timed_out: &mut bool,
    cancel: Option<&Cancel>,
    future: impl Future<Output = std::result::Result<T, tokio_postgres::Error>> + Send,
) -> PgResult<T>
where
    T: Send,
{
    off_runtime(|| {
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
                if let Err(e) = drive(io, heard, cx) {
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
pub(super) async fn unless_cancelled<F: Future>(
    token: Option<Cancel>,
    future: F,
) -> Option<F::Output> {
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
