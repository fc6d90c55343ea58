//! Core errors as JavaScript sees them: `Error`s whose message is `<status code>\u{1}<message>`,
//! followed for a conflict or a gap by `\u{1}` and their fields as JSON
//! (`{"expected":N,"actual":N}`, `{"first":N,"last":N}`; a newer schema's
//! `{"stored":N,"declared":N}`, a failed migration's `{"stepFrom":N}`), which the package's `errors.js` turns
//! into `CodecError`, `ConflictError`, ... with the same status codes as the C ABI
//! (`ErrorKind::code`).

/// The separator between the status code and the message.
const SEPARATOR: char = '\u{1}';

/// A core error as a napi error carrying its status code.
pub fn to_napi(error: agent_state::Error) -> napi::Error {
    let code = error.kind().code();
    let fields = match &error {
        agent_state::Error::Conflict {
            expected, actual, ..
        } => format!("{SEPARATOR}{{\"expected\":{expected},\"actual\":{actual}}}"),
        agent_state::Error::Gap { missing, .. } => format!(
            "{SEPARATOR}{{\"first\":{},\"last\":{}}}",
            missing.start(),
            missing.end()
        ),
        agent_state::Error::NewerSchema {
            stored, declared, ..
        } => format!("{SEPARATOR}{{\"stored\":{stored},\"declared\":{declared}}}"),
        agent_state::Error::Migration { from, .. } => {
            format!("{SEPARATOR}{{\"stepFrom\":{from}}}")
        }
        agent_state::Error::NoSuchPath {
            operation, path, ..
        } => where_in_patch(*operation, path),
        agent_state::Error::TestFailed {
            operation, path, ..
        } => where_in_patch(Some(*operation), path),
        _ => String::new(),
    };
    napi::Error::from_reason(format!("{code}{SEPARATOR}{error}{fields}"))
}

/// The fields of a JSON Patch operation's error (or a read's, `operation` null): the
/// operation's index and the pointer as written, a JSON string.
fn where_in_patch(operation: Option<usize>, path: &str) -> String {
    let operation = operation.map_or_else(|| "null".to_string(), |i| i.to_string());
    format!(
        "{SEPARATOR}{{\"operation\":{operation},\"path\":{}}}",
        json_string(path)
    )
}

/// `text` as a JSON string literal (quotes, backslashes and control characters escaped; the
/// separator, a control character, too, so it never splits the fields).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An error of the addon's own arguments, with `AGENT_ERR_INVALID_ARGUMENT`'s code.
pub fn invalid(message: impl std::fmt::Display) -> napi::Error {
    to_napi(agent_state::Error::InvalidArgument(message.to_string()))
}

/// A Result of the core, with its error carried to JavaScript.
pub trait IntoNapi<T> {
    fn into_napi(self) -> napi::Result<T>;
}

impl<T> IntoNapi<T> for agent_state::Result<T> {
    fn into_napi(self) -> napi::Result<T> {
        self.map_err(to_napi)
    }
}

/// Runs `f`, turning a panic into an error with `AGENT_ERR_PANIC`'s code (99): the one panic
/// boundary of the addon. Node-API calls the addon through `extern "C"` functions, where a panic
/// would abort the process (napi-rs does not catch it on a worker thread), so every job and every
/// synchronous method runs inside this.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            Err(napi::Error::from_reason(format!(
                "99{SEPARATOR}a bug in agent_state was caught in {what}: {detail} (the agent may \
                 still be used; please report it)"
            )))
        }
    }
}
