//! Cancel tokens: the package makes one per call that got an `AbortSignal`, fires it from the
//! signal's `abort` event, and passes it with the call; the core checks it while it waits (for a
//! lock, a connection, a server's answer) and fails with `AGENT_ERR_CANCELLED`, nothing written.

use napi_derive::napi;

/// One call's cancel token (the core's [`agent_state::Cancel`]). Cheap to make; firing it twice
/// is harmless; a token that fired stays fired.
#[napi]
pub struct CancelToken {
    pub(crate) inner: agent_state::Cancel,
}

#[napi]
impl CancelToken {
    #[napi(constructor)]
    pub fn new() -> Self {
        CancelToken {
            inner: agent_state::Cancel::new(),
        }
    }

    /// Fires the token: a call waiting under it stops and fails with `AGENT_ERR_CANCELLED`.
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

/// The token to run a call under (`None`: the call cannot be cancelled).
pub fn token(cancel: Option<&CancelToken>) -> Option<agent_state::Cancel> {
    cancel.map(|c| c.inner.clone())
}
