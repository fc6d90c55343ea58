//! What the server's certificate must be, as rustls verifiers, and why a handshake failed.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use super::Verify;

/// No check of the server's certificate (`prefer`, `require`): the handshake's signatures are
/// still verified (the session is encrypted to whoever holds the certificate's key).
#[derive(Debug)]
pub(super) struct Unchecked(pub(super) Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain (signatures, validity dates, usage) checked against the roots, not
/// the name. The WebPKI verifier checks the chain first and the name last, so its name error
/// means the chain was good.
#[derive(Debug)]
pub(super) struct ChainOnly(pub(super) Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Why a handshake failed, for a message.
pub(super) fn explain(e: &rustls::Error, host: &str, verify: &Verify) -> String {
    use rustls::AlertDescription as Alert;
    let roots = match verify {
        Verify::Chain(r) | Verify::Full(r) => r.to_string(),
        Verify::Nothing => "no roots".to_string(),
    };
    let why = match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => format!(
                "the server's certificate is not signed by a CA this client trusts ({roots}); \
                 the server must also send its intermediate certificates"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the server's certificate has expired".to_string()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet".to_string()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "the server's certificate is not valid for the host {host} (sslmode=verify-full \
                     checks the name or IP address the client connects to)"
                )
            }
            CertificateError::Revoked => "the server's certificate is revoked".to_string(),
            _ => "the server's certificate is not acceptable".to_string(),
        },
        rustls::Error::AlertReceived(Alert::CertificateRequired) => {
            "the server requires a client certificate (sslcert and sslkey)".to_string()
        }
        rustls::Error::AlertReceived(
            Alert::BadCertificate | Alert::UnknownCA | Alert::CertificateUnknown,
        ) => "the server did not accept the client certificate".to_string(),
        rustls::Error::AlertReceived(Alert::CertificateExpired) => {
            "the server refused the client certificate: it has expired".to_string()
        }
        _ => "the TLS handshake failed".to_string(),
    };
    format!("{why} ({e})")
}
