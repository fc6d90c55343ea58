//! Core errors as JavaScript sees them: `Error`s whose message is `<status code>\u{1}<message>`,
//! followed for a conflict or a gap by `\u{1}` and their fields as JSON
//! (`{"expected":N,"actual":N}`, `{"first":N,"last":N}`), which the package's `errors.js` turns
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
        _ => String::new(),
    };
    napi::Error::from_reason(format!("{code}{SEPARATOR}{error}{fields}"))
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
