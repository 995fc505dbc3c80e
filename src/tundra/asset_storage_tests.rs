use super::*;

/// The LoginReply data of a real server with an empty scene, 77 bytes
/// (docs/knet-wire.md §5.4).
const CAPTURED_EMPTY: &str =
    "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Javascript\" />\n</asset>\n";

/// The storage string of a real server started with a scene file
/// (docs/knet-wire.md §5.4), for a client on the same host.
const LOCAL_STORAGE: &str = "type=LocalAssetStorage;name=Scene;src=/srv/world/;recursive=true;readonly=false;liveupdate=true;autodiscoverable=true;replicated=true;trusted=true";

fn http(name: &str, src: &str) -> AssetStorage {
    AssetStorage::from_fields([
        ("type".to_owned(), "HttpAssetStorage".to_owned()),
        ("name".to_owned(), name.to_owned()),
        ("src".to_owned(), src.to_owned()),
    ])
    .unwrap()
}

#[test]
fn the_captured_empty_scene_reply_reproduces_byte_for_byte() {
    assert_eq!(CAPTURED_EMPTY.len(), 77);
    let storages = AssetStorages::parse_xml(CAPTURED_EMPTY).unwrap();
    assert!(storages.storages().is_empty());
    assert_eq!(storages.default_name(), Some("Javascript"));
    assert_eq!(storages.default_storage(), None);
    assert_eq!(storages.to_xml(), CAPTURED_EMPTY);
    // A default that is not listed has no src for WebSocket clients.
    assert_eq!(storages.to_json(), NO_STORAGE_JSON);
}

#[test]
fn the_local_storage_of_a_scene_server_round_trips() {
    let xml = format!(
        "<?xml version=\"1.0\"?>\n<asset>\n\t<storage data=\"{LOCAL_STORAGE}\" />\n\t<defaultStorage name=\"Scene\" />\n</asset>\n"
    );
    let storages = AssetStorages::parse_xml(&xml).unwrap();
    let scene = storages.default_storage().unwrap();
    assert_eq!(
        (scene.kind(), scene.name(), scene.src()),
        ("LocalAssetStorage", "Scene", "/srv/world/")
    );
    assert_eq!(scene.fields().len(), 9);
    assert_eq!(scene.field("trusted"), Some("true"));
    assert_eq!(scene.to_storage_string(), LOCAL_STORAGE);
    assert_eq!(storages.to_xml(), xml);
    assert_eq!(
        storages.to_json(),
        r#"{"storage":{"default":true,"name":"Scene","src":"/srv/world/","type":"LocalAssetStorage"}}"#
    );
}

#[test]
fn json_of_a_real_server_round_trips_and_becomes_xml() {
    let json = r#"{"storage":{"default":true,"name":"Scene","src":"http://world.example/assets/","type":"HttpAssetStorage"}}"#;
    let storages = AssetStorages::parse_json(json).unwrap();
    assert_eq!(
        storages,
        AssetStorages::new(
            vec![http("Scene", "http://world.example/assets/")],
            Some("Scene".into())
        )
        .unwrap()
    );
    assert_eq!(storages.to_json(), json);
    let xml = storages.to_xml();
    assert_eq!(
        xml,
        "<?xml version=\"1.0\"?>\n<asset>\n\t<storage data=\"type=HttpAssetStorage;name=Scene;src=http://world.example/assets/\" />\n\t<defaultStorage name=\"Scene\" />\n</asset>\n"
    );
    assert_eq!(AssetStorages::parse_xml(&xml).unwrap(), storages);
    assert_eq!(storages.reply_data(LoginDialect::Json), json);
    assert_eq!(storages.reply_data(LoginDialect::Xml), xml);
    assert_eq!(
        AssetStorages::parse_reply(&xml, LoginDialect::Xml).unwrap(),
        AssetStorages::parse_reply(json, LoginDialect::Json).unwrap()
    );
}

#[test]
fn several_storages_keep_their_order_and_json_carries_the_default() {
    let storages = AssetStorages::new(
        vec![
            http("Textures", "http://a/t/"),
            http("Scene", "http://a/s/"),
        ],
        Some("Scene".into()),
    )
    .unwrap();
    let again = AssetStorages::parse_xml(&storages.to_xml()).unwrap();
    assert_eq!(again, storages);
    assert_eq!(again.storages()[0].name(), "Textures");
    assert!(storages
        .to_json()
        .contains(r#""name":"Scene","src":"http://a/s/""#));
    // No default: WebSocket clients get the empty block, native ones the list.
    let no_default = AssetStorages::new(vec![http("Scene", "http://a/s/")], None).unwrap();
    assert_eq!(no_default.to_json(), NO_STORAGE_JSON);
    assert!(!no_default.to_xml().contains("defaultStorage"));
}

#[test]
fn no_storage_writes_what_a_node_without_upstream_always_sent() {
    let none = AssetStorages::none();
    assert!(none.is_empty());
    assert_eq!(
        none.to_json(),
        r#"{"storage":{"default":true,"name":"","src":"","type":""}}"#
    );
    assert_eq!(none.to_xml(), "<?xml version=\"1.0\"?>\n<asset />\n");
    assert_eq!(none.to_xml(), super::super::login_xml::login_reply_xml());
    // Both read back as no storage: a node as another node's world server.
    assert_eq!(AssetStorages::parse_json(NO_STORAGE_JSON).unwrap(), none);
    assert_eq!(AssetStorages::parse_xml(&none.to_xml()).unwrap(), none);
    assert_eq!(AssetStorages::parse_json("{}").unwrap(), none);
}

#[test]
fn other_json_keys_are_read_past_and_not_kept() {
    let json = r#"{"token":"secret","storage":{"src":"http://w/","name":"S","type":"HttpAssetStorage","default":true,"extra":[1]},"motd":{"a":1}}"#;
    let storages = AssetStorages::parse_json(json).unwrap();
    assert_eq!(
        storages.to_json(),
        r#"{"storage":{"default":true,"name":"S","src":"http://w/","type":"HttpAssetStorage"}}"#
    );
    // Not default: listed for native clients, not offered as the default.
    let json = r#"{"storage":{"default":false,"name":"S","src":"http://w/"}}"#;
    let storages = AssetStorages::parse_json(json).unwrap();
    assert_eq!(storages.default_name(), None);
    assert_eq!(
        storages.storages()[0].to_storage_string(),
        "name=S;src=http://w/"
    );
}

#[test]
fn other_xml_content_is_read_past() {
    let xml = "<asset><motd text='hi'/><storage data='src=http://w/;name=W'>text</storage>\
               <defaultStorage name='W'/><defaultStorage name='X'/><!-- c --></asset>";
    let storages = AssetStorages::parse_xml(xml).unwrap();
    assert_eq!(storages.storages().len(), 1);
    assert_eq!(storages.default_name(), Some("W"), "the first one counts");
    // Another root is no storage, as for the client.
    assert!(
        AssetStorages::parse_xml("<login><storage data='src=x'/></login>")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn storage_strings_read_as_asset_api_reads_them() {
    let bare = AssetStorage::parse("  http://w/a/;").unwrap();
    assert_eq!(
        bare.fields(),
        [("src".to_owned(), "http://w/a/".to_owned())]
    );
    let flags = AssetStorage::parse("src=/d/;;recursive;name=a;name=b").unwrap();
    assert_eq!(flags.to_storage_string(), "src=/d/;recursive=1;name=b");
    assert_eq!(
        AssetStorage::parse("src=http://w/?a=b"),
        Err(AssetStorageError::BadField("src=http://w/?a=b".into()))
    );
    assert_eq!(
        AssetStorage::parse("name=x;type=y"),
        Err(AssetStorageError::NoSource)
    );
    assert_eq!(AssetStorage::parse(""), Err(AssetStorageError::NoSource));
    assert_eq!(
        AssetStorage::from_fields([("src".to_owned(), "a;b".to_owned())]),
        Err(AssetStorageError::Unwritable)
    );
}

#[test]
fn a_bad_storage_is_skipped_like_the_client_skips_it() {
    let xml = "<asset><storage data='src=a=b'/><storage/><storage data='src=http://ok/'/></asset>";
    let storages = AssetStorages::parse_xml(xml).unwrap();
    assert_eq!(storages.storages().len(), 1);
    assert_eq!(storages.storages()[0].src(), "http://ok/");
}

#[test]
fn values_are_escaped_and_read_back() {
    let storage = AssetStorage::from_fields([
        ("src".to_owned(), "http://w/a&b<c>\"d'".to_owned()),
        ("name".to_owned(), "é\tx".to_owned()),
    ])
    .unwrap();
    let storages = AssetStorages::new(vec![storage], Some("é\tx".into())).unwrap();
    let xml = storages.to_xml();
    assert!(
        xml.contains("src=http://w/a&amp;b&lt;c&gt;&quot;d'"),
        "{xml}"
    );
    assert!(xml.contains("<defaultStorage name=\"é&#09;x\" />"), "{xml}");
    assert_eq!(AssetStorages::parse_xml(&xml).unwrap(), storages);
    let json = storages.to_json();
    assert!(json.contains(r#""src":"http://w/a&b<c>\"d'""#), "{json}");
    let from_json = AssetStorages::parse_json(&json).unwrap();
    let storage = from_json.default_storage().unwrap();
    assert_eq!(
        (storage.name(), storage.src()),
        ("é\tx", "http://w/a&b<c>\"d'")
    );
}

#[test]
fn garbage_and_wrong_shapes_are_errors() {
    for text in [
        "",
        "not xml",
        "<asset>",
        "<a/><b/>",
        "\u{0}",
        "{\"storage\":{}}",
    ] {
        assert!(
            matches!(
                AssetStorages::parse_xml(text),
                Err(AssetStorageError::Xml(_))
            ),
            "{text:?}"
        );
    }
    assert!(matches!(
        AssetStorages::parse_json("<asset />"),
        Err(AssetStorageError::Json(_))
    ));
    assert_eq!(
        AssetStorages::parse_json("[1]"),
        Err(AssetStorageError::NotAnObject)
    );
    for shape in [
        r#"{"storage":"x"}"#,
        r#"{"storage":{"src":1}}"#,
        r#"{"storage":{"src":"http://w/","name":null}}"#,
    ] {
        assert_eq!(
            AssetStorages::parse_json(shape),
            Err(AssetStorageError::StorageShape),
            "{shape}"
        );
    }
    assert_eq!(
        AssetStorages::parse_json(r#"{"storage":{"src":"http://w/?a=b"}}"#),
        Err(AssetStorageError::Unwritable)
    );
}

#[test]
fn a_dtd_is_refused() {
    let dtd =
        "<!DOCTYPE asset [<!ENTITY e 'src=http://evil/'>]><asset><storage data='&e;'/></asset>";
    assert!(matches!(
        AssetStorages::parse_xml(dtd),
        Err(AssetStorageError::Xml(_))
    ));
}

#[test]
fn hostile_inputs_are_bounded() {
    // Longer than a LoginReply can carry.
    let long = format!(
        "<asset><storage data='src={}'/></asset>",
        "x".repeat(MAX_REPLY_BYTES)
    );
    assert_eq!(
        AssetStorages::parse_xml(&long),
        Err(AssetStorageError::TooLong)
    );
    let long = format!(
        r#"{{"storage":{{"src":"{}"}}}}"#,
        "x".repeat(MAX_REPLY_BYTES)
    );
    assert_eq!(
        AssetStorages::parse_json(&long),
        Err(AssetStorageError::TooLong)
    );
    // Deep nesting.
    let depth = MAX_REPLY_BYTES / 8;
    let deep = format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth));
    assert_eq!(
        AssetStorages::parse_xml(&deep),
        Err(AssetStorageError::TooManyNodes)
    );
    let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(matches!(
        AssetStorages::parse_json(&deep),
        Err(AssetStorageError::Json(_))
    ));
    // Too many storages, and exactly as many as kept.
    let many = |n: usize| {
        let one = "<storage data='src=http://w/'/>";
        format!("<asset>{}</asset>", one.repeat(n))
    };
    assert_eq!(
        AssetStorages::parse_xml(&many(MAX_STORAGES + 1)),
        Err(AssetStorageError::TooManyStorages)
    );
    assert_eq!(
        AssetStorages::parse_xml(&many(MAX_STORAGES))
            .unwrap()
            .storages()
            .len(),
        MAX_STORAGES
    );
    // Too many fields in one storage.
    let fields: String = (0..=MAX_STORAGE_FIELDS)
        .map(|i| format!("k{i}=v;"))
        .collect();
    assert_eq!(
        AssetStorage::parse(&format!("src=x;{fields}")),
        Err(AssetStorageError::TooManyFields)
    );
    // Text that grows when escaped: within the reply's length as read,
    // too long once written as XML.
    let tabs = "&#9;".repeat(MAX_REPLY_BYTES / 4 - 16);
    let grows = format!("<asset><storage data='src=x{tabs}x'/></asset>");
    assert!(grows.len() <= MAX_REPLY_BYTES);
    assert_eq!(
        AssetStorages::parse_xml(&grows),
        Err(AssetStorageError::TooLarge)
    );
    let grows = format!(
        r#"{{"storage":{{"default":true,"name":"n","src":"{}"}}}}"#,
        "&".repeat(MAX_REPLY_BYTES / 2)
    );
    assert!(grows.len() <= MAX_REPLY_BYTES);
    assert_eq!(
        AssetStorages::parse_json(&grows),
        Err(AssetStorageError::TooLarge)
    );
}

#[test]
fn clients_on_other_hosts_are_not_told_of_local_storages() {
    let local = AssetStorage::parse(LOCAL_STORAGE).unwrap();
    let untyped_dir = AssetStorage::parse("name=Dir;src=/srv/more/").unwrap();
    let untyped_url = AssetStorage::parse("name=Web;src=https://w/").unwrap();
    assert!(local.is_local() && untyped_dir.is_local());
    assert!(!untyped_url.is_local() && !http("H", "http://h/").is_local());
    let storages = AssetStorages::new(
        vec![
            local,
            http("Textures", "http://a/t/"),
            untyped_dir,
            untyped_url,
        ],
        Some("Scene".into()),
    )
    .unwrap();
    let remote = storages.for_remote_host();
    let names: Vec<&str> = remote.storages().iter().map(AssetStorage::name).collect();
    assert_eq!(names, ["Textures", "Web"]);
    assert_eq!(
        remote.default_name(),
        None,
        "the local default is not named"
    );
    assert_eq!(remote.to_json(), NO_STORAGE_JSON);
    // A default that is not local, or not listed, stays.
    let web_default = AssetStorages::new(storages.storages().to_vec(), Some("Web".into())).unwrap();
    assert_eq!(web_default.for_remote_host().default_name(), Some("Web"));
    let captured = AssetStorages::parse_xml(CAPTURED_EMPTY).unwrap();
    assert_eq!(captured.for_remote_host(), captured);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A field value as a server may write it: markup characters, spaces,
    /// tabs and line ends inside, none at either end (the storage string is
    /// trimmed as a whole), never `;` or `=`.
    fn value() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 &<>\"'/:.é\t\n\r-]{0,12}".prop_map(|s| s.trim().to_owned())
    }

    fn storage() -> impl Strategy<Value = AssetStorage> {
        (
            value(),
            value().prop_filter("a src", |s| !s.is_empty()),
            // Other keys only: an extra `src` or `name` would replace the
            // one above, and an empty `src` is no storage (rare, but a
            // CI run drew `src` with an empty value).
            prop::collection::vec(
                (
                    "[a-z]{1,6}".prop_filter("another key", |k| k != "src" && k != "name"),
                    value(),
                ),
                0..6,
            ),
        )
            .prop_map(|(name, src, extra)| {
                let fields = [("name".to_owned(), name), ("src".to_owned(), src)];
                AssetStorage::from_fields(fields.into_iter().chain(extra)).unwrap()
            })
    }

    fn storages() -> impl Strategy<Value = AssetStorages> {
        (
            prop::collection::vec(storage(), 0..4),
            prop::option::of(value()),
            any::<prop::sample::Index>(),
        )
            .prop_map(|(storages, other, pick)| {
                // The default is a listed storage's name half of the time.
                let default = match (&other, storages.is_empty()) {
                    (None, false) => Some(pick.get(&storages).name().to_owned()),
                    _ => other,
                };
                AssetStorages::new(storages, default).unwrap()
            })
    }

    proptest! {
        #[test]
        fn xml_round_trips(model in storages()) {
            let xml = model.to_xml();
            prop_assert!(xml.len() <= MAX_REPLY_BYTES);
            prop_assert_eq!(AssetStorages::parse_xml(&xml), Ok(model));
        }

        #[test]
        fn json_carries_the_default_storage(model in storages()) {
            let json = model.to_json();
            let read = AssetStorages::parse_json(&json).unwrap();
            let fields = |s: &AssetStorage| {
                (s.name().to_owned(), s.src().to_owned(), s.kind().to_owned())
            };
            let default = model
                .default_storage()
                .filter(|s| !s.name().is_empty());
            prop_assert_eq!(read.default_storage().map(fields), default.map(fields));
            prop_assert_eq!(read.storages().len(), usize::from(default.is_some()));
        }

        #[test]
        fn any_text_parses_or_is_refused_and_a_model_always_fits(
            text in any::<String>(),
            data in "[a-z=;&#<>\"' \t]{0,40}",
        ) {
            let wrapped = format!("<asset><storage data=\"{data}\"/><defaultStorage name=\"{data}\"/></asset>");
            for input in [text.as_str(), wrapped.as_str()] {
                let parsed = [AssetStorages::parse_xml(input), AssetStorages::parse_json(input)];
                for model in parsed.into_iter().flatten() {
                    prop_assert!(model.to_xml().len() <= MAX_REPLY_BYTES);
                    prop_assert!(model.to_json().len() <= MAX_REPLY_BYTES);
                    prop_assert!(model.storages().len() <= MAX_STORAGES);
                }
            }
        }
    }
}
