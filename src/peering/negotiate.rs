//! Combining two Hellos into the parameters of one link's LESS session
//! (docs/peer-link.md §6.2).
//!
//! Pure: both Hellos in, [`Negotiated`] or the reason for refusing out. The
//! MAC keys are not here: they come from the TLS session (`keys`).

use std::net::SocketAddr;

use super::hello::{DataPath, Hello, NodeId};

/// How LESS packets travel on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFraming {
    /// UDP datagrams (docs/less-wire.md §6 UDP framing); oversize packets go on
    /// the QUIC data stream with stream framing.
    Datagram,
    /// Every packet on the QUIC data stream (docs/less-wire.md §6 TCP framing).
    Stream,
}

/// The parameters both nodes derive from the two Hellos.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The peer's declaration as received.
    pub peer: Hello,
    /// This node's declaration as sent.
    pub local: Hello,
    /// The largest datagram either side sends: the smaller declared MTU.
    pub mtu: u16,
    /// Datagram if both declared UDP, else stream.
    pub framing: LinkFraming,
    /// Features both sides declared, in this node's order.
    pub features: Vec<String>,
}

impl Negotiated {
    /// Checks that the two Hellos can form a link and combines them. The
    /// peer's Hello has already passed [`Hello::check`].
    pub fn new(local: &Hello, peer: &Hello) -> Result<Negotiated, String> {
        if peer.schema_uri != local.schema_uri {
            return Err(format!(
                "peer uses connection schema {}, this node uses {}",
                peer.schema_uri, local.schema_uri
            ));
        }
        let framing = match (local.data_path, peer.data_path) {
            (DataPath::Udp { .. }, DataPath::Udp { .. }) => LinkFraming::Datagram,
            _ => LinkFraming::Stream,
        };
        let features = local
            .features
            .iter()
            .filter(|feature| peer.features.contains(feature))
            .cloned()
            .collect();
        Ok(Negotiated {
            peer: peer.clone(),
            local: local.clone(),
            mtu: local.mtu.min(peer.mtu),
            framing,
            features,
        })
    }

    /// The peer's node UUID.
    pub fn peer_node(&self) -> NodeId {
        self.peer.node
    }

    /// Where to send datagrams to the peer, given the address its QUIC
    /// packets come from; `None` on a stream-framed link.
    pub fn peer_data_address(&self, control_remote: SocketAddr) -> Option<SocketAddr> {
        if self.framing != LinkFraming::Datagram {
            return None;
        }
        match self.peer.data_path {
            DataPath::Udp { ip, port } => {
                Some(SocketAddr::new(ip.unwrap_or(control_remote.ip()), port))
            }
            DataPath::Stream => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peering::hello::tests::example;

    fn peer() -> Hello {
        let mut peer = example();
        peer.node = NodeId(uuid::Uuid::from_u128(2));
        peer.mtu = 1400;
        peer.data_path = DataPath::Udp {
            ip: None,
            port: 9000,
        };
        peer.features = vec!["b".into(), "a".into()];
        peer
    }

    #[test]
    fn mtu_is_the_smaller_and_features_intersect() {
        let mut local = example();
        local.features = vec!["a".into(), "c".into()];
        let negotiated = Negotiated::new(&local, &peer()).unwrap();
        assert_eq!(negotiated.mtu, 1200);
        assert_eq!(negotiated.features, vec!["a".to_owned()]);
        assert_eq!(negotiated.framing, LinkFraming::Datagram);
        let remote: SocketAddr = "10.0.0.7:4433".parse().unwrap();
        assert_eq!(
            negotiated.peer_data_address(remote),
            Some("10.0.0.7:9000".parse().unwrap())
        );
    }

    #[test]
    fn one_stream_side_makes_the_link_stream_framed() {
        let mut local = example();
        local.data_path = DataPath::Stream;
        let negotiated = Negotiated::new(&local, &peer()).unwrap();
        assert_eq!(negotiated.framing, LinkFraming::Stream);
        assert_eq!(
            negotiated.peer_data_address("1.2.3.4:5".parse().unwrap()),
            None
        );
    }

    #[test]
    fn different_connection_schemas_are_refused() {
        let mut other = peer();
        other.schema_uri = "urn:other".into();
        let error = Negotiated::new(&example(), &other).unwrap_err();
        assert_eq!(
            error,
            "peer uses connection schema urn:other, this node uses urn:lessgate:less:connection:1"
        );
    }
}
