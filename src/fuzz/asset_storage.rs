//! Entry point for the fuzz target `asset_storage` in `tests/fuzz`: a world
//! server's LoginReply data read as the bridge reads it. Kept in the library
//! so `tests/tundra_fuzz_corpus.rs` replays the saved corpus on stable Rust.
//! The function must return for any input; a panic is a bug.

use crate::tundra::asset_storage::{AssetStorages, MAX_REPLY_BYTES, MAX_STORAGES};
use crate::tundra::LoginDialect;

/// `login_reply`: the first byte picks the form (even: native XML, odd:
/// WebSocket JSON), the rest is the reply data (invalid UTF-8 replaced).
/// Storages that parse always write within a LoginReply in both forms and
/// in the form given to a client on another host; the JSON written reads
/// back to the same JSON, and, from XML, the XML written reads back to the
/// same storages (XML values hold no character the writer cannot give back).
/// Returns how many storages were read, so tests can check seeds parse.
pub fn login_reply(data: &[u8]) -> usize {
    let Some((&selector, text)) = data.split_first() else {
        return 0;
    };
    let text = String::from_utf8_lossy(text);
    let dialect = if selector % 2 == 0 {
        LoginDialect::Xml
    } else {
        LoginDialect::Json
    };
    let Ok(storages) = AssetStorages::parse_reply(&text, dialect) else {
        return 0;
    };
    assert!(storages.storages().len() <= MAX_STORAGES);
    for model in [storages.clone(), storages.for_remote_host()] {
        assert!(model.to_xml().len() <= MAX_REPLY_BYTES);
        assert!(model.to_json().len() <= MAX_REPLY_BYTES);
    }
    let json = storages.to_json();
    let again = AssetStorages::parse_json(&json).expect("written JSON reads back");
    assert_eq!(again.to_json(), json, "JSON is stable after one round");
    if dialect == LoginDialect::Xml {
        let again = AssetStorages::parse_xml(&storages.to_xml());
        assert_eq!(again.as_ref(), Ok(&storages), "XML reads back to itself");
    }
    storages.storages().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_accepts_edge_inputs() {
        for input in [
            &b""[..],
            b"\x00",
            b"\x01",
            b"\x00<asset><storage data='src=a'/></asset>",
            b"\x01{\"storage\":{\"src\":\"a\"}}",
            b"\x00<asset><storage data='\xff\xfe'/></asset>",
        ] {
            login_reply(input);
        }
        assert_eq!(
            login_reply(b"\x00<asset><storage data='src=a'/></asset>"),
            1
        );
    }
}
