//! TLS client configuration (rustls, ring backend) and plain-language TLS failures.
use crate::plan::TlsOptions;
use std::io;
use std::sync::Arc;
use tokio_rustls::rustls::{self, pki_types, ClientConfig, RootCertStore};

pub fn client_config(opts: &TlsOptions) -> Result<Arc<ClientConfig>, String> {
    let builder = ClientConfig::builder();
    let builder = if opts.insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyServer::new()))
    } else {
        let mut roots = RootCertStore::empty();
        match &opts.ca_file {
            Some(path) => {
                for cert in read_certs(path)? {
                    roots.add(cert).map_err(|e| format!("tls.ca {path}: {e}"))?;
                }
            }
            None => {
                // The system's trust store, as a browser would use.
                for cert in rustls_native_certs::load_native_certs().unwrap_or_default() {
                    let _ = roots.add(cert);
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    let config = match (&opts.cert_file, &opts.key_file) {
        (Some(cert), Some(key)) => {
            let certs = read_certs(cert)?;
            let key = read_key(key)?;
            builder.with_client_auth_cert(certs, key).map_err(|e| format!("tls.cert/key: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn read_certs(path: &str) -> Result<Vec<pki_types::CertificateDer<'static>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read certificate file {path}: {e}"))?;
    let certs: Result<Vec<_>, _> = rustls_pemfile::certs(&mut &data[..]).collect();
    let certs = certs.map_err(|e| format!("{path}: not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path}: no certificate found"));
    }
    Ok(certs)
}

fn read_key(path: &str) -> Result<pki_types::PrivateKeyDer<'static>, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read key file {path}: {e}"))?;
    rustls_pemfile::private_key(&mut &data[..]).map_err(|e| format!("{path}: not a PEM key: {e}"))?.ok_or_else(|| format!("{path}: no private key found"))
}

/// Names which check failed, for the one-line error a user sees.
pub fn describe_error(e: &io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => {
            let what = match c {
                rustls::CertificateError::UnknownIssuer => "the server certificate is signed by an unknown CA".to_string(),
                rustls::CertificateError::NotValidForName => "the server certificate is not valid for this host name".to_string(),
                rustls::CertificateError::Expired => "the server certificate has expired".to_string(),
                rustls::CertificateError::NotValidYet => "the server certificate is not valid yet".to_string(),
                rustls::CertificateError::Revoked => "the server certificate is revoked".to_string(),
                // The chain led to a trusted CA of the same name whose key did not sign it.
                rustls::CertificateError::BadSignature => "the server certificate was not signed by the given CA (bad signature)".to_string(),
                other => format!("invalid server certificate ({other:?})"),
            };
            format!("TLS handshake failed: {what}")
        }
        Some(other) => format!("TLS handshake failed: {other}"),
        None => format!("TLS handshake failed: {e}"),
    }
}

/// The certificate fault behind a failed handshake, as a name for programs (`describe_error` says
/// it for people).
pub fn certificate_fault(e: &io::Error) -> Option<&'static str> {
    match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(c)) => Some(match c {
            rustls::CertificateError::UnknownIssuer => "unknown_issuer",
            rustls::CertificateError::NotValidForName => "not_valid_for_name",
            rustls::CertificateError::Expired => "expired",
            rustls::CertificateError::NotValidYet => "not_valid_yet",
            rustls::CertificateError::Revoked => "revoked",
            rustls::CertificateError::BadSignature => "bad_signature",
            _ => "invalid",
        }),
        _ => None,
    }
}

/// Accepts any server certificate: only with `--insecure`, which the user asked for by name.
#[derive(Debug)]
struct AcceptAnyServer(Arc<rustls::crypto::CryptoProvider>);

impl AcceptAnyServer {
    fn new() -> Self {
        AcceptAnyServer(Arc::new(rustls::crypto::ring::default_provider()))
    }
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &pki_types::CertificateDer<'_>,
        _intermediates: &[pki_types::CertificateDer<'_>],
        _server_name: &pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
