//! A PostgreSQL connection URI, as the library handles it beyond the client's parsing: with
//! its password hidden for messages ([`redact`]), the parameters the client does not know
//! taken out first ([`take_param`]), and its hosts split into one configuration each, their
//! names resolved on the calling thread ([`resolved`]), since the client would resolve them on
//! a thread and the library starts none.

use std::net::{IpAddr, ToSocketAddrs};

use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// Takes parameter `key` out of `uri`, in either form libpq accepts (`postgresql://...?k=v&..`
/// or `k=v k='v w' ..`), for the parameters the client refuses or reads otherwise than libpq.
/// Returns the URI without it and its value (percent-decoded, or unquoted), the last one when
/// given twice (as libpq).
pub(super) fn take_param(uri: &str, key: &str) -> (String, Option<String>) {
    if uri.starts_with("postgres://") || uri.starts_with("postgresql://") {
        let Some((head, query)) = uri.split_once('?') else {
            return (uri.to_string(), None);
        };
        let mut value = None;
        let kept: Vec<&str> = query
            .split('&')
            .filter(|part| match part.split_once('=') {
                Some((k, v)) if k == key => {
                    value = Some(percent_decoded(v));
                    false
                }
                _ => !part.is_empty(),
            })
            .collect();
        let rest = if kept.is_empty() {
            head.to_string()
        } else {
            format!("{head}?{}", kept.join("&"))
        };
        return (rest, value);
    }
    let mut value = None;
    let mut kept = Vec::new();
    for (k, v, text) in key_values(uri) {
        if k == key {
            value = Some(v);
        } else {
            kept.push(text);
        }
    }
    (kept.join(" "), value)
}

/// `uri` with a `host=a,b` query parameter written as `host=a&host=b`: libpq reads a list
/// there (a multi-host URI with Unix sockets, `?host=/run/a,/run/b`), the client one path.
pub(super) fn host_lists_split(uri: &str) -> String {
    let Some((head, query)) = uri.split_once('?') else {
        return uri.to_string();
    };
    if !(uri.starts_with("postgres://") || uri.starts_with("postgresql://")) {
        return uri.to_string();
    }
    let parts: Vec<String> = query
        .split('&')
        .map(|part| match part.split_once('=') {
            Some(("host", v)) if v.contains(',') => v
                .split(',')
                .map(|h| format!("host={h}"))
                .collect::<Vec<_>>()
                .join("&"),
            _ => part.to_string(),
        })
        .collect();
    format!("{head}?{}", parts.join("&"))
}

/// The `key=value` pairs of a libpq keyword/value string, each with its text as written (to
/// put back unchanged). Values may be quoted (`'a b'`, with `\'` and `\\` inside).
fn key_values(s: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            // Not a pair: kept as it is, for the client to refuse.
            let end = chars.peek().map_or(s.len(), |(i, _)| *i);
            out.push((key, String::new(), s[start..end].to_string()));
            continue;
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            while let Some((_, c)) = chars.next() {
                match c {
                    '\'' => break,
                    '\\' => value.extend(chars.next().map(|(_, c)| c)),
                    c => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next().map(|(_, c)| c));
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(s.len(), |(i, _)| *i);
        out.push((key, value, s[start..end].to_string()));
    }
    out
}

/// `%XX` sequences decoded (as the client decodes URI parameters); invalid ones kept.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One server to try: a host of the URI at one of its addresses.
pub(super) struct Candidate {
    /// `host:port` (or the socket directory), for messages.
    pub label: String,
    /// A configuration naming this host alone, or why it cannot be tried (its name does not
    /// resolve: the next host is tried, as libpq does).
    pub config: std::result::Result<Config, String>,
}

/// The servers of `config` in the URI's order, one configuration each, with host names
/// resolved here, on the calling thread: the client would resolve them on a thread of its
/// runtime's blocking pool, and the library starts no thread. A name with several addresses
/// gives one candidate per address, in order (as libpq tries them). One host per candidate,
/// so the caller chooses among the hosts (`target_session_attrs`, see `super::hosts`) rather
/// than the client.
pub(super) fn resolved(config: &Config) -> Vec<Candidate> {
    let hosts = config.get_hosts();
    let ports = config.get_ports();
    let addrs = config.get_hostaddrs();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let mut out = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let port = port(i);
        let label = match host {
            Host::Tcp(name) => format!("{name}:{port}"),
            #[cfg(unix)]
            Host::Unix(dir) => format!("{}:{port}", dir.display()),
        };
        let one = |addr: Option<IpAddr>| {
            let mut c = only_host(config, host, port);
            if let Some(addr) = addr {
                c.hostaddr(addr);
            }
            c
        };
        match host {
            Host::Tcp(_) if addrs.get(i).is_some() => out.push(Candidate {
                label,
                config: Ok(one(addrs.get(i).copied())),
            }),
            Host::Tcp(name) => match name.parse::<IpAddr>() {
                Ok(ip) => out.push(Candidate {
                    label,
                    config: Ok(one(Some(ip))),
                }),
                Err(_) => match lookup(name, port) {
                    Ok(ips) => out.extend(ips.into_iter().map(|ip| Candidate {
                        label: format!("{label} ({ip})"),
                        config: Ok(one(Some(ip))),
                    })),
                    Err(e) => out.push(Candidate {
                        label,
                        config: Err(e),
                    }),
                },
            },
            #[cfg(unix)]
            Host::Unix(_) => out.push(Candidate {
                label,
                config: Ok(one(None)),
            }),
        }
    }
    out
}

/// The addresses of `name`.
fn lookup(name: &str, port: u16) -> std::result::Result<Vec<IpAddr>, String> {
    let addrs: Vec<IpAddr> = (name, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {name}: {e}"))?
        .map(|a| a.ip())
        .collect();
    if addrs.is_empty() {
        return Err(format!("{name} resolves to no address"));
    }
    Ok(addrs)
}

/// `config` with `host` at `port` as its only server (the client has no way to remove hosts,
/// so every other setting is copied over).
fn only_host(config: &Config, host: &Host, port: u16) -> Config {
    let mut c = Config::new();
    if let Some(user) = config.get_user() {
        c.user(user);
    }
    if let Some(password) = config.get_password() {
        c.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        c.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        c.options(options);
    }
    if let Some(name) = config.get_application_name() {
        c.application_name(name);
    }
    c.ssl_mode(config.get_ssl_mode());
    c.ssl_negotiation(config.get_ssl_negotiation());
    if let Some(t) = config.get_connect_timeout() {
        c.connect_timeout(*t);
    }
    if let Some(t) = config.get_tcp_user_timeout() {
        c.tcp_user_timeout(*t);
    }
    c.keepalives(config.get_keepalives());
    c.keepalives_idle(config.get_keepalives_idle());
    if let Some(t) = config.get_keepalives_interval() {
        c.keepalives_interval(t);
    }
    if let Some(n) = config.get_keepalives_retries() {
        c.keepalives_retries(n);
    }
    c.channel_binding(config.get_channel_binding());
    match host {
        Host::Tcp(name) => c.host(name),
        #[cfg(unix)]
        Host::Unix(dir) => c.host_path(dir),
    };
    c.port(port);
    c
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
