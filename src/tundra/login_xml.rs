//! The login data of native (kNet) clients: XML instead of WebSocket JSON
//! (docs/tundra-wire.md §4.1-§4.2; the XML: docs/knet-wire.md §5.3 and
//! §5.4, whose sections are cited below).
//!
//! Owns reading a Login's XML into the same property map a JSON login gives,
//! and writing Login and LoginReply XML byte for byte as Tundra's Urho3D
//! `XMLFile::ToString()` (pugixml) does. Pure and total: any text gives a map
//! or a [`LoginXmlError`], never a panic, with bounded work and memory.

use serde_json::{Map, Value};

/// Login data travels as a `u16` length + bytes (§5.3), so longer text cannot
/// come from the wire; a caller passing more is refused, not parsed.
pub const MAX_LOGIN_XML_BYTES: usize = u16::MAX as usize;

/// Most login properties accepted. A real client sends 8 (§5.3); a server's
/// scripts read a handful. 256 leaves room for any real client while bounding
/// the map a hostile login makes (64 KiB of `<a/>` would be ~16 000 keys).
pub const MAX_LOGIN_PROPERTIES: usize = 256;

/// XML nodes parsed at most (elements, text, comments). Bounds the parser's
/// node table well below what 64 KiB could otherwise describe; a real login
/// has about 20 (one element and one whitespace text per property).
const MAX_XML_NODES: u32 = 4 * MAX_LOGIN_PROPERTIES as u32 + 16;

/// The pugixml declaration Urho3D writes first (§5.3).
pub(crate) const DECLARATION: &str = "<?xml version=\"1.0\"?>\n";

/// Why login XML was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginXmlError {
    #[error("login data is not valid XML: {0}")]
    Syntax(String),
    #[error("login data is longer than {MAX_LOGIN_XML_BYTES} bytes")]
    TooLong,
    #[error("login data has more than {MAX_LOGIN_PROPERTIES} properties")]
    TooManyProperties,
    #[error("login data has more than {MAX_XML_NODES} XML nodes")]
    TooManyNodes,
}

/// Reads native login data as `Server::HandleLogin` does (§5.3): the root's
/// name is not checked; each child element of the root is one property, its
/// tag name the key and its attribute `value` (empty if absent, as Urho3D's
/// `GetAttribute` gives) the value, as a JSON string. A repeated tag keeps
/// the last value, as the server's property map does.
///
/// Stricter than the real server on purpose: where it logs malformed XML and
/// logs the client in with no properties, this returns an error.
pub fn parse_login_xml(text: &str) -> Result<Map<String, Value>, LoginXmlError> {
    if text.len() > MAX_LOGIN_XML_BYTES {
        return Err(LoginXmlError::TooLong);
    }
    let document = parse_remote_xml(text, MAX_XML_NODES).map_err(|error| match error {
        roxmltree::Error::NodesLimitReached => LoginXmlError::TooManyNodes,
        other => LoginXmlError::Syntax(other.to_string()),
    })?;
    let mut properties = Map::new();
    for (count, element) in document
        .root_element()
        .children()
        .filter(roxmltree::Node::is_element)
        .enumerate()
    {
        if count >= MAX_LOGIN_PROPERTIES {
            return Err(LoginXmlError::TooManyProperties);
        }
        let value = element.attribute("value").unwrap_or_default();
        properties.insert(
            element.tag_name().name().to_owned(),
            Value::String(value.to_owned()),
        );
    }
    Ok(properties)
}

/// Writes login properties as a native client does (`LoginPropertiesAsXml`,
/// §5.3): the declaration, a `<login>` root, one child per property in the
/// given order, tab indented, ` />` closing, `\n` line ends. Names are
/// written as they are: they must be XML names (see [`is_property_name`]).
pub fn login_xml(properties: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(
        DECLARATION.len()
            + 20
            + properties
                .iter()
                .map(|(k, v)| k.len() + v.len() + 16)
                .sum::<usize>(),
    );
    out.push_str(DECLARATION);
    if properties.is_empty() {
        // pugixml writes an element without children as an empty element.
        out.push_str("<login />\n");
        return out;
    }
    out.push_str("<login>\n");
    for (name, value) in properties {
        out.push_str("\t<");
        out.push_str(name);
        out.push_str(" value=\"");
        escape_attribute(value, &mut out);
        out.push_str("\" />\n");
    }
    out.push_str("</login>\n");
    out
}

/// Parses XML a remote party sent (login data, a LoginReply's storages) as
/// pugixml reads it: a byte order mark is skipped; a DTD is refused (the
/// data has no use for one, and refusing it refuses entity tricks); at most
/// `nodes_limit` nodes.
pub(crate) fn parse_remote_xml(
    text: &str,
    nodes_limit: u32,
) -> Result<roxmltree::Document<'_>, roxmltree::Error> {
    let text = text.trim_start_matches('\u{feff}');
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        nodes_limit,
    };
    roxmltree::Document::parse_with_options(text, options)
}

/// The success LoginReply data of a server without asset storages, for a
/// native client (§5.4): an `<asset>` root with no `storage` or
/// `defaultStorage` children, so the client simply adds no storage. What a
/// node without an upstream world sends; the general form, with storages,
/// is `tundra::asset_storage::AssetStorages::to_xml`, which writes exactly
/// this for no storage.
pub fn login_reply_xml() -> String {
    format!("{DECLARATION}<asset />\n")
}

/// Whether `name` can be written as a property by [`login_xml`]: a simple
/// XML name (an ASCII letter or `_`, then letters, digits, `-`, `_`, `.`).
/// Stricter than XML allows, and enough for every property Tundra uses.
pub fn is_property_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Escapes an attribute value as pugixml does: `&`, `<`, `>` and `"` by name,
/// control characters by two-digit decimal reference (`&#09;`), so tabs and
/// line ends survive the reader's whitespace normalisation.
pub(crate) fn escape_attribute(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 => {
                let code = c as u32;
                out.push_str("&#");
                out.push(char::from(b'0' + (code / 10) as u8));
                out.push(char::from(b'0' + (code % 10) as u8));
                out.push(';');
            }
            c => out.push(c),
        }
    }
}

/// The Login XML of a real headless client (docs/knet-wire.md §5.3), 275
/// bytes, from `fixtures/knet/udp-login-ping-disconnect.jsonl`.
#[cfg(test)]
pub(crate) const CAPTURED_LOGIN_HEX: &str = "3c3f786d6c2076657273696f6e3d22312e30223f3e0a3c6c6f67696e3e0a093c757365726e616d652076616c75653d2274657374657222202f3e0a093c70617373776f72642076616c75653d2222202f3e0a093c70726f746f636f6c2076616c75653d2275647022202f3e0a093c616464726573732076616c75653d223132372e302e302e3122202f3e0a093c706f72742076616c75653d22343132333422202f3e0a093c636c69656e742d76657273696f6e2076616c75653d22322e352e342e3122202f3e0a093c636c69656e742d6e616d652076616c75653d224e616d6522202f3e0a093c636c69656e742d6f7267616e697a6174696f6e2076616c75653d224f726722202f3e0a3c2f6c6f67696e3e0a";

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURED_PROPERTIES: [(&str, &str); 8] = [
        ("username", "tester"),
        ("password", ""),
        ("protocol", "udp"),
        ("address", "127.0.0.1"),
        ("port", "41234"),
        ("client-version", "2.5.4.1"),
        ("client-name", "Name"),
        ("client-organization", "Org"),
    ];

    fn captured() -> String {
        String::from_utf8(hex::decode(CAPTURED_LOGIN_HEX).unwrap()).unwrap()
    }

    #[test]
    fn captured_login_parses_to_its_eight_properties() {
        let text = captured();
        assert_eq!(text.len(), 275);
        let properties = parse_login_xml(&text).unwrap();
        assert_eq!(properties.len(), 8);
        for (key, value) in CAPTURED_PROPERTIES {
            assert_eq!(properties[key], Value::String(value.to_owned()), "{key}");
        }
    }

    #[test]
    fn writer_reproduces_the_captured_login_byte_for_byte() {
        assert_eq!(
            hex::encode(login_xml(&CAPTURED_PROPERTIES)),
            CAPTURED_LOGIN_HEX
        );
    }

    #[test]
    fn minimal_login_of_our_own_client() {
        let text = login_xml(&[("username", "pyclient")]);
        assert_eq!(
            text,
            "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"pyclient\" />\n</login>\n"
        );
        let properties = parse_login_xml(&text).unwrap();
        assert_eq!(properties.len(), 1);
        assert_eq!(properties["username"], "pyclient");
        assert_eq!(login_xml(&[]), "<?xml version=\"1.0\"?>\n<login />\n");
    }

    #[test]
    fn values_are_escaped_and_read_back_unchanged() {
        let value = "a&b<c>d\"e'f\tg\nh\ri é";
        let text = login_xml(&[("password", value)]);
        assert!(
            text.contains("<password value=\"a&amp;b&lt;c&gt;d&quot;e'f&#09;g&#10;h&#13;i é\" />")
        );
        assert_eq!(parse_login_xml(&text).unwrap()["password"], value);
        // Other control characters are written as pugixml writes them; XML
        // 1.0 forbids them even as references, so no reader takes them back.
        let text = login_xml(&[("password", "\u{1}")]);
        assert!(text.contains("<password value=\"&#01;\" />"));
        assert!(parse_login_xml(&text).is_err());
    }

    #[test]
    fn root_name_is_not_checked_and_a_missing_value_is_empty() {
        let properties =
            parse_login_xml("<anything><username/><x value='1'/><x value='2'/></anything>")
                .unwrap();
        assert_eq!(properties["username"], "");
        assert_eq!(properties["x"], "2", "the last of a repeated tag wins");
        // Text, comments and nested elements are no properties of their own.
        let properties =
            parse_login_xml("<l>text<!-- c --><a value='v'><b value='w'/></a></l>").unwrap();
        assert_eq!(properties.len(), 1);
        assert_eq!(properties["a"], "v");
    }

    #[test]
    fn reply_is_an_empty_asset_element() {
        assert_eq!(login_reply_xml(), "<?xml version=\"1.0\"?>\n<asset />\n");
        assert!(parse_login_xml(&login_reply_xml()).unwrap().is_empty());
    }

    #[test]
    fn non_xml_is_a_syntax_error() {
        for text in [
            "",
            "{\"username\":\"t\"}",
            "<login>",
            "<login><a value='x'></login>",
            "\u{0}\u{1}",
            "<a/><b/>",
        ] {
            let error = parse_login_xml(text).unwrap_err();
            assert!(matches!(error, LoginXmlError::Syntax(_)), "{text:?}");
            assert!(error
                .to_string()
                .starts_with("login data is not valid XML: "));
        }
        // A DTD could define entities: refused.
        let dtd = "<!DOCTYPE l [<!ENTITY e 'x'>]><l><a value='&e;'/></l>";
        assert!(parse_login_xml(dtd).is_err());
    }

    #[test]
    fn hostile_inputs_are_bounded() {
        // Deep nesting within the u16 length.
        let depth = MAX_LOGIN_XML_BYTES / 8;
        let deep = format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth));
        assert!(deep.len() <= MAX_LOGIN_XML_BYTES);
        assert_eq!(parse_login_xml(&deep), Err(LoginXmlError::TooManyNodes));
        // Many properties.
        let many = format!("<l>{}</l>", "<a/>".repeat(MAX_LOGIN_PROPERTIES + 1));
        assert_eq!(
            parse_login_xml(&many),
            Err(LoginXmlError::TooManyProperties)
        );
        let exact = format!("<l>{}</l>", "<a/>".repeat(MAX_LOGIN_PROPERTIES));
        assert_eq!(parse_login_xml(&exact).unwrap().len(), 1);
        // Thousands of attributes on one element.
        let attributes: String = (0..6_000).map(|i| format!(" a{i}=''")).collect();
        let wide = format!("<l><x{attributes} value='v'/></l>");
        assert!(wide.len() <= MAX_LOGIN_XML_BYTES);
        assert_eq!(parse_login_xml(&wide).unwrap()["x"], "v");
        // Longer than the wire allows.
        let long = format!("<l><a value='{}'/></l>", "x".repeat(MAX_LOGIN_XML_BYTES));
        assert_eq!(parse_login_xml(&long), Err(LoginXmlError::TooLong));
    }

    #[test]
    fn property_names() {
        for good in ["username", "client-version", "_x", "a.b", "A1"] {
            assert!(is_property_name(good), "{good}");
        }
        for bad in ["", "1a", "-a", "a b", "a<", "a\"", "é"] {
            assert!(!is_property_name(bad), "{bad}");
        }
    }
}
