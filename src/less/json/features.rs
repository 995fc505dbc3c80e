//! What a link agreed in its Hello exchange, as far as the inspector needs
//! it to read the link's bytes (docs/less-wire.md §16): which compact
//! encodings carry property values, whether keyed updates (update-property)
//! are in use, and whether stream datagrams carry a form byte (bulk
//! packets). A node records the agreed features in its key log; an operator
//! without one names them on the command line (`--features`).

use crate::less::bulk::BULK_FEATURE;
use crate::less::encoding::link::{offered_features, FEATURE_PREFIX, UPDATE_PROPERTY_FEATURE};
use crate::less::encoding::{EncodingRule, LinkEncodings};

/// The agreed features of one link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkFeatures {
    /// The feature tokens both Hellos listed.
    pub tokens: Vec<String>,
    /// Compact encodings and keyed updates, with the schemas' rules.
    pub encodings: LinkEncodings,
    /// Stream datagrams carry a form byte (`bulk:zstd/1`).
    pub bulk: bool,
}

impl LinkFeatures {
    /// The features named by these Hello tokens, applied by `rules`.
    pub fn from_tokens(tokens: Vec<String>, rules: Vec<EncodingRule>) -> LinkFeatures {
        LinkFeatures {
            encodings: LinkEncodings::from_features(&tokens, rules),
            bulk: tokens.iter().any(|token| token == BULK_FEATURE),
            tokens,
        }
    }
}

/// Every feature token a default node offers: the compact encodings, keyed
/// updates and bulk packets (what two default nodes agree).
pub fn default_tokens() -> Vec<String> {
    let mut tokens = offered_features();
    tokens.push(BULK_FEATURE.to_owned());
    tokens
}

/// The feature tokens an operator names: a comma-separated list of Hello
/// tokens (`enc:tundra-transform/1`, `msg:update-property/1`,
/// `bulk:zstd/1`) and the short names `compact` (every encoding), `keyed`
/// (update-property), `bulk`, `default` (what a default node agrees) and
/// `plain` (none).
pub fn parse_tokens(text: &str) -> Result<Vec<String>, String> {
    let mut tokens: Vec<String> = Vec::new();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let named: Vec<String> = match word {
            "default" => default_tokens(),
            "plain" | "none" => Vec::new(),
            "compact" => offered_features()
                .into_iter()
                .filter(|token| token.starts_with(FEATURE_PREFIX))
                .collect(),
            "keyed" => vec![UPDATE_PROPERTY_FEATURE.to_owned()],
            "bulk" => vec![BULK_FEATURE.to_owned()],
            token if token.contains(':') && is_token(token) => vec![token.to_owned()],
            other => {
                return Err(format!(
                    "feature {other:?}: expected default, plain, compact, keyed, bulk or a Hello token such as enc:tundra-transform/1"
                ))
            }
        };
        for token in named {
            if !tokens.contains(&token) {
                tokens.push(token);
            }
        }
    }
    Ok(tokens)
}

/// A Hello feature token's alphabet (docs/peer-link.md §5.2).
fn is_token(text: &str) -> bool {
    text.len() <= 64
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"./-_:".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_expand_to_hello_tokens() {
        let keyed = parse_tokens("compact, keyed").unwrap();
        assert!(keyed.contains(&"enc:tundra-transform/1".to_owned()));
        assert!(keyed.contains(&UPDATE_PROPERTY_FEATURE.to_owned()));
        assert!(!keyed.contains(&BULK_FEATURE.to_owned()));
        let all = parse_tokens("default").unwrap();
        assert_eq!(all, default_tokens());
        assert_eq!(parse_tokens("plain").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_tokens("bulk:zstd/1,bulk").unwrap(),
            vec![BULK_FEATURE.to_owned()]
        );
        assert!(parse_tokens("zip").is_err());
        assert!(parse_tokens("Enc:X").is_err());
    }

    #[test]
    fn tokens_decide_encodings_keyed_updates_and_bulk() {
        let features = LinkFeatures::from_tokens(default_tokens(), Vec::new());
        assert!(features.bulk);
        assert!(features.encodings.update_property());
        let plain = LinkFeatures::from_tokens(Vec::new(), Vec::new());
        assert!(!plain.bulk);
        assert!(!plain.encodings.update_property());
    }
}
