//! The token, the JSON endpoints and their errors (PROTOCOL.md).

use serde_json::json;

use crate::client::{escaped, request, store_and_id, Server, TOKEN};
use test_support::{each_backend, open, opts, TempDir};

#[each_backend]
fn without_the_token_every_path_is_401_and_says_nothing_more() {
    let dir = TempDir::new("serve_auth");
    let place = dir.store("auth.db");
    open(&place, &opts(json!({})))
        .unwrap()
        .set_state(br#"{"secret":1}"#)
        .unwrap();
    let (store, id) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let agent = format!("/v1/agents/{}", escaped(&id));
    for path in [
        "/",
        "/v1/agents",
        agent.as_str(),
        "/nowhere",
        "/v1/agents/x/watch",
    ] {
        for token in [None, Some("wrong-token-0123456789"), Some(&TOKEN[1..])] {
            let (status, head, body) = request(server.addr, "GET", path, token);
            assert_eq!(status, 401, "{path} {token:?}");
            assert_eq!(body, br#"{"error":{"code":"unauthorized"}}"#, "{path}");
            assert!(head
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"));
        }
    }
    let (status, _, _) = request(server.addr, "POST", &agent, None);
    assert_eq!(status, 401);
    // The query parameter is the browser's way; the header works as well.
    let (status, _, body) = request(
        server.addr,
        "GET",
        &format!("{agent}?access_token={TOKEN}"),
        None,
    );
    assert_eq!(
        (status, body),
        (200, br#"{"version":1,"state":{"secret":1}}"#.to_vec())
    );
    assert_eq!(server.watch_refused(&format!("{agent}/watch")), 401);
}

#[each_backend]
fn the_endpoints_answer_the_library_s_states_and_say_what_is_wrong() {
    let dir = TempDir::new("serve_endpoints");
    let place = dir.store("endpoints.db");
    let logged = opts(json!({"change_log": {"keep_last": 3}}));
    // An id that needs escaping, and one beside it without a change log.
    let odd = place.agent("a/b c é");
    let writer = open(&odd, &logged).unwrap();
    writer
        .set_state(br#"{"n":1,"nested":{"x":[1,2]}}"#)
        .unwrap();
    writer.set_state(br#"{"n":2,"nested":{"y":true}}"#).unwrap();
    let unlogged = place.agent("plain");
    open(&unlogged, &opts(json!({})))
        .unwrap()
        .set_state(br#"{"p":0}"#)
        .unwrap();
    let (store, odd_id) = store_and_id(&odd);
    let (_, plain_id) = store_and_id(&unlogged);
    let server = Server::start(&dir, &store);
    let odd_path = format!("/v1/agents/{}", escaped(&odd_id));

    assert_eq!(
        server.get(&odd_path),
        (
            200,
            json!({"version":2,"state":{"n":2,"nested":{"x":[1,2],"y":true}}})
        )
    );
    let (status, changes) = server.get(&format!("{odd_path}/changes?since=1"));
    assert_eq!(status, 200);
    assert_eq!(changes["version"], 2);
    assert_eq!(changes["changes"].as_array().unwrap().len(), 1);
    assert_eq!(
        changes["changes"][0]["patch"],
        json!({"n":2,"nested":{"y":true}})
    );
    assert_eq!(
        server.get(&format!("{odd_path}/state?version=1")),
        (
            200,
            json!({"version":1,"state":{"n":1,"nested":{"x":[1,2]}}})
        )
    );
    assert_eq!(
        server.get(&format!("{odd_path}/state?version=0")).1["state"],
        json!({})
    );
    // One place of the state, by JSON Pointer, with the version it was read at.
    assert_eq!(
        server.get(&format!("{odd_path}?path=/nested/x/1")),
        (200, json!({"version": 2, "value": 2}))
    );
    assert_eq!(
        server.get(&format!("{odd_path}?path=/nested/x&tail=1")),
        (200, json!({"version": 2, "value": [2]}))
    );
    assert_eq!(
        server.get(&format!("{odd_path}?path=")).1["value"],
        json!({"n":2,"nested":{"x":[1,2],"y":true}})
    );

    // The listing, paged by `next`, the prefix selecting this test's agents.
    let prefix = escaped(&odd_id[..odd_id.len() - "a/b c é".len()]);
    let (status, first) = server.get(&format!("/v1/agents?prefix={prefix}&limit=1"));
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["agents"][0]["id"], json!(odd_id));
    assert_eq!(first["agents"][0]["version"], 2);
    assert_eq!(first["next"], json!(odd_id));
    let after = escaped(&odd_id);
    let (_, second) = server.get(&format!("/v1/agents?prefix={prefix}&after={after}&limit=1"));
    assert_eq!(second["agents"][0]["id"], json!(plain_id));
    // The last page says so, also when it is full.
    assert_eq!(second["next"], json!(null), "{second}");
    let (_, last) = server.get(&format!(
        "/v1/agents?prefix={prefix}&after={}&limit=5",
        escaped(&plain_id)
    ));
    assert_eq!(last, json!({"agents": [], "next": null}));

    let error = |path: &str| {
        let (status, body) = server.get(path);
        (
            status,
            body["error"]["code"].as_str().unwrap_or("").to_string(),
        )
    };
    let plain_path = format!("/v1/agents/{}", escaped(&plain_id));
    for (path, status, code) in [
        (format!("{odd_path}/changes?since=x"), 400, "bad_request"),
        (format!("{odd_path}/changes?since=-1"), 400, "bad_request"),
        (format!("{odd_path}/changes?since=9"), 400, "bad_request"),
        (format!("{odd_path}/state"), 400, "bad_request"),
        (format!("{odd_path}/state?version=99"), 400, "bad_request"),
        ("/v1/agents?limit=0".to_string(), 400, "bad_request"),
        ("/v1/agents?limit=10001".to_string(), 400, "bad_request"),
        ("/v1/agents/%zz".to_string(), 400, "bad_request"),
        (format!("{odd_path}x"), 404, "not_found"),
        (format!("{odd_path}/nothing"), 404, "not_found"),
        ("/v2/agents".to_string(), 404, "not_found"),
        (format!("{plain_path}/changes"), 409, "change_log_off"),
        (format!("{odd_path}?path=/missing"), 404, "no_such_path"),
        (format!("{odd_path}?path=/nested/x/2"), 404, "no_such_path"),
        (format!("{odd_path}?path=nested"), 400, "bad_request"),
        (format!("{odd_path}?path=/n~2"), 400, "bad_request"),
        (format!("{odd_path}?path=/n&tail=1"), 400, "bad_request"),
        (
            format!("{odd_path}?path=/nested/x&tail=x"),
            400,
            "bad_request",
        ),
        (format!("{odd_path}?tail=1"), 400, "bad_request"),
    ] {
        assert_eq!(error(&path), (status, code.to_string()), "{path}");
    }
    let (status, _, _) = request(server.addr, "POST", &odd_path, Some(TOKEN));
    assert_eq!(status, 405);

    // Pruned: the log keeps 3 changes, so version 1 is gone after 3 more.
    for n in 3..=5 {
        writer
            .set_state(format!(r#"{{"n":{n}}}"#).as_bytes())
            .unwrap();
    }
    assert_eq!(
        error(&format!("{odd_path}/state?version=1")),
        (410, "gone".into())
    );
    assert_eq!(
        error(&format!("{odd_path}/changes?since=1")),
        (410, "gone".into())
    );
    assert_eq!(
        server.get(&format!("{odd_path}/state?version=3")).1["state"]["n"],
        3
    );
}

#[each_backend]
fn the_inspector_page_is_served_under_a_strict_policy() {
    let dir = TempDir::new("serve_page");
    let place = dir.store("page.db");
    open(&place, &opts(json!({})))
        .unwrap()
        .set_state(b"{}")
        .unwrap();
    let (store, _) = store_and_id(&place);
    let server = Server::start(&dir, &store);
    let (status, head, body) = request(server.addr, "GET", "/", Some(TOKEN));
    assert_eq!(status, 200);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/html"), "{head}");
    let policy = head
        .lines()
        .find_map(|l| l.strip_prefix("content-security-policy: "))
        .expect("a Content-Security-Policy");
    for part in [
        "default-src 'none'",
        "script-src 'sha256-",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(part), "{policy}");
    }
    assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"));
    assert!(head.contains("referrer-policy: no-referrer"));
    let page = String::from_utf8(body).unwrap();
    assert!(page.contains("<script type=\"module\">") && !page.contains("<!--SCRIPT-->"));
    // Nothing is loaded from elsewhere (the policy would block it; the page must not try).
    for external in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "url(http",
        "@import",
    ] {
        assert!(!page.contains(external), "the page loads {external}…");
    }
}

#[test]
fn a_server_others_can_reach_needs_a_given_token() {
    let dir = TempDir::new("serve_refused");
    let run = |args: &[&str]| {
        std::process::Command::new(crate::BIN)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let store = dir.file("refused.db");
    let store = store.to_str().unwrap();
    let out = run(&["serve", store, "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(65), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
    assert!(out.stdout.is_empty());
    let short = dir.file("short");
    std::fs::write(&short, "tooshort").unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&short, private).unwrap();
    let out = run(&["serve", store, "--token-file", short.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(65), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("too weak"));
    let out = run(&[
        "serve",
        store,
        "--token-file",
        dir.file("missing").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(65), "{out:?}");
}
