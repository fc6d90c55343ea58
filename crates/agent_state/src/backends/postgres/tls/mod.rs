//! TLS to the PostgreSQL server, with libpq's meaning for each setting, on rustls (no
//! OpenSSL: the wheels and the static archive stay self-contained).
//!
//! The client (`tokio-postgres` 0.7) knows `sslmode` disable, prefer and require only, and
//! none of `sslrootcert`, `sslcert`, `sslkey`: [`split`] takes those out of the URI before the
//! client parses it, and this module does the rest:
//! - which modes to try in turn ([`Tls::connect`]: `allow` plain first, then TLS; `prefer` TLS,
//!   plain when the server offers none or refuses the TLS session);
//! - what the server's certificate must be ([`Verify`]): nothing (`prefer`, `require`), a
//!   chain to the roots (`verify-ca`, and `require` when a root file is there, as libpq), or
//!   that and the host's name or IP address (`verify-full`);
//! - the connector the client calls for the handshake ([`Connector`]), on tokio-rustls, whose
//!   stream gives SCRAM its channel binding (`tls-server-end-point`: the server certificate's
//!   hash, by the digest its signature names, RFC 5929 section 4.1).
//!
//! Files are read at each connection (a rotated client certificate is used at the next one).
//! Unix-socket hosts never use TLS (as libpq).
//!
//! Here: the settings checked and the attempts; `params` (the URI's TLS parameters), `verify`
//! (the certificate checks, and why a handshake failed), `stream` (the connector and stream).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, Config, Socket};

mod params;
mod stream;
mod verify;

pub(super) use params::{split, Mode, Options};
use stream::Connector;
pub(super) use stream::Stream;
use verify::{ChainOnly, Unchecked};

/// What the server's certificate must be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verify {
    /// Nothing (`prefer`, `require`, `allow`): encrypted, not authenticated.
    Nothing,
    /// A chain to the roots, any name (`verify-ca`; `require` with a root file).
    Chain(Roots),
    /// A chain to the roots, and the host's name or IP address (`verify-full`).
    Full(Roots),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// `sslrootcert=system`: the platform's trust store (rustls-native-certs).
    System,
    /// A PEM bundle.
    File(PathBuf),
}

impl fmt::Display for Roots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Roots::System => f.write_str("sslrootcert=system (the platform's trust store)"),
            Roots::File(p) => write!(f, "sslrootcert={}", p.display()),
        }
    }
}

/// libpq's default directory for the certificates: `~/.postgresql`.
fn home_file(name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(Path::new(&home).join(".postgresql").join(name))
}

/// How one URI's connections are secured.
#[derive(Debug, Clone)]
pub(super) struct Tls {
    mode: Mode,
    verify: Verify,
    /// The client certificate chain and its key (PEM files), when one is given (or libpq's
    /// `~/.postgresql/postgresql.crt` and `.key` exist).
    client: Option<(PathBuf, PathBuf)>,
}

impl Tls {
    /// The settings of `options`, checked: the files they name are read once here, so that a
    /// missing or malformed one is reported by `open` rather than by each connection.
    pub fn new(options: &Options) -> Result<Tls, String> {
        let explicit_root = options.rootcert.as_deref().map(|r| match r {
            "system" => Roots::System,
            path => Roots::File(PathBuf::from(path)),
        });
        let default_root = || home_file("root.crt");
        let verify = match options.mode {
            Mode::Disable | Mode::Allow | Mode::Prefer => Verify::Nothing,
            // libpq: "if a root CA file exists, the behavior of sslmode=require will be the
            // same as that of verify-ca".
            Mode::Require => match explicit_root
                .or_else(|| default_root().filter(|p| p.is_file()).map(Roots::File))
            {
                Some(roots) => Verify::Chain(roots),
                None => Verify::Nothing,
            },
            Mode::VerifyCa | Mode::VerifyFull => {
                let roots = match explicit_root.or_else(|| default_root().map(Roots::File)) {
                    Some(Roots::File(p)) if !p.is_file() => {
                        return Err(format!(
                            "sslmode={}: the root certificate file {} does not exist; give \
                             sslrootcert=PATH (a PEM bundle of the CAs to trust) or \
                             sslrootcert=system",
                            if options.mode == Mode::VerifyCa {
                                "verify-ca"
                            } else {
                                "verify-full"
                            },
                            p.display()
                        ))
                    }
                    Some(roots) => roots,
                    None => {
                        return Err("sslmode=verify-ca/verify-full: no sslrootcert and no \
                                    home directory for ~/.postgresql/root.crt"
                            .to_string())
                    }
                };
                if options.mode == Mode::VerifyCa {
                    Verify::Chain(roots)
                } else {
                    Verify::Full(roots)
                }
            }
        };
        let client = match (&options.cert, &options.key) {
            (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
            (Some(_), None) | (None, Some(_)) => {
                return Err("sslcert and sslkey go together: give both".to_string())
            }
            (None, None) => match (home_file("postgresql.crt"), home_file("postgresql.key")) {
                (Some(c), Some(k)) if c.is_file() && k.is_file() => Some((c, k)),
                _ => None,
            },
        };
        let tls = Tls {
            mode: options.mode,
            verify,
            client,
        };
        if tls.mode != Mode::Disable {
            tls.client_config()?;
        }
        Ok(tls)
    }

    /// The rustls configuration, its files read now.
    fn client_config(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match &self.verify {
            Verify::Nothing => Arc::new(Unchecked(provider.clone())),
            Verify::Chain(roots) | Verify::Full(roots) => {
                let store = Arc::new(load_roots(roots)?);
                let webpki = WebPkiServerVerifier::builder_with_provider(store, provider.clone())
                    .build()
                    .map_err(|e| format!("{roots}: {e}"))?;
                match &self.verify {
                    Verify::Full(_) => webpki,
                    _ => Arc::new(ChainOnly(webpki)),
                }
            }
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("sslcert={}: {e}", cert.display()))?;
                if chain.is_empty() {
                    return Err(format!(
                        "sslcert={}: no PEM certificate in it",
                        cert.display()
                    ));
                }
                // PKCS#8, PKCS#1 (RSA) or SEC1 (EC), whichever the file holds.
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    format!("sslkey={}: no usable PEM private key: {e}", key.display())
                })?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| format!("sslcert/sslkey: {e}"))?
            }
        };
        Ok(Arc::new(config))
    }

    /// Connects to the server of `config` (its hosts resolved), trying the client's modes that
    /// `sslmode` means in turn: `allow` plain, then TLS when the server refused the plain
    /// session; `prefer` TLS (plain when the server offers no TLS), then plain when the server
    /// refused the TLS session or the handshake failed. The error is the last attempt's.
    pub async fn connect(
        &self,
        config: &Config,
    ) -> Result<(Client, tokio_postgres::Connection<Socket, Stream>), tokio_postgres::Error> {
        let unix_only = config.get_hostaddrs().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|h| !matches!(h, Host::Tcp(_)));
        let modes: &[SslMode] = match self.mode {
            _ if unix_only => &[SslMode::Disable],
            Mode::Disable => &[SslMode::Disable],
            Mode::Allow => &[SslMode::Disable, SslMode::Require],
            Mode::Prefer => &[SslMode::Prefer, SslMode::Disable],
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => &[SslMode::Require],
        };
        let mut config = config.clone();
        let mut failure = None;
        for (i, &mode) in modes.iter().enumerate() {
            config.ssl_mode(mode);
            match config.connect(Connector(self)).await {
                Ok(connected) => return Ok(connected),
                Err(e) => {
                    // Another try only when the server answered (refused the session, or the
                    // handshake failed on what it sent): not when it is unreachable.
                    let answered = e.as_db_error().is_some() || secured_failed(&e);
                    failure = Some(e);
                    if !answered || i + 1 == modes.len() {
                        break;
                    }
                }
            }
        }
        Err(failure.expect("at least one mode is tried"))
    }
}

/// True when `e` is a failure to secure the connection (the TLS handshake, the certificate,
/// the server offering no TLS where it is required), rather than the network's.
pub(super) fn secured_failed(e: &tokio_postgres::Error) -> bool {
    // The client's TLS errors say "error performing TLS handshake"; their cause is this
    // module's (or the client's "server does not support TLS"), except when the socket
    // itself failed during the handshake (an io::Error: the network's).
    e.to_string() == "error performing TLS handshake"
        && std::error::Error::source(e).is_some_and(|c| !c.is::<io::Error>())
}

fn load_roots(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_string(), |e| e.to_string());
                return Err(format!("{roots}: no usable root certificate ({why})"));
            }
        }
        Roots::File(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{roots}: {e}"))?;
            for cert in certs {
                store
                    .add(cert)
                    .map_err(|e| format!("{roots}: a certificate rustls cannot use: {e}"))?;
            }
            if store.is_empty() {
                return Err(format!("{roots}: no PEM certificate in it"));
            }
        }
    }
    Ok(store)
}
