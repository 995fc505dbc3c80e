//! Peer files: one `*.toml` per peer in the node's peers directory, parsed
//! and validated once into a [`PeerSet`].
//!
//! A peer file says whom to trust (a pinned certificate fingerprint), where
//! to dial (or nothing, for a peer that only dials in) and what entity state
//! may cross the link in each direction. Every error names the file, the key
//! and what is wrong (`crate::config::ConfigError`). This module must not
//! open connections; the transport reads the set it builds.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::fingerprint::Fingerprint;
use crate::config::ConfigError;
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
    fn checked(self, registry: &Registry) -> Result<TypeFilter, String> {
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
    /// The QUIC address to dial; `None` means wait for the peer to dial.
    pub control: Option<SocketAddr>,
    /// The only certificate accepted from this peer.
    pub fingerprint: Fingerprint,
    /// Types this node sends to the peer.
    pub export: TypeFilter,
    /// Types this node takes from the peer.
    pub accept: TypeFilter,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    name: String,
    control: Option<SocketAddr>,
    fingerprint: Fingerprint,
    /// Read as plain TOML and converted by [`filter`], so that a bad value
    /// is reported under its key rather than as a bare parse error.
    export: Option<toml::Value>,
    accept: Option<toml::Value>,
}

/// The `export` or `accept` key: absent is `"all"`; the names are checked.
fn filter(
    path: &Path,
    key: &'static str,
    value: Option<toml::Value>,
    registry: &Registry,
) -> Result<TypeFilter, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        file: path.to_owned(),
        key,
        message,
    };
    let Some(value) = value else {
        return Ok(TypeFilter::All);
    };
    let expected = "expected \"all\", \"none\" or a list of component type names";
    let parsed = match value {
        toml::Value::String(word) if word == "all" => TypeFilter::All,
        toml::Value::String(word) if word == "none" => TypeFilter::Only(BTreeSet::new()),
        toml::Value::Array(items) => {
            let mut names = BTreeSet::new();
            for item in items {
                match item {
                    toml::Value::String(name) => names.insert(name),
                    other => return Err(invalid(format!("{expected}, found {other} in the list"))),
                };
            }
            TypeFilter::Only(names)
        }
        other => return Err(invalid(format!("{expected}, found {other}"))),
    };
    parsed.checked(registry).map_err(invalid)
}

impl PeerConfig {
    /// Parses one peer file's text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<PeerConfig, ConfigError> {
        let raw: RawPeer =
            toml::from_str(text).map_err(|error| crate::config::parse_error(path, text, &error))?;
        let name = PeerName::new(&raw.name).ok_or_else(|| ConfigError::Invalid {
            file: path.to_owned(),
            key: "name",
            message: "must be 1 to 64 letters, digits, '-', '_' or '.'".to_owned(),
        })?;
        if let Some(control) = raw.control {
            if control.port() == 0 || control.ip().is_unspecified() {
                return Err(ConfigError::Invalid {
                    file: path.to_owned(),
                    key: "control",
                    message: "must be a dialable address (no port 0, no 0.0.0.0 or ::)".to_owned(),
                });
            }
        }
        let registry = Registry::builtin();
        Ok(PeerConfig {
            source: path.to_owned(),
            name,
            control: raw.control,
            fingerprint: raw.fingerprint,
            export: filter(path, "export", raw.export, &registry)?,
            accept: filter(path, "accept", raw.accept, &registry)?,
        })
    }
}

/// Every configured peer, with unique names and fingerprints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerSet {
    peers: Vec<PeerConfig>,
}

impl PeerSet {
    /// Reads every `*.toml` file of `dir` (other files are ignored), in name order.
    pub fn load_dir(dir: &Path) -> Result<PeerSet, ConfigError> {
        let read_error = |source| ConfigError::Read {
            file: dir.to_owned(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read_error)? {
            let path = entry.map_err(read_error)?.path();
            if path.extension().is_some_and(|ext| ext == "toml") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        let mut set = PeerSet::default();
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
                file: path.clone(),
                source,
            })?;
            set.insert(PeerConfig::parse(&path, &text)?)?;
        }
        Ok(set)
    }

    /// Adds a peer, refusing a second use of a name or fingerprint (an
    /// ambiguous pin would make the peer's identity depend on file order).
    pub fn insert(&mut self, peer: PeerConfig) -> Result<(), ConfigError> {
        let clash = |key, other: &PeerConfig| ConfigError::Invalid {
            file: peer.source.clone(),
            key,
            message: format!("already used by {}", other.source.display()),
        };
        if let Some(other) = self.by_name(&peer.name) {
            return Err(clash("name", other));
        }
        if let Some(other) = self.by_fingerprint(&peer.fingerprint) {
            return Err(clash("fingerprint", other));
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

#[cfg(test)]
mod tests {
    use super::*;

    const FINGERPRINT: &str =
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    fn parse(text: &str) -> Result<PeerConfig, String> {
        PeerConfig::parse(Path::new("peers/beta.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn full_peer_file_parses() {
        let text = format!(
            "name = \"beta\"\ncontrol = \"127.0.0.1:7201\"\nfingerprint = \"{FINGERPRINT}\"\n\
             export = [\"EC_Placeable\", \"EC_Name\"]\naccept = \"all\"\n"
        );
        let peer = parse(&text).unwrap();
        assert_eq!(peer.name.as_str(), "beta");
        assert_eq!(peer.control, Some("127.0.0.1:7201".parse().unwrap()));
        assert_eq!(peer.fingerprint.to_string(), FINGERPRINT);
        assert!(peer.export.allows("EC_Name"));
        assert!(!peer.export.allows("EC_Mesh"));
        assert!(peer.accept.allows("EC_Mesh"));
    }

    #[test]
    fn control_is_optional_and_filters_default_to_all() {
        let peer = parse(&format!(
            "name = \"gamma\"\nfingerprint = \"{FINGERPRINT}\"\n"
        ))
        .unwrap();
        assert_eq!(peer.control, None);
        assert_eq!(peer.export, TypeFilter::All);
        let none = parse(&format!(
            "name = \"g\"\nfingerprint = \"{FINGERPRINT}\"\naccept = \"none\"\n"
        ))
        .unwrap();
        assert!(!none.accept.allows("EC_Name"));
    }

    #[test]
    fn errors_name_file_and_key() {
        let cases = [
            (
                format!("name = \"b c\"\nfingerprint = \"{FINGERPRINT}\"\n"),
                "key `name`",
            ),
            (
                "name = \"b\"\nfingerprint = \"sha256:00\"\n".to_owned(),
                "fingerprint",
            ),
            (
                format!("name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\nexport = \"some\"\n"),
                "key `export`: expected \"all\", \"none\" or a list",
            ),
            (
                format!("name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\ncontrol = \"0.0.0.0:1\"\n"),
                "key `control`",
            ),
            (
                format!("name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\nadress = 1\n"),
                "adress",
            ),
            ("name = \"b\"\n".to_owned(), "fingerprint"),
        ];
        for (text, expected) in cases {
            let error = parse(&text).unwrap_err();
            assert!(error.starts_with("peers/beta.toml:"), "{error}");
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn type_names_are_checked_against_the_tundra_types() {
        let file =
            |filter: &str| format!("name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\n{filter}\n");
        for (filter, message) in [
            (
                "export = [\"EC_Placable\"]",
                "key `export`: `EC_Placable` is not a Tundra component type",
            ),
            (
                "accept = [\"EC_Name\", \"EC_Mseh\"]",
                "key `accept`: `EC_Mseh` is not a Tundra component type",
            ),
            (
                "export = [\"ec_placeable\"]",
                "key `export`: `ec_placeable` is not a component type name: did you mean `EC_Placeable`?",
            ),
            ("accept = [\"opaque:x\"]", "key `accept`: `opaque:x`"),
            ("accept = [\"custom:\"]", "key `accept`: `custom:`"),
        ] {
            let error = parse(&file(filter)).unwrap_err();
            assert!(error.starts_with("peers/beta.toml: "), "{error}");
            assert!(error.contains(message), "{filter}: {error}");
        }
        let peer = parse(&file(
            "export = [\"Placeable\", \"EC_Mesh\", \"custom:EC_Thing\", \"opaque:77\"]",
        ))
        .unwrap();
        for allowed in ["Placeable", "EC_Mesh", "EC_Thing", "opaque:77"] {
            assert!(peer.export.allows(allowed), "{allowed}");
        }
        assert!(!peer.export.allows("custom:EC_Thing"));
    }

    #[test]
    fn duplicate_fingerprint_is_refused() {
        let mut set = PeerSet::default();
        let text = format!("name = \"beta\"\nfingerprint = \"{FINGERPRINT}\"\n");
        set.insert(PeerConfig::parse(Path::new("a/beta.toml"), &text).unwrap())
            .unwrap();
        let other = text.replace("beta", "gamma");
        let error = set
            .insert(PeerConfig::parse(Path::new("a/gamma.toml"), &other).unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "a/gamma.toml: key `fingerprint`: already used by a/beta.toml"
        );
        assert_eq!(set.len(), 1);
    }
}
