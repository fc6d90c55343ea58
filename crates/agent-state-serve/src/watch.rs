//! One watch stream: its first messages, then every change of the agent's feed in commit
//! order, pings, and the close codes of PROTOCOL.md.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::SinkExt;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::{broadcast, watch};
use tokio::time::{interval_at, timeout, Instant, MissedTickBehavior};

use crate::catch_up::{self, Start};
use crate::feed::{Event, Feed};
use crate::handles::Handles;
use crate::message;

/// `--ping-interval`'s default: how often a stream says it is alive. Under the 60 s after which
/// common proxies close a silent connection (nginx's `proxy_read_timeout`, cloud load
/// balancers), and no oftener: on an idle server with thousands of streams, the pings are most
/// of what it does.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(30);

/// When the streams ping: every `every`, at instants common to all the server's streams (a
/// grid from the server's start), so that an idle server wakes once an interval for all its
/// streams instead of once per stream at scattered instants.
#[derive(Clone, Copy, Debug)]
pub struct Pings {
    every: Duration,
    origin: Instant,
}

impl Pings {
    /// Pings every `every` (above zero) on a grid that starts now.
    pub fn new(every: Duration) -> Pings {
        Pings {
            every: every.max(Duration::from_millis(1)),
            origin: Instant::now(),
        }
    }

    /// The first point of the grid after `now`: a stream's first ping comes within `every`.
    fn next_after(&self, now: Instant) -> Instant {
        let every = self.every.as_nanos();
        let passed = now.saturating_duration_since(self.origin).as_nanos();
        let points = u32::try_from(passed / every + 1).unwrap_or(u32::MAX);
        self.origin + self.every * points
    }
}

/// How long one send may wait for a client that does not read before it is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The close codes.
pub const CLOSE_TOO_SLOW: u16 = 4001;
const CLOSE_STORE_FAILED: u16 = 1011;
const CLOSE_STOPPING: u16 = 1001;
/// RFC 6455's codes for what a client sent wrong: a frame against the protocol, a text
/// message that is not UTF-8, a message over the size the server reads.
const CLOSE_PROTOCOL_ERROR: u16 = 1002;
const CLOSE_INVALID_DATA: u16 = 1007;
const CLOSE_TOO_BIG: u16 = 1009;

/// A stream, subscribed to its feed before its start was read (so no change falls between).
pub struct Stream {
    pub feed: Arc<Feed>,
    /// Where a resynchronisation reads the agent's state.
    pub handles: Arc<Handles>,
    pub events: broadcast::Receiver<Event>,
    pub start: Start,
    pub stopping: watch::Receiver<bool>,
    pub pings: Pings,
    /// Dropped when the stream ends (see `App::streams`).
    pub _open: tokio::sync::mpsc::Sender<()>,
}

/// Why a stream ended on the server's side.
enum End {
    /// The client went away, or a send failed: nothing more can be said.
    Gone,
    /// The client closed the stream: its close frame is answered.
    ClosedByClient,
    Close(u16, &'static str),
}

pub async fn run(mut socket: WebSocket, stream: Stream) {
    match serve(&mut socket, stream).await {
        End::Gone => {}
        // The WebSocket layer queued the answer to the client's close frame; the next read
        // sends it, then ends.
        End::ClosedByClient => {
            let _ = timeout(SEND_TIMEOUT, socket.recv()).await;
        }
        End::Close(code, reason) => {
            let frame = CloseFrame {
                code,
                reason: Utf8Bytes::from_static(reason),
            };
            let _ = timeout(SEND_TIMEOUT, socket.send(Message::Close(Some(frame)))).await;
        }
    }
}

async fn serve(socket: &mut WebSocket, stream: Stream) -> End {
    let Stream {
        feed,
        handles,
        mut events,
        start,
        mut stopping,
        pings,
        _open,
    } = stream;
    let mut version = start.version;
    for text in start.messages {
        if socket.feed(Message::Text(text)).await.is_err() {
            return End::Gone;
        }
    }
    if !flush(socket).await {
        return End::Gone;
    }
    let mut ping = interval_at(pings.next_after(Instant::now()), pings.every);
    // A ping the runtime could not send on time is skipped, not sent late: the grid stays.
    ping.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            event = events.recv() => {
                // This event and every one already waiting go out in one write: the watch
                // delivers the changes of one commit notice together, and a subscriber that
                // fell behind catches up in few system calls.
                let mut next = Some(event);
                while let Some(event) = next.take() {
                    match step(event, &mut version, &feed, &handles).await {
                        Step::Send(text) => {
                            if socket.feed(Message::Text(text)).await.is_err() {
                                return End::Gone;
                            }
                        }
                        Step::Skip => {}
                        Step::End(end) => return end,
                    }
                    next = match events.try_recv() {
                        Ok(event) => Some(Ok(event)),
                        Err(TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
                        Err(TryRecvError::Empty) => None,
                        Err(TryRecvError::Closed) => Some(Err(RecvError::Closed)),
                    };
                }
                if !flush(socket).await {
                    return End::Gone;
                }
            }
            incoming = socket.recv() => match incoming {
                None => return End::Gone,
                Some(Err(e)) => return refused(e),
                Some(Ok(Message::Close(_))) => return End::ClosedByClient,
                // The stream is one-way; what a client sends is ignored (pongs are answered
                // by the WebSocket layer itself).
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if !send(socket, message::ping(version, pings.every)).await {
                    return End::Gone;
                }
            }
            _ = stopping.changed() => return End::Close(CLOSE_STOPPING, "the server is stopping"),
        }
    }
}

/// How a stream ends after the client's side failed: with the RFC 6455 code of what the
/// client sent wrong, or without a word when the connection itself failed.
fn refused(error: axum::Error) -> End {
    use tungstenite::error::Error as Ws;
    match error.into_inner().downcast_ref::<Ws>() {
        Some(Ws::Utf8(_)) => End::Close(CLOSE_INVALID_DATA, "a text message that is not UTF-8"),
        Some(Ws::Capacity(_)) => End::Close(CLOSE_TOO_BIG, "message too big"),
        Some(Ws::Protocol(tungstenite::error::ProtocolError::ResetWithoutClosingHandshake)) => {
            End::Gone
        }
        Some(Ws::Protocol(_)) => End::Close(CLOSE_PROTOCOL_ERROR, "protocol error"),
        _ => End::Gone,
    }
}

/// What one event means for a stream at `version`.
enum Step {
    Send(Utf8Bytes),
    Skip,
    End(End),
}

async fn step(
    event: Result<Event, RecvError>,
    version: &mut u64,
    feed: &Feed,
    handles: &Arc<Handles>,
) -> Step {
    match event {
        Ok(Event::Change { version: v, text }) if v == *version + 1 => {
            *version = v;
            Step::Send(text)
        }
        // Already sent (in the start, or before a resync). A snapshot older than the stream
        // is one the watch read before the stream's start was read: versions only go up (a
        // deleted agent's next write takes a version above its old ones), so it is stale.
        Ok(Event::Change { version: v, .. }) if v <= *version => Step::Skip,
        Ok(Event::Snapshot { version: v, .. }) if v <= *version => Step::Skip,
        Ok(Event::Snapshot { version: v, text }) => {
            *version = v;
            Step::Send(text)
        }
        // A change that does not follow, or changes the feed lost: the state.
        Ok(Event::Change { .. } | Event::Resync) => {
            match resync(handles, feed.id(), *version).await {
                Ok(Some((v, text))) => {
                    *version = v;
                    Step::Send(text)
                }
                Ok(None) => Step::Skip,
                Err(end) => Step::End(end),
            }
        }
        Ok(Event::Failed) => Step::End(End::Close(CLOSE_STORE_FAILED, "the store failed")),
        Err(RecvError::Lagged(_)) => Step::End(End::Close(CLOSE_TOO_SLOW, "subscriber too slow")),
        Err(RecvError::Closed) => Step::End(End::Close(CLOSE_STORE_FAILED, "the feed ended")),
    }
}

/// The current state as a snapshot, unless it is still at `version`.
async fn resync(
    handles: &Arc<Handles>,
    id: &str,
    version: u64,
) -> Result<Option<(u64, Utf8Bytes)>, End> {
    let (handles, id) = (Arc::clone(handles), id.to_string());
    let read =
        tokio::task::spawn_blocking(move || catch_up::snapshot_of(&*handles.get(&id)?)).await;
    match read {
        Ok(Ok(start)) if start.version == version => Ok(None),
        Ok(Ok(mut start)) => Ok(start.messages.pop().map(|text| (start.version, text))),
        _ => Err(End::Close(CLOSE_STORE_FAILED, "the store failed")),
    }
}

/// Sends one message; false when the client is gone or has not read for [`SEND_TIMEOUT`].
async fn send(socket: &mut WebSocket, text: Utf8Bytes) -> bool {
    matches!(
        timeout(SEND_TIMEOUT, socket.send(Message::Text(text))).await,
        Ok(Ok(()))
    )
}

/// Writes what was fed; false as [`send`].
async fn flush(socket: &mut WebSocket) -> bool {
    matches!(timeout(SEND_TIMEOUT, socket.flush()).await, Ok(Ok(())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stream_pings_on_the_servers_grid_within_one_interval_of_its_start() {
        let pings = Pings::new(Duration::from_secs(30));
        let at = |secs: u64| pings.origin + Duration::from_secs(secs);
        // A stream that starts at 0 s, 1 s, 29 s or 30 s first pings at the next point of the
        // grid: all of them at the same instants afterwards.
        assert_eq!(pings.next_after(at(0)), at(30));
        assert_eq!(pings.next_after(at(1)), at(30));
        assert_eq!(pings.next_after(at(29)), at(30));
        assert_eq!(pings.next_after(at(30)), at(60));
        assert_eq!(pings.next_after(at(3_601)), at(3_630));
    }
}
