//! The listener: accepts connections up to `--max-http-connections` (counted before anything is
//! read from them, authentication included), serves each over HTTP/1.1 with the header-read
//! timeout and the write timeout of [`Limits`], and asks them to finish when the server stops.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Sleep;

use crate::limits::Limits;

/// How long accepting pauses after the listener fails for want of resources (descriptors,
/// memory), so that the failure does not spin the loop; connections wait in the backlog.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts until `stop` turns true. Each connection holds one of `connections`' permits while
/// it is served as HTTP (a watch stream leaves the count when it upgrades: streams have their
/// own cap); a connection beyond them is closed at once, before a byte of it is read.
pub async fn accept(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    connections: Arc<Semaphore>,
    stop: watch::Receiver<bool>,
) {
    let mut stopping = stop.clone();
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(e) if resources_exhausted(&e) => {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
                // A connection that failed before it was accepted: the next one may not.
                Err(_) => continue,
            },
            () = stopped(&mut stopping) => return,
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            drop(socket);
            continue;
        };
        let (router, stop) = (router.clone(), stop.clone());
        tokio::spawn(async move {
            serve_connection(socket, router, limits, stop).await;
            drop(permit);
        });
    }
}

/// When `stop` turns true (or its sender is gone: the server is stopping too).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn resources_exhausted(e: &io::Error) -> bool {
    // EMFILE, ENFILE, ENOBUFS, ENOMEM.
    matches!(e.raw_os_error(), Some(24 | 23 | 105 | 12))
}

async fn serve_connection(
    socket: TcpStream,
    router: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let _ = socket.set_nodelay(true);
    let io = TokioIo::new(WriteDeadline::new(socket, limits.write_timeout));
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header-read timeout runs from the connection's opening, then from the end of each
    // answer: it closes silent, slow-header and idle keep-alive connections alike.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let connection = builder
        .serve_connection(io, TowerToHyperService::new(router))
        .with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        () = stopped(&mut stop) => {}
    }
    // Stopping: an idle connection closes now, one with a request open after its answer (the
    // shutdown deadline ends those that take longer).
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

/// A socket whose writes fail with `TimedOut` once one has waited `timeout` for the client to
/// read: a client that does not read its answer is dropped instead of holding the answer's
/// memory. Owned by its connection's task.
struct WriteDeadline {
    socket: TcpStream,
    timeout: Duration,
    /// Armed when a write first waits, cleared when one makes progress: a write abandoned
    /// and tried again later keeps the deadline of the first wait (the client has read
    /// nothing since).
    waiting: Option<Pin<Box<Sleep>>>,
}

impl WriteDeadline {
    fn new(socket: TcpStream, timeout: Duration) -> WriteDeadline {
        WriteDeadline {
            socket,
            timeout,
            waiting: None,
        }
    }

    fn deadline<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.waiting = None;
            return poll;
        }
        let timeout = self.timeout;
        let waiting = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read its answer within the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.socket).poll_write(cx, buf);
        self.deadline(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.socket).poll_write_vectored(cx, bufs);
        self.deadline(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.socket.is_write_vectored()
    }

    // A TCP socket's flush and shutdown do not wait for the client: no deadline to keep.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}
