//! A PostgreSQL connection URI, as the library handles it beyond the client's parsing: with
//! its password hidden for messages ([`redact`]), the parameters the client does not know
//! taken out first ([`take_param`]), and its hosts split into one configuration each, their
//! names resolved on the calling thread ([`resolved`]), since the client would resolve them on
//! a thread and the library starts none.

use std::net::{IpAddr, ToSocketAddrs};

use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// Takes parameter `key` out of `uri` (see [`take_params`]): the URI without it, and its value
/// (the last one when given twice, as libpq).
pub(super) fn take_param(
    uri: &str,
    key: &str,
) -> std::result::Result<(String, Option<String>), String> {
    let mut value = None;
    let rest = take_params(uri, &mut |k: &str, v: String| {
        Ok(k == key && {
            value = Some(v);
            true
        })
    })?;
    Ok((rest, value))
}

/// How statements are sent: the URI's `default_query_exec_mode`, spelled as pgx spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ExecMode {
    /// `exec` (the default): every statement unnamed, its parameters' types given (parse,
    /// bind and execute in one round trip), and the handle's settings carried by each
    /// transaction that needs them: nothing outlives a transaction, so any connection pooler
    /// in front of the server (PgBouncer in transaction mode, one you cannot see) is as good
    /// as the server itself.
    Exec,
    /// `cache_statement`: each statement prepared once per server connection (named) and
    /// cached on the connection, and the handle's settings set once per server connection
    /// (`SET`, not `SET LOCAL` in every transaction). For a connection whose server session is
    /// the library's: directly to the server, or through a pooler in session mode.
    CacheStatement,
}

/// The URI parameter [`ExecMode`] is read from.
pub(super) const EXEC_MODE_PARAM: &str = "default_query_exec_mode";

impl ExecMode {
    /// The mode `uri` asks for and `uri` without the parameter (the client does not know it).
    /// An unknown value is refused, naming the parameter and the values it accepts.
    pub(super) fn take(uri: &str) -> std::result::Result<(String, ExecMode), String> {
        let (rest, value) = take_param(uri, EXEC_MODE_PARAM)?;
        let mode = match value.as_deref() {
            None | Some("exec") => ExecMode::Exec,
            Some("cache_statement") => ExecMode::CacheStatement,
            Some(other) => {
                return Err(format!(
                    "{EXEC_MODE_PARAM}={other}: not a mode this library knows (the accepted \
                     values are exec, the default, and cache_statement)"
                ))
            }
        };
        Ok((rest, mode))
    }
}

/// `uri` without the parameters `take` takes (it is given each key and its decoded value and
/// says whether it took it), in either form libpq accepts: `postgresql://...?k=v&...` (values
/// percent-decoded) or `key=value key='value' ...`: for the parameters the client refuses or
/// reads otherwise than libpq.
pub(super) fn take_params(
    uri: &str,
    take: &mut dyn FnMut(&str, String) -> std::result::Result<bool, String>,
) -> std::result::Result<String, String> {
    let rest = if uri.starts_with("postgres://") || uri.starts_with("postgresql://") {
        match uri.split_once('?') {
            None => uri.to_string(),
            Some((head, query)) => {
                let mut kept = Vec::new();
                for part in query.split('&') {
                    let (k, v) = part.split_once('=').unwrap_or((part, ""));
                    if !take(&percent_decode(k)?, percent_decode(v)?)? {
                        kept.push(part);
                    }
                }
                if kept.is_empty() {
                    head.to_string()
                } else {
                    format!("{head}?{}", kept.join("&"))
                }
            }
        }
    } else {
        let mut rest = String::new();
        let mut last = 0;
        for (key, value, span) in key_values(uri)? {
            if take(&key, value)? {
                rest.push_str(&uri[last..span.0]);
                last = span.1;
            }
        }
        rest.push_str(&uri[last..]);
        rest
    };
    Ok(rest)
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

/// `%XX` escapes decoded (as the client decodes a URI's parameters).
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{s}: a % not followed by two hexadecimal digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s}: not UTF-8 once decoded"))
}

/// A key, its value, and the byte range of `key=value` in the string.
type KeyValue = (String, String, (usize, usize));

/// The `key=value` pairs of a libpq connection string, each with its span in `s` (from its key
/// to the end of its value): values unquoted or in single quotes, `\` escaping the next
/// character, spaces allowed around `=`.
fn key_values(s: &str) -> Result<Vec<KeyValue>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_spaces = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_spaces(i);
        if i >= b.len() {
            return Ok(out);
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = s[start..i].to_string();
        i = skip_spaces(i);
        if i >= b.len() || b[i] != b'=' {
            return Err(format!("{key}: a key without \"=value\""));
        }
        i = skip_spaces(i + 1);
        let mut value = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            loop {
                match b.get(i) {
                    None => return Err(format!("{key}: an unterminated quoted value")),
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < b.len() => {
                        value.push(b[i + 1]);
                        i += 2;
                    }
                    Some(&c) => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        let value = String::from_utf8(value).map_err(|_| format!("{key}: a value not UTF-8"))?;
        out.push((key, value, (start, i)));
    }
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
    use super::{host_lists_split, redact, take_param, ExecMode};

    #[test]
    fn a_parameter_comes_out_of_either_form_and_host_lists_are_split() {
        assert_eq!(
            take_param(
                "postgresql:///db?host=/a&target_session_attrs=read-write&user=u",
                "target_session_attrs"
            )
            .unwrap(),
            (
                "postgresql:///db?host=/a&user=u".to_string(),
                Some("read-write".to_string())
            )
        );
        assert_eq!(
            take_param(
                "host=h target_session_attrs='prefer-standby' user=u",
                "target_session_attrs"
            )
            .unwrap(),
            (
                "host=h  user=u".to_string(),
                Some("prefer-standby".to_string())
            )
        );
        assert_eq!(
            take_param("postgres://h/db", "target_session_attrs").unwrap(),
            ("postgres://h/db".to_string(), None)
        );
        assert!(take_param("postgres://h/db?x=%zz", "x").is_err());
        assert_eq!(
            host_lists_split("postgresql:///db?host=/run/a,/run/b&port=5432"),
            "postgresql:///db?host=/run/a&host=/run/b&port=5432"
        );
    }

    #[test]
    fn the_exec_mode_is_exec_by_default_and_unknown_modes_are_refused() {
        assert_eq!(
            ExecMode::take("postgres://h/db").unwrap(),
            ("postgres://h/db".to_string(), ExecMode::Exec)
        );
        assert_eq!(
            ExecMode::take("postgres://h/db?default_query_exec_mode=exec&user=u").unwrap(),
            ("postgres://h/db?user=u".to_string(), ExecMode::Exec)
        );
        assert_eq!(
            ExecMode::take("host=h default_query_exec_mode=cache_statement").unwrap(),
            ("host=h ".to_string(), ExecMode::CacheStatement)
        );
        let refused =
            ExecMode::take("postgres://h/db?default_query_exec_mode=cache_describe").unwrap_err();
        assert!(
            refused.contains("default_query_exec_mode=cache_describe")
                && refused.contains("exec")
                && refused.contains("cache_statement"),
            "{refused}"
        );
    }

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
