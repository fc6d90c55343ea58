//! The `Origin` check of the watch upgrade: a browser sends the origin of the page that opens
//! a WebSocket, and only the server's own page and the `--allowed-origin` list may open one.

/// The origins a watch upgrade may come from besides the server's own. Immutable once built.
pub struct Origins {
    allowed: Vec<String>,
}

impl Origins {
    /// `allowed`: `--allowed-origin`'s entries (`scheme://host[:port]`), compared without case
    /// and without a trailing `/`.
    pub fn new(allowed: &[String]) -> Origins {
        Origins {
            allowed: allowed.iter().map(|o| normal(o)).collect(),
        }
    }

    /// Whether an upgrade with `origin` (its `Origin` header) to `host` (its `Host` header,
    /// already accepted by the host check) may proceed: no `Origin` at all (a client that is
    /// not a browser: browsers always send one on a WebSocket), the server's own origin
    /// (`http://` and the `Host`), or one of the allowed list. `Origin: null` (a sandboxed
    /// page, a file) is refused.
    pub fn accepts(&self, origin: Option<&[u8]>, host: Option<&[u8]>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let Ok(origin) = std::str::from_utf8(origin) else {
            return false;
        };
        let origin = normal(origin);
        let own = host
            .and_then(|h| std::str::from_utf8(h).ok())
            .is_some_and(|host| origin == format!("http://{}", host.to_ascii_lowercase()));
        own || self.allowed.contains(&origin)
    }
}

fn normal(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_origin_the_list_or_none() {
        let origins = Origins::new(&["https://Dash.example/".to_string()]);
        let host = Some(&b"127.0.0.1:7420"[..]);
        assert!(origins.accepts(None, host));
        assert!(origins.accepts(Some(b"http://127.0.0.1:7420"), host));
        assert!(origins.accepts(Some(b"https://dash.example"), host));
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:7421",
            "https://127.0.0.1:7420",
            "null",
            "",
        ] {
            assert!(!origins.accepts(Some(bad.as_bytes()), host), "{bad}");
        }
    }
}
