//! The files a node configuration names: the wss:// certificate and key,
//! the peer-link identity and the peer files. Each is read and checked here,
//! and each error names the node file, the key that names the file, and the
//! file itself, so `lessgate run` fails before it opens a socket with a
//! message an operator can act on.
//!
//! One broken peer file stops the node from starting: a node that came up
//! without a peer its operator listed would look healthy while that link
//! silently never forms.

use std::path::Path;
use std::sync::Arc;

use super::{ConfigError, NodeConfig};
use crate::peering::peer_file::PeerSet;
use crate::transport::identity::{self, NodeIdentity};
use crate::transport::tls::{self, PairError};

impl NodeConfig {
    /// Reads and checks every file the configuration names (TLS material,
    /// identity, peer files). `run` calls it before starting anything; the
    /// runtime reads the same files through the functions below.
    pub fn check_files(&self) -> Result<(), ConfigError> {
        self.tundra_tls()?;
        if self.peering.is_some() {
            let identity = self.peer_identity()?;
            self.peer_set(&identity)?;
        }
        Ok(())
    }

    /// The wss:// server configuration from `tundra.tls_cert` and
    /// `tundra.tls_key`; `None` when the listener is plain ws://.
    pub fn tundra_tls(&self) -> Result<Option<Arc<rustls::ServerConfig>>, ConfigError> {
        let (Some(cert), Some(key)) = (&self.tundra.tls_cert, &self.tundra.tls_key) else {
            return Ok(None);
        };
        let pair = tls::load_pair(cert, key)
            .map_err(|error| self.pair_error(error, "tundra.tls_cert", "tundra.tls_key"))?;
        tls::server_config(pair)
            .map(Some)
            .map_err(|error| self.invalid("tundra.tls_cert", error.to_string()))
    }

    /// The node's peer-link identity from `peering.certificate` and
    /// `peering.private_key`.
    pub fn peer_identity(&self) -> Result<NodeIdentity, ConfigError> {
        let peering = self.peering_section()?;
        identity::load(&peering.certificate, &peering.private_key)
            .map_err(|error| self.pair_error(error, "peering.certificate", "peering.private_key"))
    }

    /// The peer files of `peering.peers_dir`; none may pin `identity`.
    pub fn peer_set(&self, identity: &NodeIdentity) -> Result<PeerSet, ConfigError> {
        let peering = self.peering_section()?;
        let peers = PeerSet::load_dir(&peering.peers_dir).map_err(|error| match error {
            // The directory itself: name the key that points at it.
            ConfigError::Read { file, source } if file == peering.peers_dir => {
                self.invalid("peering.peers_dir", format!("{}: {source}", file.display()))
            }
            other => other,
        })?;
        if let Some(own) = peers.by_fingerprint(&identity.fingerprint) {
            return Err(ConfigError::Invalid {
                file: own.source.clone(),
                key: "fingerprint",
                message: "is this node's own certificate: pin the peer's (`lessgate keygen --show` on the peer prints it)".to_owned(),
            });
        }
        if let Some(own) = self.node.uuid.and_then(|uuid| peers.by_uuid(uuid)) {
            return Err(ConfigError::Invalid {
                file: own.source.clone(),
                key: "uuid",
                message: format!(
                    "is this node's own `node.uuid` ({}): give the peer's",
                    self.file().display()
                ),
            });
        }
        Ok(peers)
    }

    fn peering_section(&self) -> Result<&super::PeeringSection, ConfigError> {
        self.peering
            .as_ref()
            .ok_or_else(|| self.invalid("peering", "the [peering] section is missing".to_owned()))
    }

    fn file(&self) -> &Path {
        self.source
            .as_deref()
            .unwrap_or_else(|| Path::new("<defaults>"))
    }

    pub(super) fn invalid(&self, key: &'static str, message: String) -> ConfigError {
        ConfigError::Invalid {
            file: self.file().to_owned(),
            key,
            message,
        }
    }

    /// Names the key whose file is at fault; a mismatch names both keys.
    fn pair_error(
        &self,
        error: PairError,
        certificate_key: &'static str,
        private_key_key: &'static str,
    ) -> ConfigError {
        match error {
            PairError::Certificate(error) => self.invalid(certificate_key, error.to_string()),
            PairError::Key(error) => self.invalid(private_key_key, error.to_string()),
            PairError::Mismatch { .. } => self.invalid(
                certificate_key,
                format!("{error} (`{private_key_key}`): give the key this certificate was made with, or make a new pair with `lessgate keygen`"),
            ),
        }
    }
}
