//! The PostgreSQL backend over TLS, against real servers that tests/pg/tls.sh starts (`make
//! test` runs it): one that accepts TLS only (hostssl), one with an expired certificate, one
//! whose certificate another CA signed, and one that offers no TLS. Each `sslmode` must give
//! libpq's outcome. Without those servers (AGENT_STATE_TEST_TLS_PORT unset) the tests are
//! skipped with a notice, except under `CI=true`, where that is a failure.

use std::path::Path;

use agent_state::{Agent, Error, ErrorKind, OpenOptions};

struct Servers {
    /// The certificates' directory.
    dir: String,
    password: String,
    tls: u16,
    expired: u16,
    other_ca: u16,
    plain: u16,
}

fn servers() -> Option<Servers> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(tls) = var("AGENT_STATE_TEST_TLS_PORT") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "AGENT_STATE_TEST_TLS_PORT is unset under CI=true: the TLS tests cannot run \
             (run them through tests/pg/tls.sh)"
        );
        eprintln!("skipped: AGENT_STATE_TEST_TLS_PORT is unset (no TLS servers: tests/pg/tls.sh)");
        return None;
    };
    let port = |name: &str| var(name).unwrap().parse().unwrap();
    Some(Servers {
        dir: var("AGENT_STATE_TEST_TLS_DIR").unwrap(),
        password: var("AGENT_STATE_TEST_TLS_PASSWORD").unwrap(),
        tls: tls.parse().unwrap(),
        expired: port("AGENT_STATE_TEST_TLS_EXPIRED_PORT"),
        other_ca: port("AGENT_STATE_TEST_TLS_OTHER_CA_PORT"),
        plain: port("AGENT_STATE_TEST_PLAIN_PORT"),
    })
}

macro_rules! servers_or_skip {
    () => {
        match servers() {
            Some(s) => s,
            None => return,
        }
    };
}

impl Servers {
    /// tlsuser's URI for `host:port` with the query `params`.
    fn uri(&self, host: &str, port: u16, params: &str) -> String {
        format!(
            "postgresql://tlsuser:{}@{host}:{port}/postgres?connect_timeout=10&{params}",
            self.password
        )
    }

    fn ca(&self) -> String {
        format!("{}/ca.pem", self.dir)
    }
}

fn open(uri: &str) -> agent_state::Result<Agent> {
    let id = format!("tls-{}-{}", std::process::id(), rand_suffix());
    let options = OpenOptions::from_json(
        format!(r#"{{"agent_id":"{id}","server_timeout_ms":10000}}"#).as_bytes(),
    )?;
    Agent::open_with(Path::new(uri), &options)
}

fn rand_suffix() -> u128 {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    nanos * 1000 + N.fetch_add(1, Ordering::Relaxed) as u128
}

/// Opens `uri` and writes and reads a state: the connection works.
#[track_caller]
fn connects(uri: &str) {
    let agent = open(uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    agent.set_state(br#"{"over":"tls"}"#).unwrap();
    let state = agent.get_state().unwrap();
    assert_eq!(state.json(), br#"{"over":"tls"}"#);
}

/// Opening `uri` fails with the status `kind` and a message containing `text`, never the
/// password.
#[track_caller]
fn refused(s: &Servers, uri: &str, kind: ErrorKind, text: &str) -> Error {
    let err = match open(uri) {
        Ok(_) => panic!("{uri}: connected, expected {kind:?} ({text})"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), kind, "{uri}: {err}");
    let message = err.to_string();
    assert!(message.contains(text), "{uri}: {message:?} lacks {text:?}");
    assert!(!message.contains(&s.password), "{message}");
    err
}

#[test]
fn each_sslmode_against_a_server_that_requires_tls() {
    let s = servers_or_skip!();
    let ca = s.ca();
    // pg_hba.conf has hostssl lines only: the server refuses a session without TLS.
    refused(
        &s,
        &s.uri("127.0.0.1", s.tls, "sslmode=disable"),
        ErrorKind::Auth,
        "no pg_hba.conf entry",
    );
    // allow: plain first, refused, then TLS.
    connects(&s.uri("127.0.0.1", s.tls, "sslmode=allow"));
    connects(&s.uri("127.0.0.1", s.tls, "sslmode=prefer"));
    // The default is prefer.
    connects(&s.uri("127.0.0.1", s.tls, "application_name=default"));
    connects(&s.uri("127.0.0.1", s.tls, "sslmode=require"));
    connects(&s.uri(
        "127.0.0.1",
        s.tls,
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    ));
    connects(&s.uri(
        "127.0.0.1",
        s.tls,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ));
    connects(&s.uri(
        "localhost",
        s.tls,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ));
}

#[test]
fn each_sslmode_against_a_server_without_tls() {
    let s = servers_or_skip!();
    let ca = s.ca();
    connects(&s.uri("127.0.0.1", s.plain, "sslmode=disable"));
    connects(&s.uri("127.0.0.1", s.plain, "sslmode=allow"));
    // prefer (and the default): the server says it has no TLS, the session goes on plain.
    connects(&s.uri("127.0.0.1", s.plain, "sslmode=prefer"));
    connects(&s.uri("127.0.0.1", s.plain, "application_name=default"));
    for mode in [
        "sslmode=require".to_string(),
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        format!("sslmode=verify-full&sslrootcert={ca}"),
    ] {
        refused(
            &s,
            &s.uri("127.0.0.1", s.plain, &mode),
            ErrorKind::Auth,
            "the server does not offer TLS",
        );
    }
}

#[test]
fn verify_full_checks_the_name_and_verify_ca_does_not() {
    let s = servers_or_skip!();
    let ca = s.ca();
    // The certificate is for localhost and 127.0.0.1; the client connects to 127.0.0.1 under
    // another name.
    let other_name = |mode: &str| {
        s.uri(
            "wrong.example",
            s.tls,
            &format!("hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={ca}"),
        )
    };
    let err = refused(
        &s,
        &other_name("verify-full"),
        ErrorKind::Auth,
        "not valid for the host wrong.example",
    );
    assert!(
        err.to_string().starts_with("cannot secure or authenticate"),
        "{err}"
    );
    connects(&other_name("verify-ca"));
    connects(&other_name("require"));
}

#[test]
fn an_expired_certificate_or_another_ca_s_is_refused() {
    let s = servers_or_skip!();
    let ca = s.ca();
    for mode in ["verify-ca", "verify-full"] {
        let params = format!("sslmode={mode}&sslrootcert={ca}");
        refused(
            &s,
            &s.uri("localhost", s.expired, &params),
            ErrorKind::Auth,
            "the server's certificate has expired",
        );
        refused(
            &s,
            &s.uri("localhost", s.other_ca, &params),
            ErrorKind::Auth,
            "not signed by a CA this client trusts",
        );
    }
    // require with a root file is verify-ca, as libpq.
    refused(
        &s,
        &s.uri(
            "localhost",
            s.other_ca,
            &format!("sslmode=require&sslrootcert={ca}"),
        ),
        ErrorKind::Auth,
        "not signed by a CA this client trusts",
    );
    // Without one, require checks nothing.
    connects(&s.uri("localhost", s.other_ca, "sslmode=require"));
    connects(&s.uri("localhost", s.expired, "sslmode=require"));
    // The platform's roots do not hold the test CA.
    refused(
        &s,
        &s.uri("localhost", s.tls, "sslmode=verify-full&sslrootcert=system"),
        ErrorKind::Auth,
        "not signed by a CA this client trusts",
    );
}

#[test]
fn a_missing_root_file_is_said_at_open() {
    let s = servers_or_skip!();
    let err = refused(
        &s,
        &s.uri(
            "localhost",
            s.tls,
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        ),
        ErrorKind::InvalidArgument,
        "the root certificate file /nonexistent/ca.pem does not exist",
    );
    assert!(err.to_string().contains("sslrootcert=system"), "{err}");
}

#[test]
fn client_certificates() {
    let s = servers_or_skip!();
    let ca = s.ca();
    let d = &s.dir;
    let uri = |extra: &str| {
        format!(
            "postgresql://certuser@localhost:{}/postgres?connect_timeout=10&sslmode=verify-full\
             &sslrootcert={ca}{extra}",
            s.tls
        )
    };
    connects(&uri(&format!(
        "&sslcert={d}/client.pem&sslkey={d}/client.key"
    )));
    // pg_hba says cert for certuser: without a certificate the server refuses (28000).
    refused(
        &s,
        &uri(""),
        ErrorKind::Auth,
        "connection requires a valid client certificate",
    );
    refused(
        &s,
        &uri(&format!("&sslcert={d}/client.pem")),
        ErrorKind::InvalidArgument,
        "sslcert and sslkey go together",
    );
}

#[test]
fn scram_with_channel_binding_over_tls() {
    let s = servers_or_skip!();
    let ca = s.ca();
    // The server's certificate is signed with ECDSA SHA-384: the binding must hash with
    // SHA-384 (a wrong digest fails the SCRAM exchange).
    connects(&s.uri(
        "localhost",
        s.tls,
        &format!("sslmode=verify-full&sslrootcert={ca}&channel_binding=require"),
    ));
    connects(&s.uri(
        "127.0.0.1",
        s.tls,
        "sslmode=require&channel_binding=require",
    ));
    // Without TLS there is nothing to bind to.
    let err = open(&s.uri(
        "127.0.0.1",
        s.plain,
        "sslmode=disable&channel_binding=require",
    ));
    assert!(err.is_err());
}

#[test]
fn a_wrong_password_is_auth_and_not_shown() {
    let s = servers_or_skip!();
    let ca = s.ca();
    for (port, mode) in [
        (s.tls, format!("sslmode=verify-full&sslrootcert={ca}")),
        (s.plain, "sslmode=disable".to_string()),
    ] {
        let uri = format!(
            "postgresql://tlsuser:Wr0ng-Secret@localhost:{port}/postgres?connect_timeout=10&{mode}"
        );
        let err = refused(&s, &uri, ErrorKind::Auth, "password authentication failed");
        assert!(!err.to_string().contains("Wr0ng-Secret"), "{err}");
        assert_eq!(err.kind().code(), 13);
    }
}

#[test]
fn a_state_written_over_tls_reads_back_from_another_handle() {
    let s = servers_or_skip!();
    let ca = s.ca();
    let uri = s.uri(
        "localhost",
        s.tls,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let id = format!("tls-readback-{}", rand_suffix());
    let options = OpenOptions::from_json(format!(r#"{{"agent_id":"{id}"}}"#).as_bytes()).unwrap();
    let a = Agent::open_with(Path::new(&uri), &options).unwrap();
    a.set_state(br#"{"n":1,"s":"x"}"#).unwrap();
    a.set_state(br#"{"n":2}"#).unwrap();
    a.close().unwrap();
    // Another URI (its own pool, its own connections), by IP address.
    let other = s.uri(
        "127.0.0.1",
        s.tls,
        &format!("sslmode=verify-full&sslrootcert={ca}&application_name=reader"),
    );
    let b = Agent::open_with(Path::new(&other), &options).unwrap();
    assert_eq!(b.get_state().unwrap().json(), br#"{"n":2,"s":"x"}"#);
}
