//! The JSON endpoints (PROTOCOL.md): each reads through the library on a blocking thread.

use std::collections::HashMap;
use std::sync::Arc;

use agent_state::agents::{entry_json, list_agents, AgentQuery, MAX_LIST_LIMIT};
use agent_state::value::pointer::Pointer;
use agent_state::{Agent, Error};
use axum::response::Response;
use serde_json::{json, Value};

use crate::handles::Handles;
use crate::limits::{DEFAULT_CHANGES_LIMIT, MAX_CHANGES_LIMIT};
use crate::reply::{json_body, Failure};

/// The page size of a listing when the request names none.
const DEFAULT_LIMIT: usize = 100;

pub type Query = HashMap<String, String>;

/// `GET /v1/agents?prefix=&after=&limit=`.
pub async fn list(handles: Arc<Handles>, query: Query) -> Result<Response, Failure> {
    let limit = page_limit(&query, DEFAULT_LIMIT, MAX_LIST_LIMIT)?;
    // One more than the page, to tell whether another page follows (`next` is null on the
    // last one); at the largest limit, a full page has a `next` that may lead to nothing.
    let query = AgentQuery {
        prefix: query.get("prefix").filter(|p| !p.is_empty()).cloned(),
        after: query.get("after").cloned(),
        limit: (limit + 1).min(MAX_LIST_LIMIT),
    };
    blocking(move || {
        let mut entries = list_agents(handles.store(), handles.options(), &query)?;
        let more = entries.len() > limit || entries.len() == MAX_LIST_LIMIT;
        entries.truncate(limit);
        let next = match entries.last() {
            Some(last) if more => Value::String(last.id.clone()),
            _ => Value::Null,
        };
        let agents: Vec<Value> = entries.iter().map(entry_json).collect();
        Ok(json_body(
            json!({"agents": agents, "next": next})
                .to_string()
                .into_bytes(),
        ))
    })
    .await
}

/// `GET /v1/agents/{id}`, and `?path=P` (an RFC 6901 JSON Pointer) for the value at one
/// place only, `&tail=N` for the last N elements of the array there: `{"version":V,"value":X}`,
/// the value read from the same state as the version.
pub async fn agent(handles: Arc<Handles>, id: String, query: Query) -> Result<Response, Failure> {
    let tail = optional_count(&query, "tail")?;
    let pointer = match (query.get("path"), tail) {
        (Some(path), _) => {
            Some(Pointer::parse(path).map_err(|e| Failure::bad_request(e.to_string()))?)
        }
        (None, Some(_)) => {
            return Err(Failure::bad_request(
                "tail=N needs path=P, the JSON Pointer of the array",
            ))
        }
        (None, None) => None,
    };
    blocking(move || {
        let agent = stored(&handles, &id)?;
        let current = agent.get_state_versioned()?;
        let Some(pointer) = pointer else {
            return Ok(versioned(current.version, current.state.json()));
        };
        let value = match tail {
            Some(n) => current.state.tail_json(&pointer, n),
            None => current.state.path_json(&pointer),
        }
        .map_err(Error::from)?;
        let mut body = format!(r#"{{"version":{},"value":"#, current.version).into_bytes();
        body.extend_from_slice(&value);
        body.push(b'}');
        Ok(json_body(body))
    })
    .await
}

/// Query parameter `limit`, a page's size: `default` when absent, else from 1 to `max`.
fn page_limit(query: &Query, default: usize, max: usize) -> Result<usize, Failure> {
    let Some(text) = query.get("limit") else {
        return Ok(default);
    };
    number(text, "limit")
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| Failure::bad_request(format!("limit={text}: a number from 1 to {max}")))
}

/// Query parameter `name` as a count (digits only), if present.
fn optional_count(query: &Query, name: &str) -> Result<Option<usize>, Failure> {
    query
        .get(name)
        .map(|text| {
            number(text, name)?
                .try_into()
                .map_err(|_| Failure::bad_request(format!("{name}={text:?}: too large")))
        })
        .transpose()
}

/// `GET /v1/agents/{id}/changes?since=V&limit=N`: one page of the changes after `since`, at
/// most `limit` of them ([`DEFAULT_CHANGES_LIMIT`] when absent, up to [`MAX_CHANGES_LIMIT`])
/// and within `page_bytes` of JSON (the first change is sent whatever its size), with `next`,
/// the `since` of the following page, or null on the last one.
pub async fn changes(
    handles: Arc<Handles>,
    id: String,
    query: Query,
    page_bytes: usize,
) -> Result<Response, Failure> {
    let since = optional_number(&query, "since")?.unwrap_or(0);
    let limit = page_limit(&query, DEFAULT_CHANGES_LIMIT, MAX_CHANGES_LIMIT)?;
    blocking(move || {
        let agent = stored(&handles, &id)?;
        // The version first, then the changes: the list may hold newer ones, never fewer.
        let version = agent.get_state_versioned()?.version;
        let all = agent.changes_since(since)?;
        // The library's encoding of each change, copied as it is: nothing beyond the page is
        // parsed.
        let mut body = format!(r#"{{"version":{version},"changes":["#).into_bytes();
        let (mut sent, mut used, mut last, mut more) = (0, 0, None, false);
        for change in elements(&all) {
            if sent == limit || (sent > 0 && used + change.len() + 1 > page_bytes) {
                more = true;
                break;
            }
            if sent > 0 {
                body.push(b',');
            }
            body.extend_from_slice(change);
            used += change.len() + 1;
            sent += 1;
            last = Some(change);
        }
        let next = match last {
            Some(change) if more => serde_json::from_slice::<Value>(change)
                .ok()
                .and_then(|c| c.get("version").and_then(Value::as_u64))
                .ok_or_else(|| Failure::internal("a change of the log without its version"))?
                .to_string(),
            _ => "null".to_string(),
        };
        body.extend_from_slice(format!(r#"],"next":{next}}}"#).as_bytes());
        Ok(json_body(body))
    })
    .await
}

/// The elements of a JSON array, as the slices of `array` that encode them (the array is the
/// library's, so well-formed; anything after a malformed element is not yielded).
fn elements(array: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = array
        .iter()
        .position(|&b| b == b'[')
        .map_or(array.len(), |i| i + 1);
    std::iter::from_fn(move || {
        while array
            .get(at)
            .is_some_and(|b| b.is_ascii_whitespace() || *b == b',')
        {
            at += 1;
        }
        let start = at;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        while let Some(&b) = array.get(at) {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => in_string = true,
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' if depth == 0 => break,
                    b']' | b'}' => depth -= 1,
                    b',' if depth == 0 => break,
                    _ => {}
                }
            }
            at += 1;
        }
        let element = array[start..at].trim_ascii_end();
        (!element.is_empty()).then_some(element)
    })
}

/// `GET /v1/agents/{id}/state?version=V`.
pub async fn state_at(
    handles: Arc<Handles>,
    id: String,
    query: Query,
) -> Result<Response, Failure> {
    let version = optional_number(&query, "version")?
        .ok_or_else(|| Failure::bad_request("state needs ?version=V"))?;
    blocking(move || {
        let agent = stored(&handles, &id)?;
        let state = agent.state_at(version)?;
        Ok(versioned(version, state.json()))
    })
    .await
}

/// The handle of an agent that has a state stored; 404 otherwise.
pub fn stored(handles: &Handles, id: &str) -> Result<Arc<Agent>, Failure> {
    let agent = handles.get(id)?;
    if agent.get_state_versioned()?.version == 0 {
        return Err(Failure::not_found(format!(
            "agent {id:?} has no state stored"
        )));
    }
    Ok(agent)
}

fn versioned(version: u64, state: &[u8]) -> Response {
    let mut body = format!(r#"{{"version":{version},"state":"#).into_bytes();
    body.extend_from_slice(state);
    body.push(b'}');
    json_body(body)
}

/// Query parameter `name` as a version number, if present.
pub fn optional_number(query: &Query, name: &str) -> Result<Option<u64>, Failure> {
    query.get(name).map(|text| number(text, name)).transpose()
}

fn number(text: &str, name: &str) -> Result<u64, Failure> {
    // Digits only: `+1`, ` 1` and `1.0` are refused as the malformed numbers they are.
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse().ok())
        .flatten()
        .ok_or_else(|| Failure::bad_request(format!("{name}={text:?}: not a number")))
}

/// Runs `job` (which reads through the library and may block) off the async workers.
pub async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(job).await.unwrap_or_else(|e| {
        Err(Failure::internal(format!(
            "the request's thread failed: {e}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::elements;

    #[test]
    fn elements_are_the_array_s_members_as_encoded() {
        let array = br#"[{"a":"],\"[{"},[1,[2]], "x,y" ,3,{"b":{"c":"\\"}}]"#;
        let found: Vec<&[u8]> = elements(array).collect();
        let expected: Vec<&[u8]> = vec![
            br#"{"a":"],\"[{"}"#,
            b"[1,[2]]",
            br#""x,y""#,
            b"3",
            br#"{"b":{"c":"\\"}}"#,
        ];
        assert_eq!(found, expected);
        assert_eq!(elements(b"[]").count(), 0);
        assert_eq!(elements(b" [ ] ").count(), 0);
    }
}
