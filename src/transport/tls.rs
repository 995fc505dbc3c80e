//! Loading PEM certificates and keys into rustls configurations.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{Error, InconsistentKeys};

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

/// What is wrong with a certificate file and its key file, by file.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// The certificate file is unreadable or holds no usable certificate.
    #[error(transparent)]
    Certificate(TlsError),
    /// The key file is unreadable or holds no key the crypto provider takes.
    #[error(transparent)]
    Key(TlsError),
    /// Both parse, but the key is not the certificate's.
    #[error("{certificate}: does not match the private key in {key}")]
    Mismatch { certificate: String, key: String },
}

/// A certificate chain and its private key, both checked.
pub type CertifiedPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Reads a PEM certificate chain and its private key, and checks what the
/// TLS stack would otherwise find only later (and report without a file
/// name): that the key is usable and belongs to the first certificate.
pub fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedPair, PairError> {
    let certificates = load_certificates(cert).map_err(PairError::Certificate)?;
    let key_der = load_private_key(key).map_err(PairError::Key)?;
    let signing_key = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key_der.clone_key())
        .map_err(|error| {
            PairError::Key(TlsError::File {
                file: key.display().to_string(),
                message: format!("not a usable private key: {error}"),
            })
        })?;
    let certified = rustls::sign::CertifiedKey::new(certificates, signing_key);
    match certified.keys_match() {
        // `Unknown`: the key cannot tell its public half; rustls accepts that too.
        Ok(()) | Err(Error::InconsistentKeys(InconsistentKeys::Unknown)) => {}
        Err(Error::InconsistentKeys(_)) => {
            return Err(PairError::Mismatch {
                certificate: cert.display().to_string(),
                key: key.display().to_string(),
            })
        }
        Err(error) => {
            return Err(PairError::Certificate(TlsError::File {
                file: cert.display().to_string(),
                message: format!("bad certificate: {error}"),
            }))
        }
    }
    Ok((certified.cert, key_der))
}

/// A server configuration for wss:// from a checked certificate chain and key.
pub fn server_config(pair: CertifiedPair) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (certificates, key) = pair;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certificates, key)?;
    Ok(Arc::new(config))
}
