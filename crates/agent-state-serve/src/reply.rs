//! What the endpoints answer: JSON bodies, and every error as `{"error":{"code","message"}}`
//! with the status PROTOCOL.md's table gives it.

use agent_state::{Error, ErrorKind};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A JSON body with status 200. The text is built by the caller: states are written exactly
/// as the library encodes them.
pub fn json_body(text: Vec<u8>) -> Response {
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An error answer.
#[derive(Debug)]
pub struct Failure {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl Failure {
    pub fn bad_request(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A 500: `detail` goes to standard error, the answer says [`INTERNAL_MESSAGE`].
    pub fn internal(detail: impl Into<String>) -> Failure {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", detail).logged()
    }

    /// A 500 or a 503 with its detail logged and replaced by a fixed message; others as they are.
    fn logged(mut self) -> Failure {
        let fixed = match self.status {
            StatusCode::INTERNAL_SERVER_ERROR => INTERNAL_MESSAGE,
            StatusCode::SERVICE_UNAVAILABLE => UNAVAILABLE_MESSAGE,
            _ => return self,
        };
        eprintln!(
            "agent-state serve: {} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        );
        self.message = fixed.to_string();
        self
    }

    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            status,
            code,
            message: message.into(),
        }
    }
}

/// 401 says nothing more than that: not whether the path or the agent exists.
pub fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        json_body(br#"{"error":{"code":"unauthorized"}}"#.to_vec()),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// 421 for a `Host` this server does not answer for (host.rs): a fixed body, nothing echoed.
pub fn wrong_host() -> Response {
    fixed(
        StatusCode::MISDIRECTED_REQUEST,
        br#"{"error":{"code":"wrong_host","message":"the Host header names no address this server answers for"}}"#,
    )
}

/// 403 for a watch upgrade from a page of another origin (origin.rs): a fixed body.
pub fn wrong_origin() -> Response {
    fixed(
        StatusCode::FORBIDDEN,
        br#"{"error":{"code":"wrong_origin","message":"the Origin header is not this server's nor an allowed one"}}"#,
    )
}

fn fixed(status: StatusCode, body: &'static [u8]) -> Response {
    (status, json_body(body.to_vec())).into_response()
}

/// What a 500 or a 503 says: the library's message may name the store's file, its host or its
/// SQL, which are the server's to know; they go to its standard error instead.
const INTERNAL_MESSAGE: &str = "the server failed to read the store (its log says why)";
const UNAVAILABLE_MESSAGE: &str = "the store is unavailable or busy (the server's log says why)";

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let message = e.to_string();
        let (status, code) = match e.kind() {
            ErrorKind::InvalidArgument if is_log_off(&message) => {
                (StatusCode::CONFLICT, "change_log_off")
            }
            ErrorKind::InvalidArgument | ErrorKind::Json | ErrorKind::TooLarge => {
                (StatusCode::BAD_REQUEST, "bad_request")
            }
            ErrorKind::Gap => (StatusCode::GONE, "gone"),
            ErrorKind::Path => (StatusCode::NOT_FOUND, "no_such_path"),
            ErrorKind::Busy | ErrorKind::Unavailable | ErrorKind::Auth => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        Failure::new(status, code, message).logged()
    }
}

/// The library says the change log is off in one message (history.rs, feed.rs); it is the
/// client's to know, not a malformed request.
pub fn is_log_off(message: &str) -> bool {
    message.contains("the change log is off")
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, json_body(Value::to_string(&body).into_bytes())).into_response()
    }
}
