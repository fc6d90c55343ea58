//! The inspector page at `/`: one HTML document with its style and script inlined, built into
//! the binary, served under a Content-Security-Policy that allows exactly those two inline
//! texts (by hash) and requests to this server, nothing else.
//!
//! The script is the JavaScript client (`client/src/index.js`, one module without
//! imports) followed by the page's own code, so the page follows the state the way any client
//! of the package does.

use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

const HTML: &str = include_str!("../page/inspector.html");
const CSS: &str = include_str!("../page/inspector.css");
const CLIENT: &str = include_str!("../client/src/index.js");
const SCRIPT: &str = include_str!("../page/inspector.js");

/// The assembled page and its policy, made once at start.
pub struct Page {
    html: String,
    policy: HeaderValue,
}

impl Page {
    pub fn new() -> Page {
        let script = format!("{CLIENT}\n{SCRIPT}");
        let html = HTML
            .replacen("<!--STYLE-->", &format!("<style>{CSS}</style>"), 1)
            .replacen(
                "<!--SCRIPT-->",
                &format!(r#"<script type="module">{script}</script>"#),
                1,
            );
        let policy = format!(
            "default-src 'none'; script-src '{}'; style-src '{}'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            hash(&script),
            hash(CSS)
        );
        Page {
            html,
            policy: HeaderValue::from_str(&policy).expect("a policy is visible ASCII"),
        }
    }

    pub fn response(&self) -> Response {
        let mut response = self.html.clone().into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        headers.insert(header::CONTENT_SECURITY_POLICY, self.policy.clone());
        // The page is opened with its token in the URL: never pass it on in a Referer.
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        headers.insert(
            HeaderName::from_static("x-frame-options"),
            HeaderValue::from_static("DENY"),
        );
        response
    }
}

/// `sha256-…` of an inline text, as CSP names it.
fn hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_carries_its_style_and_script_and_their_hashes() {
        let page = Page::new();
        assert!(!page.html.contains("<!--STYLE-->") && !page.html.contains("<!--SCRIPT-->"));
        let policy = page.policy.to_str().unwrap();
        assert!(policy.contains(&hash(CSS)), "{policy}");
        assert!(
            policy.contains(&hash(&format!("{CLIENT}\n{SCRIPT}"))),
            "{policy}"
        );
    }
}
