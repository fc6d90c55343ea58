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

    pub fn internal(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
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
        Failure::new(status, code, message)
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
