//! The asset storages a Tundra server advertises in a successful LoginReply
//! (docs/tundra-wire.md §4.2; docs/knet-wire.md §5.4): where the relative
//! asset references of its entities, meshes and materials resolve.
//!
//! One model, [`AssetStorages`], read from and written to both forms a
//! server uses: the JSON object WebSocket clients get
//! (`{"storage":{"default":true,"name":…,"src":…,"type":…}}`) and the XML
//! native clients get (`<asset>` with `<storage data="…" />` children and a
//! `<defaultStorage name="…" />`). Each storage is an AssetAPI storage
//! string's fields (`type=…;name=…;src=…`). Pure and total: any text gives a
//! model or an [`AssetStorageError`], never a panic, with bounded work and
//! memory; a model always writes, in either form, within the LoginReply's
//! `u16` data length.
//!
//! Only storages are kept. Other keys of the JSON object, and other elements
//! of the XML, are what a server's scripts add for the connection they
//! answer (the bridge's own); they are read past, never passed on.

use serde_json::Value;

use super::login_xml::{escape_attribute, DECLARATION};
use super::LoginDialect;

/// LoginReply data travels as a `u16` length + bytes, so neither a longer
/// reply nor a longer written form can exist on the wire.
pub const MAX_REPLY_BYTES: usize = u16::MAX as usize;

/// Most storages kept. A real server advertises a handful (its scene's
/// storage, its scripts', one per `--storage` option); 16 is ample and
/// bounds what a hostile reply makes the node hold and repeat to clients.
pub const MAX_STORAGES: usize = 16;

/// Most fields of one storage string. A LocalAssetStorage writes 9
/// (type, name, src and six flags).
pub const MAX_STORAGE_FIELDS: usize = 32;

/// XML nodes parsed at most: per storage an element and the whitespace text
/// before it, the default storage, and room for what scripts add. Bounds
/// roxmltree's node table far below what 64 KiB could describe.
const MAX_XML_NODES: u32 = 1024;

/// The JSON block of a server with no default storage: the shape a real
/// server sends, with empty values (keys in the order Qt writes them). What
/// a node without an asset storage of its own gives its WebSocket clients.
pub const NO_STORAGE_JSON: &str = r#"{"storage":{"default":true,"name":"","src":"","type":""}}"#;

/// Why LoginReply data gave no storages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssetStorageError {
    #[error("login reply data is not valid XML: {0}")]
    Xml(String),
    #[error("login reply data is not valid JSON: {0}")]
    Json(String),
    #[error("login reply data is not a JSON object")]
    NotAnObject,
    #[error("the storage block is not an object of strings")]
    StorageShape,
    #[error("login reply data is longer than {MAX_REPLY_BYTES} bytes")]
    TooLong,
    #[error("login reply data has more than {MAX_XML_NODES} XML nodes")]
    TooManyNodes,
    #[error("more than {MAX_STORAGES} asset storages")]
    TooManyStorages,
    #[error("an asset storage has more than {MAX_STORAGE_FIELDS} fields")]
    TooManyFields,
    #[error("asset storage field {0:?} is not key=value")]
    BadField(String),
    #[error("asset storage has no src")]
    NoSource,
    #[error("asset storage key or value contains ';' or '='")]
    Unwritable,
    #[error("the asset storages would not fit in a LoginReply")]
    TooLarge,
}

/// One asset storage: the fields of its AssetAPI storage string, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetStorage {
    fields: Vec<(String, String)>,
}

impl AssetStorage {
    /// Reads a storage string as `AssetAPI::ParseAssetStorageString` does:
    /// trimmed (each key and value too); one trailing `;` dropped; a string with neither `;` nor `=`
    /// is a bare `src`; empty parts skipped; a part with more than one `=`
    /// fails the whole string; a key without `=` is the flag `key=1`; a
    /// repeated key keeps its last value. A storage needs a non-empty `src`
    /// (no AssetAPI storage type works without one).
    pub fn parse(text: &str) -> Result<AssetStorage, AssetStorageError> {
        let text = text.trim();
        let text = text.strip_suffix(';').unwrap_or(text);
        if !text.contains([';', '=']) {
            return AssetStorage::from_fields([("src".to_owned(), text.to_owned())]);
        }
        let mut fields = Vec::new();
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let (key, value) = match part.split_once('=') {
                Some((_, value)) if value.contains('=') => {
                    return Err(AssetStorageError::BadField(part.to_owned()))
                }
                Some((key, value)) => (key, value),
                None => (part, "1"),
            };
            fields.push((key.to_owned(), value.to_owned()));
            if fields.len() > MAX_STORAGE_FIELDS {
                return Err(AssetStorageError::TooManyFields);
            }
        }
        AssetStorage::from_fields(fields)
    }

    /// A storage from its fields, in order (a repeated key keeps its first
    /// place and its last value; keys and values are trimmed). Refused without a `src`, with more than
    /// [`MAX_STORAGE_FIELDS`], or with a `;` or `=` that would change its
    /// meaning when written as a storage string.
    pub fn from_fields(
        given: impl IntoIterator<Item = (String, String)>,
    ) -> Result<AssetStorage, AssetStorageError> {
        let mut fields: Vec<(String, String)> = Vec::new();
        for (key, value) in given {
            // Outer white space would not survive a round trip (a storage
            // string is read trimmed) and means nothing in a name or URL.
            let (key, value) = (key.trim().to_owned(), value.trim().to_owned());
            if key.contains([';', '=']) || value.contains([';', '=']) {
                return Err(AssetStorageError::Unwritable);
            }
            if let Some(field) = fields.iter_mut().find(|(k, _)| *k == key) {
                field.1 = value;
            } else if fields.len() == MAX_STORAGE_FIELDS {
                return Err(AssetStorageError::TooManyFields);
            } else {
                fields.push((key, value));
            }
        }
        let storage = AssetStorage { fields };
        if storage.src().is_empty() {
            return Err(AssetStorageError::NoSource);
        }
        Ok(storage)
    }

    /// The value of `key`, if the storage has it.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every field, in order.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// The storage's name (empty if it has none).
    pub fn name(&self) -> &str {
        self.field("name").unwrap_or_default()
    }

    /// Where its assets are: a base URL or a directory.
    pub fn src(&self) -> &str {
        self.field("src").unwrap_or_default()
    }

    /// Its AssetAPI type (`HttpAssetStorage`, `LocalAssetStorage`, …;
    /// empty if unnamed, when AssetAPI guesses it from `src`).
    pub fn kind(&self) -> &str {
        self.field("type").unwrap_or_default()
    }

    /// Whether it is a directory on the server's own host: a
    /// LocalAssetStorage, or a storage of no type whose `src` is not a URL
    /// (AssetAPI then takes it as a local directory).
    pub fn is_local(&self) -> bool {
        match self.kind() {
            "LocalAssetStorage" => true,
            "" => !self.src().contains("://"),
            _ => false,
        }
    }

    /// The storage string: `key=value` fields joined by `;`.
    pub fn to_storage_string(&self) -> String {
        let mut out = String::new();
        for (index, (key, value)) in self.fields.iter().enumerate() {
            if index > 0 {
                out.push(';');
            }
            out.push_str(key);
            out.push('=');
            out.push_str(value);
        }
        out
    }
}

/// The asset storages a server advertises, and the name of its default one.
/// [`AssetStorages::none`] is a server without any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssetStorages {
    storages: Vec<AssetStorage>,
    /// May name a storage that is not listed: a native client looks it up
    /// among its own storages too (the captured reply names `Javascript`).
    default: Option<String>,
}

impl AssetStorages {
    /// No storage: the empty JSON storage block and `<asset />`.
    pub const fn none() -> AssetStorages {
        AssetStorages {
            storages: Vec::new(),
            default: None,
        }
    }

    /// Storages and a default name (an empty name is no default). Refused
    /// when there are more than [`MAX_STORAGES`] or when either written
    /// form would not fit in a LoginReply.
    pub fn new(
        storages: Vec<AssetStorage>,
        default: Option<String>,
    ) -> Result<AssetStorages, AssetStorageError> {
        if storages.len() > MAX_STORAGES {
            return Err(AssetStorageError::TooManyStorages);
        }
        let model = AssetStorages {
            storages,
            default: default.filter(|name| !name.is_empty()),
        };
        if model.to_xml().len() > MAX_REPLY_BYTES || model.to_json().len() > MAX_REPLY_BYTES {
            return Err(AssetStorageError::TooLarge);
        }
        Ok(model)
    }

    /// Every storage, in the order the server listed them.
    pub fn storages(&self) -> &[AssetStorage] {
        &self.storages
    }

    /// The default storage's name, if the server names one.
    pub fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The default storage, when it is one of the listed storages.
    pub fn default_storage(&self) -> Option<&AssetStorage> {
        let name = self.default.as_deref()?;
        self.storages.iter().find(|s| s.name() == name)
    }

    /// What a client on another host than the server is told of: a real
    /// server lists local storages (directories on its host) only to
    /// clients on its own host, and names a local default storage only to
    /// them (`AssetModule::ServerNewUserConnected`). A default that is not
    /// listed is kept: whether it is local is not known, and a client only
    /// looks it up among storages it has.
    pub fn for_remote_host(&self) -> AssetStorages {
        let default_is_local = self.default_storage().is_some_and(AssetStorage::is_local);
        AssetStorages {
            storages: self
                .storages
                .iter()
                .filter(|s| !s.is_local())
                .cloned()
                .collect(),
            default: self.default.clone().filter(|_| !default_is_local),
        }
    }

    /// Whether there is nothing to advertise.
    pub fn is_empty(&self) -> bool {
        self.storages.is_empty() && self.default.is_none()
    }

    /// Reads a successful LoginReply's data in `dialect`'s form.
    pub fn parse_reply(
        data: &str,
        dialect: LoginDialect,
    ) -> Result<AssetStorages, AssetStorageError> {
        match dialect {
            LoginDialect::Json => AssetStorages::parse_json(data),
            LoginDialect::Xml => AssetStorages::parse_xml(data),
        }
    }

    /// The LoginReply data for a client speaking `dialect`.
    pub fn reply_data(&self, dialect: LoginDialect) -> String {
        match dialect {
            LoginDialect::Json => self.to_json(),
            LoginDialect::Xml => self.to_xml(),
        }
    }

    /// Reads the JSON a WebSocket client gets: a `storage` object with
    /// `name`, `src` and `type` strings (missing ones empty), the default
    /// storage when `default` is true. No `storage` key, or an empty `src`
    /// (the block a server without a storage sends), is no storage. Other
    /// keys are read past.
    pub fn parse_json(text: &str) -> Result<AssetStorages, AssetStorageError> {
        if text.len() > MAX_REPLY_BYTES {
            return Err(AssetStorageError::TooLong);
        }
        // serde_json refuses nesting deeper than 128 levels: no deep recursion.
        let value: Value =
            serde_json::from_str(text).map_err(|e| AssetStorageError::Json(e.to_string()))?;
        let object = value.as_object().ok_or(AssetStorageError::NotAnObject)?;
        let Some(storage) = object.get("storage") else {
            return Ok(AssetStorages::none());
        };
        let storage = storage.as_object().ok_or(AssetStorageError::StorageShape)?;
        let text_of = |key: &str| match storage.get(key) {
            None => Ok(String::new()),
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(AssetStorageError::StorageShape),
        };
        let (kind, name, src) = (text_of("type")?, text_of("name")?, text_of("src")?);
        if src.is_empty() {
            return Ok(AssetStorages::none());
        }
        let is_default = storage.get("default") == Some(&Value::Bool(true));
        // The fields in the order a storage string has them; empty ones left
        // out, so a native client's AssetAPI guesses the type from `src`.
        let fields = [("type", kind), ("name", name.clone()), ("src", src)]
            .into_iter()
            .filter(|(_, value)| !value.is_empty())
            .map(|(key, value)| (key.to_owned(), value));
        let storage = AssetStorage::from_fields(fields)?;
        AssetStorages::new(vec![storage], is_default.then_some(name))
    }

    /// Writes the JSON a real server gives WebSocket clients: its default
    /// storage, compact, keys in Qt's order. It holds one storage only, so
    /// without a listed default storage it is [`NO_STORAGE_JSON`].
    pub fn to_json(&self) -> String {
        let Some(storage) = self.default_storage() else {
            return NO_STORAGE_JSON.to_owned();
        };
        let quoted = |text: &str| Value::String(text.to_owned()).to_string();
        format!(
            r#"{{"storage":{{"default":true,"name":{},"src":{},"type":{}}}}}"#,
            quoted(storage.name()),
            quoted(storage.src()),
            quoted(storage.kind())
        )
    }

    /// Reads the XML a native client gets, as `AssetModule`'s client side
    /// does: the root must be `asset` (any other root is no storage); each
    /// `storage` child's `data` is a storage string, one that does not parse
    /// is skipped (the client skips it too); the first `defaultStorage`
    /// child's `name` is the default.
    pub fn parse_xml(text: &str) -> Result<AssetStorages, AssetStorageError> {
        if text.len() > MAX_REPLY_BYTES {
            return Err(AssetStorageError::TooLong);
        }
        let document = super::login_xml::parse_remote_xml(text, MAX_XML_NODES).map_err(
            |error| match error {
                roxmltree::Error::NodesLimitReached => AssetStorageError::TooManyNodes,
                other => AssetStorageError::Xml(other.to_string()),
            },
        )?;
        let root = document.root_element();
        if root.tag_name().name() != "asset" {
            return Ok(AssetStorages::none());
        }
        let children = || root.children().filter(roxmltree::Node::is_element);
        let mut storages = Vec::new();
        for (count, element) in children()
            .filter(|e| e.tag_name().name() == "storage")
            .enumerate()
        {
            if count >= MAX_STORAGES {
                return Err(AssetStorageError::TooManyStorages);
            }
            if let Ok(storage) = AssetStorage::parse(element.attribute("data").unwrap_or_default())
            {
                storages.push(storage);
            }
        }
        let default = children()
            .find(|e| e.tag_name().name() == "defaultStorage")
            .and_then(|e| e.attribute("name"))
            .map(str::to_owned);
        AssetStorages::new(storages, default)
    }

    /// Writes the XML a real server gives native clients, byte for byte as
    /// Urho3D's pugixml does: the declaration, tab indent, ` />`, `\n`; an
    /// `<asset />` without children when there is nothing to advertise.
    pub fn to_xml(&self) -> String {
        let mut out = String::from(DECLARATION);
        if self.is_empty() {
            out.push_str("<asset />\n");
            return out;
        }
        out.push_str("<asset>\n");
        for storage in &self.storages {
            out.push_str("\t<storage data=\"");
            escape_attribute(&storage.to_storage_string(), &mut out);
            out.push_str("\" />\n");
        }
        if let Some(name) = &self.default {
            out.push_str("\t<defaultStorage name=\"");
            escape_attribute(name, &mut out);
            out.push_str("\" />\n");
        }
        out.push_str("</asset>\n");
        out
    }
}

#[cfg(test)]
#[path = "asset_storage_tests.rs"]
mod tests;
