//! Loading PEM certificates and keys into rustls configurations.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Errors loading TLS material; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("tls configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Reads a PEM certificate chain.
pub fn load_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_error = |message: String| TlsError::File {
        file: path.display().to_string(),
        message,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| file_error(format!("cannot read certificates: {error}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| file_error(format!("bad PEM certificate: {error}")))?;
    if certificates.is_empty() {
        return Err(file_error("no certificate found".to_owned()));
    }
    Ok(certificates)
}

/// Reads one PEM private key (PKCS#8, PKCS#1 or SEC1).
pub fn load_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| TlsError::File {
        file: path.display().to_string(),
        message: format!("cannot read private key: {error}"),
    })
}

/// A server configuration for wss:// from a certificate chain and its key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(load_certificates(cert)?, load_private_key(key)?)?;
    Ok(Arc::new(config))
}
