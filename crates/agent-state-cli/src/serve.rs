//! `serve`: the store's agents over HTTP and WebSocket (crates/agent-state-serve, where all the
//! network code is); this file turns the command line into its configuration.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

use agent_state_serve::{Config, Token};

use crate::args::Global;
use crate::failure::Failure;
use crate::open::{store_options, Access};

pub fn serve(
    store: &Path,
    global: &Global,
    listen: SocketAddr,
    token_file: Option<&Path>,
    (allowed_hosts, allowed_origins): (&[String], &[String]),
) -> Result<(), Failure> {
    let options = store_options(global, Access::Read, "serve", false)?;
    let token = match token_file {
        Some(path) => Token::from_file(path)?,
        None => Token::generate()?,
    };
    let config = Config {
        store: store.to_path_buf(),
        options,
        listen,
        token: token.clone(),
        token_given: token_file.is_some(),
        allowed_hosts: allowed_hosts.to_vec(),
        allowed_origins: allowed_origins.to_vec(),
    };
    agent_state_serve::serve(config, |bound| {
        // The lines a script waits for (PROTOCOL.md); stdout is flushed so a pipe sees them.
        let mut lines = format!("agent-state serve: listening on http://{bound}\n");
        if token_file.is_none() {
            let token = token.reveal();
            lines.push_str(&format!("agent-state serve: token {token}\n"));
            lines.push_str(&format!(
                "agent-state serve: inspector http://{bound}/?access_token={token}\n"
            ));
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
    })?;
    Ok(())
}
