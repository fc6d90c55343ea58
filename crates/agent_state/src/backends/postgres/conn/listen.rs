//! Waiting on a listening connection for the server's notifications (see `super::super::listen`,
//! the watcher's signal): the connection's I/O driven on its own runtime until one comes.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio_postgres::Notification;

use super::super::error::describe;
use super::super::wait::drive;
use super::Conn;

impl Conn {
    /// The notifications received, waiting up to `wait` for the first when none is kept (an
    /// empty list: none came). `Err` (what happened, for a message) when the connection ended
    /// or failed: it is not usable any more. No round trip: the server sends notifications
    /// unasked, between transactions.
    pub fn notifications(&mut self, wait: Duration) -> Result<Vec<Notification>, String> {
        if !self.heard.notified.is_empty() {
            return Ok(std::mem::take(&mut self.heard.notified));
        }
        let (Some(runtime), Some(io)) = (self.runtime.as_ref(), self.io.as_mut()) else {
            return Err("the connection is closed".to_string());
        };
        if self.heard.ended {
            return Err("the server closed the connection".to_string());
        }
        let heard = &mut self.heard;
        let outcome = runtime.block_on(async {
            // Made here: a timer needs the runtime's context.
            let mut sleep = pin!(tokio::time::sleep(wait));
            std::future::poll_fn(|cx| {
                // The connection first: what it read before the timer fired is kept.
                if let Err(e) = drive(io, heard, cx) {
                    return Poll::Ready(Err(describe(&e)));
                }
                if heard.ended {
                    return Poll::Ready(Err("the server closed the connection".to_string()));
                }
                if !heard.notified.is_empty() || sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Ok(()));
                }
                Poll::Pending
            })
            .await
        });
        outcome.map(|()| std::mem::take(&mut self.heard.notified))
    }
}
