//! A node's identity on the peer link: its private key and self-signed
//! certificate (docs/peer-link.md §3).
//!
//! This module creates identities (with the system random source, hence its
//! place in `transport`) and loads them from PEM files. Whom to trust is
//! decided elsewhere, by fingerprint pinning.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::tls::{load_pair, PairError, TlsError};
use crate::peering::fingerprint::Fingerprint;

/// A node's certificate and key, ready for rustls.
#[derive(Debug)]
pub struct NodeIdentity {
    /// The self-signed certificate presented in both TLS roles.
    pub certificate: CertificateDer<'static>,
    /// The certificate's private key.
    pub key: PrivateKeyDer<'static>,
    /// What peers pin: SHA-256 of `certificate`.
    pub fingerprint: Fingerprint,
}

impl Clone for NodeIdentity {
    fn clone(&self) -> Self {
        NodeIdentity {
            certificate: self.certificate.clone(),
            key: self.key.clone_key(),
            fingerprint: self.fingerprint,
        }
    }
}

/// A freshly generated identity in PEM form.
#[derive(Debug, Clone)]
pub struct GeneratedIdentity {
    pub certificate_pem: String,
    pub key_pem: String,
    pub fingerprint: Fingerprint,
}

/// Errors creating or writing an identity; each names the file if there is one.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("cannot generate a certificate for `{name}`: {source}")]
    Generate { name: String, source: rcgen::Error },
    #[error("{file}: already exists (pass --force to replace it)")]
    Exists { file: PathBuf },
    #[error("{file}: cannot write: {source}")]
    Write {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl GeneratedIdentity {
    /// Converts to the DER form rustls takes.
    pub fn to_node_identity(&self) -> NodeIdentity {
        use rustls::pki_types::pem::PemObject;
        // Both PEM texts were produced by rcgen a moment ago, so they parse.
        let certificate = CertificateDer::from_pem_slice(self.certificate_pem.as_bytes())
            .expect("rcgen emits a valid PEM certificate");
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .expect("rcgen emits a valid PEM private key");
        NodeIdentity {
            certificate,
            key,
            fingerprint: self.fingerprint,
        }
    }
}

/// Generates an ECDSA P-256 key and a self-signed certificate whose subject
/// common name and subject alternative name are `name`, so the certificate
/// says whose it is (`openssl x509 -subject`). Its contents beyond the key
/// do not matter to peers: they pin the whole certificate by fingerprint.
pub fn generate(name: &str) -> Result<GeneratedIdentity, IdentityError> {
    let error = |source| IdentityError::Generate {
        name: name.to_owned(),
        source,
    };
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(error)?;
    let mut subject = rcgen::DistinguishedName::new();
    subject.push(rcgen::DnType::CommonName, name);
    params.distinguished_name = subject;
    let key_pair = rcgen::KeyPair::generate().map_err(error)?;
    let cert = params.self_signed(&key_pair).map_err(error)?;
    Ok(GeneratedIdentity {
        certificate_pem: cert.pem(),
        key_pem: key_pair.serialize_pem(),
        fingerprint: Fingerprint::of_certificate(cert.der()),
    })
}

/// The certificate and key file paths `keygen` uses for `name` in `dir`.
pub fn identity_paths(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{name}.cert.pem")),
        dir.join(format!("{name}.key.pem")),
    )
}

/// Generates an identity and writes `NAME.cert.pem` and `NAME.key.pem` into
/// `dir` (created if missing), with `name` as the certificate's subject.
pub fn generate_into(
    dir: &Path,
    name: &str,
    overwrite: bool,
) -> Result<(PathBuf, PathBuf, Fingerprint), IdentityError> {
    generate_for_node_into(dir, name, name, overwrite)
}

/// Generates an identity for node `node` (the certificate's subject) and
/// writes `NAME.cert.pem` and `NAME.key.pem` into `dir` (created if
/// missing). The key file is readable by its owner only.
pub fn generate_for_node_into(
    dir: &Path,
    name: &str,
    node: &str,
    overwrite: bool,
) -> Result<(PathBuf, PathBuf, Fingerprint), IdentityError> {
    let identity = generate(node)?;
    let (cert_path, key_path) = identity_paths(dir, name);
    std::fs::create_dir_all(dir).map_err(|source| IdentityError::Write {
        file: dir.to_owned(),
        source,
    })?;
    if !overwrite {
        for path in [&cert_path, &key_path] {
            if path.exists() {
                return Err(IdentityError::Exists { file: path.clone() });
            }
        }
    }
    write_file(&key_path, identity.key_pem.as_bytes(), true)?;
    write_file(&cert_path, identity.certificate_pem.as_bytes(), false)?;
    Ok((cert_path, key_path, identity.fingerprint))
}

fn write_file(path: &Path, contents: &[u8], private: bool) -> Result<(), IdentityError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let wrap = |source| IdentityError::Write {
        file: path.to_owned(),
        source,
    };
    let mut file = options.open(path).map_err(wrap)?;
    file.write_all(contents).map_err(wrap)
}

/// Loads a node identity from its PEM certificate and key files, checking
/// that the key is the certificate's. Only the first certificate of the
/// file is used: peers pin exactly one.
pub fn load(cert: &Path, key: &Path) -> Result<NodeIdentity, PairError> {
    let (mut certificates, key) = load_pair(cert, key)?;
    // `load_pair` refuses a file without a certificate.
    let certificate = certificates.swap_remove(0);
    let fingerprint = Fingerprint::of_certificate(&certificate);
    Ok(NodeIdentity {
        certificate,
        key,
        fingerprint,
    })
}

/// The fingerprint of the first certificate of a PEM file, without its
/// key: what `lessgate keygen --show` prints and `lessgate check` compares
/// with peer files.
pub fn certificate_fingerprint(cert: &Path) -> Result<Fingerprint, TlsError> {
    let certificates = super::tls::load_certificates(cert)?;
    // `load_certificates` refuses a file without a certificate.
    Ok(Fingerprint::of_certificate(&certificates[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_identity_loads_with_the_printed_fingerprint() {
        let dir = std::env::temp_dir().join(format!("lessgate-keygen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (cert, key, fingerprint) = generate_into(&dir, "alpha", false).unwrap();
        let loaded = load(&cert, &key).unwrap();
        assert_eq!(loaded.fingerprint, fingerprint);
        let again = generate_into(&dir, "alpha", false).unwrap_err().to_string();
        assert!(again.contains("already exists"), "{again}");
        let (_, _, replaced) = generate_into(&dir, "alpha", true).unwrap();
        assert_ne!(replaced, fingerprint, "a new key gives a new fingerprint");
        assert_eq!(certificate_fingerprint(&cert).unwrap(), replaced);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_certificate_subject_is_the_node_name() {
        let identity = generate("alpha-1").unwrap();
        let der = identity.to_node_identity().certificate;
        // The subject's common name is a UTF8String (tag 0x0c) or a
        // PrintableString (0x13) right after the CN attribute type 2.5.4.3.
        let common_name = [0x06, 0x03, 0x55, 0x04, 0x03];
        let at = der
            .windows(common_name.len())
            .position(|w| w == common_name)
            .expect("the certificate has a common name");
        let value = &der[at + common_name.len()..];
        assert!(matches!(value[0], 0x0c | 0x13), "{:#x}", value[0]);
        assert_eq!(&value[2..2 + usize::from(value[1])], b"alpha-1");
        let text = String::from_utf8_lossy(&der);
        assert!(!text.contains("rcgen self signed cert"));
    }
}
