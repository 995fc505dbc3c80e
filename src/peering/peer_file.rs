//! What a peer file says, once validated: the [`PeerSet`] of configured peers.
//!
//! A peer file (`peers/*.toml`) says whom to trust (a pinned certificate
//! fingerprint), where to dial (or nothing, for a peer that only dials in)
//! and what entity state may cross the link in each direction. The files are
//! read and their errors reported by the configuration (`config::peer_files`);
//! this module holds the validated values and the rules they obey, and must
//! not read files or open connections.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use uuid::Uuid;

use super::fingerprint::Fingerprint;
use super::peer_address::PeerAddress;
use crate::tundra::Registry;

/// Longest peer name; names appear in logs and hellos.
pub const MAX_PEER_NAME_LEN: usize = 64;

/// A peer's name as this node knows it (the peer file's `name`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerName(String);

impl PeerName {
    /// Checks the name rules: 1 to 64 ASCII letters, digits, `-`, `_`, `.`.
    pub fn new(name: &str) -> Option<PeerName> {
        let valid = !name.is_empty()
            && name.len() <= MAX_PEER_NAME_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        valid.then(|| PeerName(name.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PeerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Some of the configured peers, by peer-file name (for example whose
/// departing entities a node accepts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerChoice {
    All,
    /// Only these peers; empty: none.
    Only(BTreeSet<PeerName>),
}

impl PeerChoice {
    pub fn admits(&self, peer: &PeerName) -> bool {
        match self {
            PeerChoice::All => true,
            PeerChoice::Only(names) => names.contains(peer),
        }
    }
}

/// Which component types may cross the link in one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeFilter {
    /// Every type.
    All,
    /// Only these component type names (empty: nothing).
    Only(BTreeSet<String>),
}

impl TypeFilter {
    /// Whether `type_name` passes the filter.
    pub fn allows(&self, type_name: &str) -> bool {
        match self {
            TypeFilter::All => true,
            TypeFilter::Only(names) => names.contains(type_name),
        }
    }
}

/// Written before a type name a node knows only once a client registers it
/// (RegisterComponentType), so that name is not checked against the
/// built-in types: `"custom:EC_MyThing"`.
pub const CUSTOM_TYPE_PREFIX: &str = "custom:";
/// Written before the numeric id of a component type the node carries as
/// opaque bytes (`"opaque:25"`), as the federation names such types.
pub const OPAQUE_TYPE_PREFIX: &str = "opaque:";

impl TypeFilter {
    /// Checks every listed name against the built-in Tundra component types
    /// (`Placeable` or `EC_Placeable`, exactly as the federation matches
    /// them), `custom:NAME` or `opaque:ID`; returns the filter as it is
    /// matched (the `custom:` prefix removed). The error is the message for
    /// the key.
    pub fn checked(self, registry: &Registry) -> Result<TypeFilter, String> {
        let names = match self {
            TypeFilter::All => return Ok(TypeFilter::All),
            TypeFilter::Only(names) => names,
        };
        let mut checked = BTreeSet::new();
        for name in names {
            if let Some(custom) = name.strip_prefix(CUSTOM_TYPE_PREFIX) {
                if custom.trim().is_empty() {
                    return Err(format!("`{name}`: a custom type needs a name"));
                }
                checked.insert(custom.to_owned());
                continue;
            }
            if let Some(id) = name.strip_prefix(OPAQUE_TYPE_PREFIX) {
                if id.parse::<u32>().is_err() {
                    return Err(format!(
                        "`{name}`: an opaque type is `opaque:` and a numeric type id"
                    ));
                }
                checked.insert(name);
                continue;
            }
            let known = registry.get_by_name(&name);
            let exact = known.is_some_and(|schema| {
                !schema.custom && (name == schema.name || name == schema.prefixed_name())
            });
            if !exact {
                return Err(match known {
                    Some(schema) => format!(
                        "`{name}` is not a component type name: did you mean `{}`?",
                        schema.prefixed_name()
                    ),
                    None => format!(
                        "`{name}` is not a Tundra component type (see schemas/tundra/components.toml); a type clients register at run time is written `{CUSTOM_TYPE_PREFIX}{name}`"
                    ),
                });
            }
            checked.insert(name);
        }
        Ok(TypeFilter::Only(checked))
    }
}

/// One validated peer file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// The file it came from (for messages).
    pub source: PathBuf,
    /// The peer's name on this node.
    pub name: PeerName,
    /// The QUIC address to dial (a host name is resolved at each dial);
    /// `None` means wait for the peer to dial.
    pub control: Option<PeerAddress>,
    /// The only certificate accepted from this peer.
    pub fingerprint: Fingerprint,
    /// The peer's federation identity (its `[node] uuid`), when the file
    /// says it: two files naming one node are refused before start, and a
    /// peer whose Hello states another uuid is refused.
    pub uuid: Option<Uuid>,
    /// Types this node sends to the peer.
    pub export: TypeFilter,
    /// Types this node takes from the peer.
    pub accept: TypeFilter,
}

impl PeerConfig {
    /// Checks the uuid a connecting peer declares in its Hello against
    /// the one its file names (none named: any). The error is the reason
    /// the link is refused.
    pub fn check_declared(&self, declared: Uuid) -> Result<(), String> {
        match self.uuid {
            Some(expected) if expected != declared => Err(format!(
                "the peer's Hello says node uuid {declared}, its peer file {} says {expected}",
                self.source.display()
            )),
            _ => Ok(()),
        }
    }
}

/// A peer file that repeats another's name, fingerprint or uuid.
#[derive(Debug, thiserror::Error)]
#[error("{}: key `{key}`: already used by {}", file.display(), other.display())]
pub struct DuplicatePeer {
    /// The file refused.
    pub file: PathBuf,
    /// `name`, `fingerprint` or `uuid`.
    pub key: &'static str,
    /// The file that used it first.
    pub other: PathBuf,
}

/// Every configured peer, with unique names, fingerprints and uuids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSet {
    peers: Vec<PeerConfig>,
}

impl PeerSet {
    /// Adds a peer, refusing a second use of a name, fingerprint or uuid
    /// (an ambiguous pin would make the peer's identity depend on file
    /// order; two files naming one node would link it twice).
    pub fn insert(&mut self, peer: PeerConfig) -> Result<(), DuplicatePeer> {
        let clash = |key, other: &PeerConfig| DuplicatePeer {
            file: peer.source.clone(),
            key,
            other: other.source.clone(),
        };
        if let Some(other) = self.by_name(&peer.name) {
            return Err(clash("name", other));
        }
        if let Some(other) = self.by_fingerprint(&peer.fingerprint) {
            return Err(clash("fingerprint", other));
        }
        if let Some(other) = peer.uuid.and_then(|uuid| self.by_uuid(uuid)) {
            return Err(clash("uuid", other));
        }
        self.peers.push(peer);
        Ok(())
    }

    /// The peer with this name.
    pub fn by_name(&self, name: &PeerName) -> Option<&PeerConfig> {
        self.peers.iter().find(|peer| &peer.name == name)
    }

    /// The peer that pinned this fingerprint.
    pub fn by_fingerprint(&self, fingerprint: &Fingerprint) -> Option<&PeerConfig> {
        self.peers
            .iter()
            .find(|peer| &peer.fingerprint == fingerprint)
    }

    /// The peer whose file names this node uuid.
    pub fn by_uuid(&self, uuid: Uuid) -> Option<&PeerConfig> {
        self.peers.iter().find(|peer| peer.uuid == Some(uuid))
    }

    /// All peers, in file-name order.
    pub fn iter(&self) -> impl Iterator<Item = &PeerConfig> {
        self.peers.iter()
    }

    /// Number of peers.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether no peer is configured.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}
