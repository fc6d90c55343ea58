//! The `Host` check, before anything else is answered: a page on another site that rebinds its
//! own name to this server's address (DNS rebinding) sends its own name as `Host`, and is
//! refused here whatever else it knows.

use std::net::SocketAddr;

/// The names a request may give as `Host`. Immutable once built; shared by every request.
pub struct Hosts {
    port: u16,
    /// Lower-case names without a port (IPv6 addresses in brackets), accepted with the
    /// listening port or without one.
    names: Vec<String>,
    /// Lower-case `name:port` entries of `--allowed-host`, accepted exactly.
    with_port: Vec<String>,
}

impl Hosts {
    /// The hosts of a server listening on `bound`: the loopback names (`localhost`,
    /// `127.0.0.1`, `[::1]`) when it is bound to loopback or to every address, the listening
    /// address itself, and each of `allowed` (a name, or `name:port` for that port alone).
    pub fn new(bound: SocketAddr, allowed: &[String]) -> Hosts {
        let ip = bound.ip();
        let mut names = vec![match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        }];
        if ip.is_loopback() || ip.is_unspecified() {
            names.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
        }
        let mut with_port = Vec::new();
        for entry in allowed {
            let entry = entry.to_ascii_lowercase();
            match split(&entry) {
                (_, Some(_)) => with_port.push(entry),
                (name, None) => names.push(name.to_string()),
            }
        }
        Hosts {
            port: bound.port(),
            names,
            with_port,
        }
    }

    /// Whether `host` (a request's `Host` header, absent: `None`) names this server.
    pub fn accepts(&self, host: Option<&[u8]>) -> bool {
        let Some(host) = host.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        if self.with_port.contains(&host) {
            return true;
        }
        let (name, port) = split(&host);
        let port_ok = match port {
            None => true,
            Some(port) => port.parse::<u16>() == Ok(self.port),
        };
        port_ok && self.names.iter().any(|n| n == name)
    }
}

/// `name[:port]` split; an IPv6 address keeps its brackets.
fn split(host: &str) -> (&str, Option<&str>) {
    let after_name = if host.starts_with('[') {
        host.find(']').map_or(host.len(), |i| i + 1)
    } else {
        host.find(':').unwrap_or(host.len())
    };
    let (name, rest) = host.split_at(after_name);
    (name, rest.strip_prefix(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_the_port_or_none() {
        let hosts = Hosts::new("127.0.0.1:7420".parse().unwrap(), &[]);
        for good in [
            "localhost",
            "LocalHost:7420",
            "127.0.0.1:7420",
            "[::1]:7420",
            "[::1]",
        ] {
            assert!(hosts.accepts(Some(good.as_bytes())), "{good}");
        }
        for bad in [
            "evil.example",
            "evil.example:7420",
            "localhost:80",
            "localhost.evil.example",
            "127.0.0.1:7420x",
            "",
        ] {
            assert!(!hosts.accepts(Some(bad.as_bytes())), "{bad}");
        }
        assert!(!hosts.accepts(None));
    }

    #[test]
    fn elsewhere_the_address_and_the_allowed_list() {
        let allowed = ["Dash.example".to_string(), "proxy.example:443".to_string()];
        let hosts = Hosts::new("10.1.2.3:8000".parse().unwrap(), &allowed);
        for good in [
            "10.1.2.3:8000",
            "dash.example",
            "dash.example:8000",
            "proxy.example:443",
        ] {
            assert!(hosts.accepts(Some(good.as_bytes())), "{good}");
        }
        for bad in [
            "localhost:8000",
            "proxy.example",
            "dash.example:443",
            "10.1.2.3:80",
        ] {
            assert!(!hosts.accepts(Some(bad.as_bytes())), "{bad}");
        }
    }
}
