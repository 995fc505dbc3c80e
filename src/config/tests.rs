//! The node file: defaults, parsing and every validation rule.

use super::*;

#[test]
fn defaults_are_a_standalone_node_on_tundra_port() {
    let config = NodeConfig::default();
    assert_eq!(config.tundra.listen.port(), 2345);
    assert!(config.tundra.listen.ip().is_loopback());
    assert_eq!(config.tick_period(), Duration::from_millis(50));
}

#[test]
fn empty_file_is_valid() {
    let config = NodeConfig::parse(Path::new("/etc/lessgate/node.toml"), "").unwrap();
    assert_eq!(config.node.tick_hz, 20);
}

#[test]
fn an_admin_token_is_long_and_printable() {
    let file = Path::new("node.toml");
    let good = "[http]\nadmin_token = \"0123456789abcdef0123456789abcdef\"\n";
    let config = NodeConfig::parse(file, good).unwrap();
    assert_eq!(config.http.admin_token.as_deref().map(str::len), Some(32));
    for bad in ["short", "0123456789abcdef 0123456789abcdef"] {
        let text = format!("[http]\nadmin_token = \"{bad}\"\n");
        let error = NodeConfig::parse(file, &text).unwrap_err().to_string();
        assert!(error.contains("http.admin_token"), "{bad}: {error}");
    }
}

#[test]
fn relative_paths_follow_the_file() {
    let text = "[tundra]\nscene = \"worlds/a.txml\"\n";
    let config = NodeConfig::parse(Path::new("/srv/node/node.toml"), text).unwrap();
    assert_eq!(
        config.tundra.scene.as_deref(),
        Some(Path::new("/srv/node/worlds/a.txml"))
    );
}

#[test]
fn unknown_key_names_file_and_key() {
    let error = NodeConfig::parse(Path::new("n.toml"), "[tundra]\nlisten_addr = 1\n")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("n.toml:"), "{error}");
    assert!(error.contains("listen_addr"), "{error}");
}

#[test]
fn bulk_introductions_default_on_and_is_a_boolean() {
    let uuid = "[node]\nuuid = \"0b3c7f8e-6d5a-4c1b-9e2f-7a8b9c0d1e2f\"\n";
    let on = NodeConfig::parse(Path::new("n.toml"), &format!("{uuid}[peering]\n")).unwrap();
    assert!(on.peering.unwrap().bulk_introductions);
    let text = format!("{uuid}[peering]\nbulk_introductions = false\n");
    let off = NodeConfig::parse(Path::new("n.toml"), &text).unwrap();
    assert!(!off.peering.unwrap().bulk_introductions);
    let text = format!("{uuid}[peering]\nbulk_introductions = \"yes\"\n");
    let error = NodeConfig::parse(Path::new("n.toml"), &text)
        .unwrap_err()
        .to_string();
    assert!(error.contains("bulk_introductions"), "{error}");
}

#[test]
fn threads_default_to_one_and_are_bounded() {
    assert_eq!(NodeConfig::default().node.threads, 1);
    let per_core = NodeConfig::parse(Path::new("n.toml"), "[node]\nthreads = 0\n").unwrap();
    assert_eq!(per_core.node.threads, 0);
    let error = NodeConfig::parse(Path::new("n.toml"), "[node]\nthreads = 300\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "n.toml: key `node.threads`: must be between 0 and 256"
    );
    let error = NodeConfig::parse(Path::new("n.toml"), "[node]\nthreads = -1\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("threads"), "{error}");
}

#[test]
fn a_placement_is_metres_whole_or_not_and_must_be_finite_and_bounded() {
    assert_eq!(NodeConfig::default().node.placement, [0.0; 3]);
    let placed = NodeConfig::parse(
        Path::new("n.toml"),
        "[node]\nplacement = [1000, 0.5, -25]\n",
    )
    .unwrap();
    assert_eq!(placed.node.placement, [1000.0, 0.5, -25.0]);
    for bad in ["[nan, 0, 0]", "[0, inf, 0]", "[1e8, 0, 0]"] {
        let error = NodeConfig::parse(Path::new("n.toml"), &format!("[node]\nplacement = {bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("n.toml: key `node.placement`: placement coordinates must be finite"),
            "{bad}: {error}"
        );
    }
    let error = NodeConfig::parse(Path::new("n.toml"), "[node]\nplacement = [1, 2]\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("placement"), "{error}");
}

#[test]
fn the_server_core_defaults_are_the_configured_defaults() {
    assert_eq!(
        Limits::default().server_limits(),
        crate::server::ServerLimits::default()
    );
}

#[test]
fn invalid_value_names_key() {
    let error = NodeConfig::parse(Path::new("n.toml"), "[node]\ntick_hz = 0\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "n.toml: key `node.tick_hz`: must be between 1 and 100"
    );
}

#[test]
fn tls_needs_both_halves() {
    let error = NodeConfig::parse(Path::new("n.toml"), "[tundra]\ntls_cert = \"c.pem\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("tundra.tls_cert"), "{error}");
}

const PEERING: &str = "[node]\nuuid = \"6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01\"\n\
                       [peering]\ncontrol_listen = \"127.0.0.1:7101\"\n";

#[test]
fn peering_section_parses_with_defaults_and_resolves_paths() {
    let config = NodeConfig::parse(Path::new("/srv/a/node.toml"), PEERING).unwrap();
    let peering = config.peering.unwrap();
    assert_eq!(peering.control_listen.port(), 7101);
    assert_eq!(peering.mtu, DEFAULT_PEER_MTU);
    assert_eq!(peering.mode, PeerLinkMode::Udp);
    assert_eq!(peering.peers_dir, Path::new("/srv/a/peers"));
    assert_eq!(
        peering.certificate,
        Path::new("/srv/a/identity/node.cert.pem")
    );
    assert!(NodeConfig::default().peering.is_none());
}

#[test]
fn peering_needs_a_uuid() {
    let error = NodeConfig::parse(Path::new("n.toml"), "[peering]\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "n.toml: key `node.uuid`: required when [peering] is set (make one with `uuidgen`)"
    );
}

#[test]
fn peering_values_are_checked() {
    for (extra, key) in [
        ("mtu = 64\n", "peering.mtu"),
        ("mode = \"tcp\"\n", "mode"),
        ("reconnect_max_ms = 1\n", "peering.reconnect_max_ms"),
        ("liveness_timeout_ms = 5\n", "peering.liveness_timeout_ms"),
        ("data_advertise = \"0.0.0.0:7\"\n", "peering.data_advertise"),
        (
            "data_advertise = \"127.0.0.1:0\"\n",
            "peering.data_advertise",
        ),
    ] {
        let text = format!("{PEERING}{extra}");
        let error = NodeConfig::parse(Path::new("n.toml"), &text)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("n.toml:"), "{error}");
        assert!(error.contains(key), "{extra}: {error}");
    }
}

#[test]
fn bad_address_is_reported() {
    let error = NodeConfig::parse(Path::new("n.toml"), "[tundra]\nlisten = \"nowhere\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("n.toml: line 2, key `tundra.listen`: "),
        "{error}"
    );
    let error = NodeConfig::parse(
        Path::new("n.toml"),
        "[node]\nname = \"a\"\n\n[log]\nfilter = 3\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("n.toml: line 5, key `log.filter`: "),
        "{error}"
    );
}

#[test]
fn nil_uuid_is_refused_with_or_without_peering() {
    let nil = "[node]\nuuid = \"00000000-0000-0000-0000-000000000000\"\n";
    for text in [nil.to_owned(), format!("{nil}[peering]\n")] {
        let error = NodeConfig::parse(Path::new("n.toml"), &text)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("n.toml: key `node.uuid`: must not be the nil UUID"),
            "{error}"
        );
    }
}

#[test]
fn log_filter_must_parse() {
    let error = NodeConfig::parse(Path::new("n.toml"), "[log]\nfilter = \"lessgate=loud\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("n.toml: key `log.filter`: \"lessgate=loud\" is not a log filter"),
        "{error}"
    );
    assert!(NodeConfig::parse(
        Path::new("n.toml"),
        "[log]\nfilter = \"info,lessgate::transport=debug\"\n"
    )
    .is_ok());
}

#[test]
fn connection_limits_default_and_refuse_zero_naming_the_key() {
    let limits = NodeConfig::default().limits;
    assert_eq!(limits.handshake_timeout_secs, 10);
    assert_eq!(limits.login_timeout_secs, 10);
    assert_eq!(limits.max_connections_per_address, 64);
    assert_eq!(limits.max_pending_logins, 256);
    assert_eq!(limits.max_pending_logins_per_address, 16);
    for key in [
        "handshake_timeout_secs",
        "login_timeout_secs",
        "max_connections_per_address",
        "max_pending_logins",
        "max_pending_logins_per_address",
    ] {
        let error = NodeConfig::parse(Path::new("n.toml"), &format!("[limits]\n{key} = 0\n"))
            .unwrap_err()
            .to_string();
        assert!(error.contains(&format!("`limits.{key}`")), "{error}");
    }
    let error = NodeConfig::parse(Path::new("n.toml"), "[limits]\nlogin_timeout_secs = 3601\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("between 1 and 3600"), "{error}");
}

#[test]
fn the_message_burst_follows_the_rate_unless_set() {
    let path = Path::new("node.toml");
    let default = NodeConfig::default();
    assert_eq!(default.limits.max_message_burst, None);
    assert_eq!(default.limits.message_burst(), 200_000);
    // An operator who lowers the rate lowers the burst with it.
    let lowered = NodeConfig::parse(path, "[limits]\nmax_messages_per_second = 2000\n").unwrap();
    assert_eq!(lowered.limits.message_burst(), 2000);
    assert_eq!(lowered.limits.burst_warning(), None);
    // Set, the burst is what the file says.
    let set = NodeConfig::parse(
        path,
        "[limits]\nmax_messages_per_second = 2000\nmax_message_burst = 500\n",
    )
    .unwrap();
    assert_eq!(set.limits.message_burst(), 500);
    let error = NodeConfig::parse(path, "[limits]\nmax_message_burst = 0\n").unwrap_err();
    assert!(
        error.to_string().contains("limits.max_message_burst"),
        "{error}"
    );
}

#[test]
fn a_burst_far_above_the_rate_is_warned_about() {
    let path = Path::new("node.toml");
    let parse = |text: &str| NodeConfig::parse(path, text).unwrap().limits;
    let far = parse("[limits]\nmax_messages_per_second = 2000\nmax_message_burst = 200000\n");
    let warning = far
        .burst_warning()
        .expect("100 s of the rate is warned about");
    assert!(
        warning.contains("100 s") && warning.contains("remove max_message_burst"),
        "{warning}"
    );
    // Up to BURST_WARNING_SECONDS of the rate is a deliberate choice.
    let near = parse(&format!(
        "[limits]\nmax_messages_per_second = 2000\nmax_message_burst = {}\n",
        2000 * super::BURST_WARNING_SECONDS
    ));
    assert_eq!(near.burst_warning(), None);
}
