//! The connector the client calls for a handshake, on tokio-rustls, and the TLS stream, whose
//! channel binding SCRAM uses.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;

use super::verify::explain;
use super::Tls;

/// The client's TLS connector for one connection attempt.
pub(super) struct Connector<'a>(pub(super) &'a Tls);

impl MakeTlsConnect<Socket> for Connector<'_> {
    type Stream = Stream;
    type TlsConnect = Handshake;
    type Error = Failed;

    /// Called for every attempt, plain ones and Unix sockets included (before the client
    /// knows whether TLS will be used): nothing is read or checked until [`Handshake`] runs.
    fn make_tls_connect(&mut self, host: &str) -> Result<Handshake, Failed> {
        Ok(Handshake {
            tls: self.0.clone(),
            host: host.to_string(),
        })
    }
}

/// One TLS handshake, to `host`.
pub(super) struct Handshake {
    tls: Tls,
    host: String,
}

impl TlsConnect<Socket> for Handshake {
    type Stream = Stream;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Stream, Self::Error>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        Box::pin(async move {
            let Handshake { tls, host } = self;
            let config = tls.client_config().map_err(Failed)?;
            let name = ServerName::try_from(host.clone())
                .map_err(|e| Failed(format!("{host}: not a host name TLS can check ({e})")))?;
            let connector = tokio_rustls::TlsConnector::from(config);
            match connector.connect(name, socket).await {
                Ok(stream) => Ok(Stream(stream)),
                Err(e) => Err(
                    match e.get_ref().and_then(|c| c.downcast_ref::<rustls::Error>()) {
                        // The handshake's own failure: said in the library's words.
                        Some(e) => Box::new(Failed(explain(e, &host, &tls.verify))) as Self::Error,
                        // The socket's (reset, closed): the network's, told apart by its type.
                        None => Box::new(e),
                    },
                ),
            }
        })
    }
}

/// A failure to set up or complete the TLS session, in the library's words.
#[derive(Debug)]
pub(super) struct Failed(String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

/// A TLS session with the server.
pub(in super::super) struct Stream(tokio_rustls::client::TlsStream<Socket>);

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl tokio_postgres::tls::TlsStream for Stream {
    /// `tls-server-end-point` (RFC 5929): the hash of the server's certificate, by the digest
    /// of its signature, SHA-256 for MD5 and SHA-1 (as the server computes it). None for a
    /// signature whose digest is not one of these (the server offers no binding then either).
    fn channel_binding(&self) -> ChannelBinding {
        let (_, session) = self.0.get_ref();
        session
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|cert| end_point(cert.as_ref()))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

/// The `tls-server-end-point` hash of a DER certificate.
fn end_point(cert: &[u8]) -> Option<Vec<u8>> {
    let digest = signature_digest(cert)?;
    Some(ring::digest::digest(digest, cert).as_ref().to_vec())
}

/// The digest for the channel binding of a DER certificate, from its `signatureAlgorithm`.
fn signature_digest(cert: &[u8]) -> Option<&'static ring::digest::Algorithm> {
    use ring::digest::{SHA256, SHA384, SHA512};
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE, signatureAlgorithm SEQUENCE {
    // algorithm OBJECT IDENTIFIER, parameters }, signatureValue BIT STRING }
    let (body, _) = der(cert, 0x30)?;
    let (_tbs, rest) = der(body, 0x30)?;
    let (algorithm, _) = der(rest, 0x30)?;
    let (oid, _) = der(algorithm, 0x06)?;
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01];
    const ECDSA_SHA2: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    match oid {
        // md5WithRSAEncryption, sha1WithRSAEncryption, sha256WithRSAEncryption
        [p @ .., 4 | 5 | 11] if p == RSA => Some(&SHA256),
        [p @ .., 12] if p == RSA => Some(&SHA384),
        [p @ .., 13] if p == RSA => Some(&SHA512),
        o if o == ECDSA_SHA1 => Some(&SHA256),
        [p @ .., 2] if p == ECDSA_SHA2 => Some(&SHA256),
        [p @ .., 3] if p == ECDSA_SHA2 => Some(&SHA384),
        [p @ .., 4] if p == ECDSA_SHA2 => Some(&SHA512),
        // RSA-PSS (its digest in the parameters), Ed25519, SHA-224: the server (OpenSSL's
        // X509_get_signature_nid) offers no binding for these either.
        _ => None,
    }
}

/// The contents of the DER element at the start of `input` if its tag is `tag`, and what
/// follows it.
fn der(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = input.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |l, &b| (l << 8) | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_binding_digest_is_the_signature_s() {
        // A certificate reduced to its outer structure: SEQUENCE { SEQUENCE {}, SEQUENCE {
        // OID } }, with a long-form length on the outside.
        fn cert(oid: &[u8]) -> Vec<u8> {
            let mut alg = vec![0x06, oid.len() as u8];
            alg.extend_from_slice(oid);
            let mut body = vec![0x30, 0x00, 0x30, alg.len() as u8];
            body.extend_from_slice(&alg);
            let mut out = vec![0x30, 0x81, body.len() as u8];
            out.extend_from_slice(&body);
            out
        }
        let rsa = |n: u8| cert(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, n]);
        let ec = |n: u8| cert(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, n]);
        let len = |c: Vec<u8>| signature_digest(&c).map(|d| d.output_len());
        assert_eq!(len(rsa(4)), Some(32)); // MD5: SHA-256
        assert_eq!(len(rsa(5)), Some(32)); // SHA-1: SHA-256
        assert_eq!(len(rsa(11)), Some(32));
        assert_eq!(len(rsa(12)), Some(48));
        assert_eq!(len(rsa(13)), Some(64));
        assert_eq!(len(rsa(10)), None); // RSA-PSS
        assert_eq!(
            len(cert(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01])),
            Some(32)
        );
        assert_eq!(len(ec(2)), Some(32));
        assert_eq!(len(ec(3)), Some(48));
        assert_eq!(len(ec(4)), Some(64));
        assert_eq!(len(cert(&[0x2b, 0x65, 0x70])), None); // Ed25519
        assert_eq!(signature_digest(&[0x30, 0x05, 0x30]), None);
    }
}
