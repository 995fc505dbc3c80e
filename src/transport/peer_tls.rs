//! TLS for peer links: mutual authentication by pinned certificate
//! fingerprint, TLS 1.3 only, ALPN `lessgate/1` (docs/peer-link.md
//! sections 3 and 4).
//!
//! The verifiers replace chain-of-trust checks with one rule: the peer's
//! end-entity certificate must hash to a fingerprint a peer file pins. The
//! handshake signatures are still verified with the ring provider's
//! algorithms, so only the holder of the pinned certificate's private key
//! can complete a handshake. This module builds quinn configurations; it
//! opens no socket.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::identity::NodeIdentity;
use crate::peering::fingerprint::Fingerprint;

/// The ALPN protocol id of the peer link.
pub const ALPN: &[u8] = b"lessgate/1";
/// The TLS server name a dialer sends. Peers are identified by pin, not by
/// name, so one fixed name keeps SNI from leaking the peer's file name.
pub const SERVER_NAME: &str = "lessgate-peer";

/// Errors building a peer-link TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum PeerTlsError {
    #[error("tls configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("quic crypto configuration: {0}")]
    Quic(String),
}

/// Why a certificate was refused; carried inside the rustls error so both
/// the local log and the TLS alert's reason text say what happened.
#[derive(thiserror::Error)]
#[error("certificate {fingerprint} is not pinned {context}")]
pub struct NotPinned {
    pub fingerprint: Fingerprint,
    pub context: &'static str,
}

/// rustls and quinn print the error with `Debug`; show the sentence.
impl std::fmt::Debug for NotPinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Checks a presented certificate against the pins: parses it (a malformed
/// certificate is a bad encoding, not a pin miss) and hashes it.
fn check_pinned(
    end_entity: &CertificateDer<'_>,
    pinned: &HashSet<Fingerprint>,
    context: &'static str,
) -> Result<Fingerprint, rustls::Error> {
    rustls::server::ParsedCertificate::try_from(end_entity)?;
    let fingerprint = Fingerprint::of_certificate(end_entity);
    if pinned.contains(&fingerprint) {
        Ok(fingerprint)
    } else {
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(Arc::new(NotPinned {
                fingerprint,
                context,
            })),
        )))
    }
}

/// The signature checks both verifiers share.
#[derive(Debug)]
struct Signatures(WebPkiSupportedAlgorithms);

impl Signatures {
    fn new() -> Signatures {
        Signatures(provider().signature_verification_algorithms)
    }

    fn tls12(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn tls13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// Dialer side: accepts only the one fingerprint of the peer being dialled.
#[derive(Debug)]
pub struct PinnedServerVerifier {
    pinned: HashSet<Fingerprint>,
    signatures: Signatures,
}

impl PinnedServerVerifier {
    /// Trusts exactly `fingerprint`.
    pub fn new(fingerprint: Fingerprint) -> PinnedServerVerifier {
        PinnedServerVerifier {
            pinned: HashSet::from([fingerprint]),
            signatures: Signatures::new(),
        }
    }
}

impl ServerCertVerifier for PinnedServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        check_pinned(end_entity, &self.pinned, "for the dialled peer")?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.tls12(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.schemes()
    }
}

/// Listener side: demands a client certificate and accepts any fingerprint
/// pinned by a peer file.
#[derive(Debug)]
pub struct PinnedClientVerifier {
    pinned: HashSet<Fingerprint>,
    signatures: Signatures,
}

impl PinnedClientVerifier {
    /// Trusts the given fingerprints.
    pub fn new(pinned: impl IntoIterator<Item = Fingerprint>) -> PinnedClientVerifier {
        PinnedClientVerifier {
            pinned: pinned.into_iter().collect(),
            signatures: Signatures::new(),
        }
    }
}

impl ClientCertVerifier for PinnedClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        check_pinned(end_entity, &self.pinned, "by any peer file")?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.tls12(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.tls13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.schemes()
    }
}

/// QUIC transport settings shared by both roles: the control connection
/// idles out after `idle_timeout` and pings at a quarter of it; one
/// bidirectional stream (control) and one unidirectional stream (LESS data)
/// per side.
pub fn transport_config(idle_timeout: Duration) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(idle_timeout)
        .unwrap_or_else(|_| quinn::IdleTimeout::from(quinn::VarInt::from_u32(60_000)));
    transport.max_idle_timeout(Some(idle));
    transport.keep_alive_interval(Some(idle_timeout / 4));
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(1));
    transport.max_concurrent_uni_streams(quinn::VarInt::from_u32(1));
    transport.datagram_receive_buffer_size(None);
    transport
}

/// The listener's QUIC configuration: present our certificate, require a
/// pinned client certificate.
pub fn server_config(
    identity: &NodeIdentity,
    pinned: impl IntoIterator<Item = Fingerprint>,
    idle_timeout: Duration,
) -> Result<quinn::ServerConfig, PeerTlsError> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(Arc::new(PinnedClientVerifier::new(pinned)))
        .with_single_cert(vec![identity.certificate.clone()], identity.key.clone_key())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|error| PeerTlsError::Quic(error.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config(idle_timeout)));
    Ok(config)
}

/// A dialer's QUIC configuration for one peer: present our certificate,
/// accept only `peer`'s.
pub fn client_config(
    identity: &NodeIdentity,
    peer: Fingerprint,
    idle_timeout: Duration,
) -> Result<quinn::ClientConfig, PeerTlsError> {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedServerVerifier::new(peer)))
        .with_client_auth_cert(vec![identity.certificate.clone()], identity.key.clone_key())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|error| PeerTlsError::Quic(error.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport_config(idle_timeout)));
    Ok(config)
}

/// The fingerprint of the certificate a connected peer presented.
pub fn peer_fingerprint(connection: &quinn::Connection) -> Option<Fingerprint> {
    let identity = connection.peer_identity()?;
    let chain = identity.downcast::<Vec<CertificateDer<'static>>>().ok()?;
    chain.first().map(|cert| Fingerprint::of_certificate(cert))
}
