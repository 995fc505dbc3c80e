//! Reading peer files (`peers/*.toml`) into the peering layer's
//! [`PeerConfig`] and [`PeerSet`].
//!
//! Every error names the file, the key and what is wrong, in the shape of
//! every other configuration error; the values and their rules (name syntax,
//! unique pins, type filters) belong to `crate::peering::peer_file`.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;

use super::ConfigError;
use crate::peering::fingerprint::Fingerprint;
use crate::peering::peer_address::PeerAddress;
use crate::peering::peer_file::{PeerConfig, PeerName, PeerSet, TypeFilter};
use crate::tundra::Registry;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    name: String,
    /// Read as text and checked by `PeerAddress::parse`: an IP or a
    /// host name, with a port.
    control: Option<String>,
    fingerprint: Fingerprint,
    /// The peer's `[node] uuid`; optional.
    uuid: Option<uuid::Uuid>,
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
            toml::from_str(text).map_err(|error| super::parse_error(path, text, &error))?;
        let name = PeerName::new(&raw.name).ok_or_else(|| ConfigError::Invalid {
            file: path.to_owned(),
            key: "name",
            message: "must be 1 to 64 letters, digits, '-', '_' or '.'".to_owned(),
        })?;
        let control = raw
            .control
            .as_deref()
            .map(PeerAddress::parse)
            .transpose()
            .map_err(|message| ConfigError::Invalid {
                file: path.to_owned(),
                key: "control",
                message,
            })?;
        if raw.uuid.is_some_and(|uuid| uuid.is_nil()) {
            return Err(ConfigError::Invalid {
                file: path.to_owned(),
                key: "uuid",
                message: "must be the peer's `[node] uuid`, not the nil UUID".to_owned(),
            });
        }
        let registry = Registry::builtin();
        Ok(PeerConfig {
            source: path.to_owned(),
            name,
            control,
            fingerprint: raw.fingerprint,
            uuid: raw.uuid,
            export: filter(path, "export", raw.export, &registry)?,
            accept: filter(path, "accept", raw.accept, &registry)?,
        })
    }
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
            set.insert(PeerConfig::parse(&path, &text)?)
                .map_err(|duplicate| ConfigError::Invalid {
                    message: match duplicate.key {
                        "uuid" => format!(
                            "already used by {}: two peer files name one node; keep the one that pins the node's certificate",
                            duplicate.other.display()
                        ),
                        _ => format!("already used by {}", duplicate.other.display()),
                    },
                    file: duplicate.file,
                    key: duplicate.key,
                })?;
        }
        Ok(set)
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
        assert_eq!(
            peer.control,
            Some(PeerAddress::Ip("127.0.0.1:7201".parse().unwrap()))
        );
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

    #[test]
    fn two_files_naming_one_node_are_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let uuid = "a2d4e6f8-1b3c-4d5e-8f70-9a1b2c3d4e02";
        let other = "sha256:".to_owned() + &"cd".repeat(32);
        std::fs::write(
            dir.path().join("beta.toml"),
            format!("name = \"beta\"\nfingerprint = \"{FINGERPRINT}\"\nuuid = \"{uuid}\"\n"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("old-beta.toml"),
            format!("name = \"old-beta\"\nfingerprint = \"{other}\"\nuuid = \"{uuid}\"\n"),
        )
        .unwrap();
        let error = PeerSet::load_dir(dir.path()).unwrap_err().to_string();
        let first = dir.path().join("beta.toml").display().to_string();
        let second = dir.path().join("old-beta.toml").display().to_string();
        assert!(
            error.starts_with(&format!("{second}: key `uuid`: already used by {first}")),
            "{error}"
        );
        assert!(error.contains("two peer files name one node"), "{error}");
        // Without uuids (or with different ones) both load.
        std::fs::write(
            dir.path().join("old-beta.toml"),
            format!("name = \"old-beta\"\nfingerprint = \"{other}\"\n"),
        )
        .unwrap();
        let set = PeerSet::load_dir(dir.path()).unwrap();
        assert_eq!(set.len(), 2);
        assert!(set.by_uuid(uuid.parse().unwrap()).is_some());
    }

    #[test]
    fn a_uuid_is_a_real_one_and_checked_against_the_hello() {
        let error = parse(&format!(
            "name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\nuuid = \"00000000-0000-0000-0000-000000000000\"\n"
        ))
        .unwrap_err();
        assert!(error.contains("key `uuid`"), "{error}");
        let named: uuid::Uuid = "a2d4e6f8-1b3c-4d5e-8f70-9a1b2c3d4e02".parse().unwrap();
        let peer = parse(&format!(
            "name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\nuuid = \"{named}\"\n"
        ))
        .unwrap();
        assert_eq!(peer.check_declared(named), Ok(()));
        let other = uuid::Uuid::from_u128(7);
        let refusal = peer.check_declared(other).unwrap_err();
        assert!(
            refusal.contains(&other.to_string()) && refusal.contains(&named.to_string()),
            "{refusal}"
        );
        // A file without a uuid takes whatever the certificate's node says.
        let open = parse(&format!("name = \"b\"\nfingerprint = \"{FINGERPRINT}\"\n")).unwrap();
        assert_eq!(open.check_declared(other), Ok(()));
    }
}
