//! A JSON document given on the command line, or on standard input as `-`.

use std::ffi::OsStr;
use std::io::{self, Read};
// The library is Unix-only (it creates files with Unix modes), so the bytes of an argument are
// its Unix bytes.
use std::os::unix::ffi::OsStrExt;

use crate::failure::{Failure, Status};

/// The bytes of `arg`, or of standard input when `arg` is `-`. Passed to the library as bytes,
/// not text, so that invalid UTF-8 gets the library's AGENT_ERR_JSON and message.
///
/// Standard input is read up to `max` bytes (the store's `max_value_bytes`) and one more: a
/// larger document would be refused by the library anyway, and reading a runaway stream to
/// its end first could exhaust memory.
pub fn document(arg: &OsStr, what: &str, max: usize) -> Result<Vec<u8>, Failure> {
    if arg != "-" {
        return Ok(arg.as_bytes().to_vec());
    }
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::input("standard input", e))?;
    if bytes.len() > max {
        return Err(Failure::new(
            Status::TOO_LARGE,
            format!("the {what} on standard input is over max_value_bytes ({max} bytes)"),
        ));
    }
    Ok(bytes)
}
