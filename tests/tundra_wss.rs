//! wss://: with a certificate configured, Tundra clients connect over TLS.

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::Login;
use lessgate::tundra::{DecodeContext, Message, ProtocolVersion, Registry};
use rustls::pki_types::ServerName;
use tokio_tungstenite::tungstenite::Message as WsMessage;

#[tokio::test]
async fn wss_login_with_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.key_pair.serialize_pem()).unwrap();

    let mut config = NodeConfig::default();
    config.tundra.listen = "127.0.0.1:0".parse().unwrap();
    config.tundra.tls_cert = Some(cert_path);
    config.tundra.tls_key = Some(key_path);
    let running = lessgate::runtime::start(config).await.unwrap();
    let url = running.tundra_url();
    assert!(url.starts_with("wss://"), "{url}");
    let addr = running.tundra_addr;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(running.run(async {
        let _ = stopped.await;
    }));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client_config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("tls handshake with the configured certificate");
    let (mut socket, _) = tokio_tungstenite::client_async("wss://localhost/", tls)
        .await
        .unwrap();
    let login = Message::Login(Login {
        login_data: "{\"username\":\"secure\"}".to_owned(),
        protocol_version: Some(4),
    });
    socket
        .send(WsMessage::Binary(
            login.encode_frame(ProtocolVersion(1)).unwrap().into(),
        ))
        .await
        .unwrap();
    let registry = Registry::builtin();
    let context = DecodeContext {
        protocol_version: ProtocolVersion(4),
        registry: &registry,
    };
    let mut replied = false;
    while let Some(Ok(frame)) =
        tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
            .await
            .unwrap()
    {
        if let WsMessage::Binary(frame) = frame {
            if let Message::LoginReply(reply) = Message::decode_frame(&frame, &context).unwrap() {
                assert!(reply.success);
                replied = true;
                break;
            }
        }
    }
    assert!(replied, "LoginReply over wss");
    let _ = stop.send(());
    let _ = task.await;
}
