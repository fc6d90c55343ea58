//! Every request goes through [`handle`]: its `Host` first, then the token, then the path, read
//! by hand so an agent id is exactly one percent-decoded segment (the empty id included,
//! PROTOCOL.md) and checked as the library checks ids before any store is read.

use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

use crate::api::{self, blocking};
use crate::auth::{self, Token};
use crate::catch_up;
use crate::feed::Feeds;
use crate::handles::Handles;
use crate::page::Page;
use crate::reply::{self, Failure};
use crate::watch as stream;
use agent_state::options::MAX_AGENT_ID_BYTES;

/// A watch stream's read buffer, and the largest message a client may send on it.
const READ_BUFFER: usize = 4 * 1024;
const MAX_CLIENT_MESSAGE: usize = 64 * 1024;

/// What every request may need.
pub struct App {
    pub token: Token,
    pub handles: Arc<Handles>,
    pub feeds: Arc<Feeds>,
    pub page: Page,
    /// Set once when the server stops: open streams close with 1001.
    pub stopping: watch::Receiver<bool>,
    /// Held by each open stream, so the server can wait for them to close.
    pub streams: tokio::sync::mpsc::Sender<()>,
    /// The names a request's `Host` may give, and the origins a watch upgrade may come from.
    pub hosts: crate::host::Hosts,
    pub origins: crate::origin::Origins,
    /// The wrong tokens seen, to slow the next ones.
    pub guesses: auth::Guesses,
    /// The bounds of what one request may take.
    pub limits: crate::limits::Limits,
    /// One permit per watch stream that may open (`--max-streams`).
    pub stream_slots: Arc<tokio::sync::Semaphore>,
    /// When the watch streams ping.
    pub pings: crate::watch::Pings,
}

/// Where a path leads.
enum Route {
    Page,
    List,
    Agent(String),
    Changes(String),
    StateAt(String),
    Watch(String),
}

pub async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let (mut parts, _body) = request.into_parts();
    if !app.hosts.accepts(host_of(&parts)) {
        return reply::wrong_host();
    }
    let query: api::Query = Query::try_from_uri(&parts.uri)
        .map(|Query(q)| q)
        .unwrap_or_default();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    let presented = auth::presented(
        authorization,
        query.get("access_token").map(|t| t.as_bytes()),
    );
    match presented {
        Some(token) if app.token.matches(token) => {}
        // Wrong: answered in its turn (auth::Guesses); absent (a browser's first try): at once.
        Some(_) => {
            let turn = app.guesses.turn(std::time::Instant::now());
            tokio::time::sleep_until(turn.into()).await;
            return reply::unauthorized();
        }
        None => return reply::unauthorized(),
    }
    let route = match route(parts.uri.path()) {
        Ok(route) => route,
        Err(failure) => return failure.into_response(),
    };
    if parts.method != Method::GET {
        return Failure {
            status: StatusCode::METHOD_NOT_ALLOWED,
            code: "method_not_allowed",
            message: "the server is read-only: every endpoint is GET".into(),
        }
        .into_response();
    }
    let handles = Arc::clone(&app.handles);
    let answer = match route {
        Route::Page => return app.page.response(),
        Route::List => api::list(handles, query).await,
        Route::Agent(id) => api::agent(handles, id, query).await,
        Route::Changes(id) => api::changes(handles, id, query, app.limits.page_bytes).await,
        Route::StateAt(id) => api::state_at(handles, id, query).await,
        Route::Watch(_)
            if !app.origins.accepts(
                parts.headers.get(header::ORIGIN).map(HeaderValue::as_bytes),
                host_of(&parts),
            ) =>
        {
            return reply::wrong_origin()
        }
        Route::Watch(id) => match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            // A 4 KiB read buffer: clients send next to nothing, and the default 128 KiB one
            // is zero-filled on reads and held by every idle subscriber.
            Ok(upgrade) => {
                let upgrade = upgrade
                    .read_buffer_size(READ_BUFFER)
                    .max_message_size(MAX_CLIENT_MESSAGE);
                watch(&app, upgrade, id, &query).await
            }
            Err(rejection) => Err(Failure::bad_request(format!(
                "the watch stream is a WebSocket: {}",
                rejection.body_text()
            ))),
        },
    };
    answer.unwrap_or_else(IntoResponse::into_response)
}

/// Subscribes to the agent's feed, reads where the stream starts, then upgrades.
async fn watch(
    app: &App,
    upgrade: WebSocketUpgrade,
    id: String,
    query: &api::Query,
) -> Result<Response, Failure> {
    let since = api::optional_number(query, "since")?;
    let Ok(slot) = Arc::clone(&app.stream_slots).try_acquire_owned() else {
        return Err(Failure {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "too_many_streams",
            message: format!(
                "the server holds its most watch streams ({}, --max-streams): try again later",
                app.limits.max_streams
            ),
        });
    };
    let (feeds, handles) = (Arc::clone(&app.feeds), Arc::clone(&app.handles));
    let reads = Arc::clone(&handles);
    let (feed, events, start) = blocking(move || {
        let agent = api::stored(&handles, &id)?;
        let feed = feeds.get(&id, &agent)?;
        let events = feed.subscribe();
        let start = catch_up::start(&agent, since)?;
        Ok((feed, events, start))
    })
    .await?;
    let stream = stream::Stream {
        feed,
        handles: reads,
        events,
        start,
        stopping: app.stopping.clone(),
        pings: app.pings,
        _open: app.streams.clone(),
    };
    Ok(upgrade.on_upgrade(move |socket| async move {
        stream::run(socket, stream).await;
        drop(slot);
    }))
}

/// The request's `Host` header (HTTP/1.1 always sends one), else the authority of an
/// absolute-form target.
fn host_of(parts: &axum::http::request::Parts) -> Option<&[u8]> {
    match parts.headers.get(header::HOST) {
        Some(host) => Some(host.as_bytes()),
        None => parts.uri.authority().map(|a| a.as_str().as_bytes()),
    }
}

fn route(path: &str) -> Result<Route, Failure> {
    if path == "/" {
        return Ok(Route::Page);
    }
    if path == "/v1/agents" {
        return Ok(Route::List);
    }
    let Some(rest) = path.strip_prefix("/v1/agents/") else {
        return Err(unknown(path));
    };
    let (segment, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let id = decode(segment)?;
    if id.len() > MAX_AGENT_ID_BYTES || id.contains('\0') {
        // Refused as the library refuses it, before any store is touched, and not echoed.
        return Err(Failure::bad_request(
            "the agent id must be a string of at most 255 bytes (UTF-8), without NUL",
        ));
    }
    match tail {
        "" if !rest.ends_with('/') => Ok(Route::Agent(id)),
        "changes" => Ok(Route::Changes(id)),
        "state" => Ok(Route::StateAt(id)),
        "watch" => Ok(Route::Watch(id)),
        _ => Err(unknown(path)),
    }
}

fn unknown(path: &str) -> Failure {
    Failure::not_found(format!("no endpoint at {path} (see PROTOCOL.md)"))
}

/// A path segment's percent-encoding undone; the bytes must be UTF-8.
fn decode(segment: &str) -> Result<String, Failure> {
    let bad = || Failure::bad_request("agent id: malformed percent-encoding");
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            let text = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(text, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Failure::bad_request("agent id: not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(path: &str) -> Option<String> {
        match route(path).ok()? {
            Route::Agent(id) | Route::Changes(id) | Route::StateAt(id) | Route::Watch(id) => {
                Some(id)
            }
            Route::Page | Route::List => None,
        }
    }

    #[test]
    fn ids_are_one_decoded_segment() {
        assert_eq!(id_of("/v1/agents/a%2Fb%20c").as_deref(), Some("a/b c"));
        assert_eq!(
            id_of("/v1/agents/%C3%A9t%C3%A9/watch").as_deref(),
            Some("été")
        );
        assert_eq!(id_of("/v1/agents//watch").as_deref(), Some(""));
        assert!(matches!(route("/v1/agents"), Ok(Route::List)));
        assert!(route("/v1/agents/x/").is_err());
        assert!(route("/v1/agents/x/y/watch").is_err());
        assert!(route("/v1/agents/%zz").is_err());
        assert!(route("/v1/agents/%FF").is_err());
        assert!(route("/v2").is_err());
    }
}
