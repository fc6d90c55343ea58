//! A PostgreSQL connection URI, as the library handles it beyond the client's parsing: with
//! its password hidden for messages ([`redact`]), and its host names resolved on the calling
//! thread ([`resolved`]), since the client would resolve them on a thread and the library
//! starts none.

use std::net::{IpAddr, ToSocketAddrs};

use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// The configurations to try in turn, with host names resolved here, on the calling thread:
/// the client would resolve them on a thread of its runtime's blocking pool, and the library
/// starts no thread. One host name: one configuration per address it resolves to (tried in
/// order, as the client would); several hosts: each at its first address (the client then
/// tries the hosts in order). Unix sockets and IP addresses need nothing.
pub(super) fn resolved(config: &Config) -> std::result::Result<Vec<Config>, String> {
    let hosts = config.get_hosts();
    let named = |h: &Host| matches!(h, Host::Tcp(name) if name.parse::<IpAddr>().is_err());
    if !config.get_hostaddrs().is_empty() || !hosts.iter().any(named) {
        return Ok(vec![config.clone()]);
    }
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let lookup = |name: &str, port: u16| -> std::result::Result<Vec<IpAddr>, String> {
        let addrs: Vec<IpAddr> = (name, port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {name}: {e}"))?
            .map(|a| a.ip())
            .collect();
        if addrs.is_empty() {
            return Err(format!("{name} resolves to no address"));
        }
        Ok(addrs)
    };
    if hosts.len() == 1 {
        let Host::Tcp(name) = &hosts[0] else {
            return Ok(vec![config.clone()]);
        };
        return Ok(lookup(name, port(0))?
            .into_iter()
            .map(|ip| {
                let mut c = config.clone();
                c.hostaddr(ip);
                c
            })
            .collect());
    }
    let mut c = config.clone();
    for (i, host) in hosts.iter().enumerate() {
        match host {
            Host::Tcp(name) => match name.parse::<IpAddr>() {
                Ok(ip) => c.hostaddr(ip),
                Err(_) => c.hostaddr(lookup(name, port(i))?[0]),
            },
            // A Unix socket among TCP hosts: hostaddr cannot be given for it; let the
            // client resolve (on its blocking pool) rather than refuse the URI.
            #[allow(unreachable_patterns)]
            _ => return Ok(vec![config.clone()]),
        };
    }
    Ok(vec![c])
}

/// `uri` with any password replaced by `***`, for messages.
pub(super) fn redact(uri: &str) -> String {
    let mut out = uri.to_string();
    // user:password@host
    if let Some((scheme, rest)) = uri.split_once("://") {
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority[..at].find(':') {
                out = format!("{scheme}://{}:***{}", &authority[..colon], &rest[at..]);
            }
        }
    }
    // ?password=... in the query string
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let parts: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{head}{}", parts.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db?x=1"),
            "postgres://u:***@h:5432/db?x=1"
        );
        assert_eq!(
            redact("postgresql:///db?host=/tmp&password=secret&user=u"),
            "postgresql:///db?host=/tmp&password=***&user=u"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
