//! The kNet listener's UDP socket with batched system calls, through
//! `quinn-udp` (which knows each platform's calls and falls back to one
//! datagram per call where they are missing):
//!
//! - **receive**: up to [`RECV_SLOTS`] datagrams per call (`recvmmsg`), and
//!   a flow's datagrams coalesced by the kernel (GRO) split again here;
//! - **send**: a connection's run of equal-sized datagrams in one call (GSO,
//!   `UDP_SEGMENT`); the kernel or the network card cuts them apart, so the
//!   client still receives one kNet datagram per UDP datagram.
//!
//! At 10 000 entities the node sent 3 000 datagrams a second of 1 363 bytes
//! to five clients and received 5 000, one system call each.
//!
//! `quinn-udp` sets the socket to probe path MTU (never fragment); a kNet
//! datagram is at most 1 400 bytes and kNet has no MTU discovery of its
//! own, so the socket's own setting is put back: a path with a smaller MTU
//! still carries the node's datagrams as fragments, as it did before.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;
use tokio::net::UdpSocket;

use crate::knet::datagram::MAX_RECEIVE_DATAGRAM;

/// Receive buffers per call.
pub const RECV_SLOTS: usize = 16;

/// Bytes per send call at most: a UDP datagram's length limit, less room
/// for headers (GSO sends the run as one datagram to the kernel).
pub const MAX_SEND_BYTES: usize = 60_000;

/// A UDP socket with batched receive and segmented send.
#[derive(Debug)]
pub struct BatchSocket {
    socket: UdpSocket,
    state: UdpSocketState,
}

impl BatchSocket {
    pub fn new(socket: UdpSocket) -> io::Result<BatchSocket> {
        #[cfg(target_os = "linux")]
        let mtu_discovery = match socket.local_addr()? {
            SocketAddr::V4(_) => rustix::net::sockopt::ip_mtu_discover(&socket).ok(),
            SocketAddr::V6(_) => None,
        };
        let state = UdpSocketState::new(UdpSockRef::from(&socket))?;
        #[cfg(target_os = "linux")]
        if let Some(mtu_discovery) = mtu_discovery {
            rustix::net::sockopt::set_ip_mtu_discover(&socket, mtu_discovery)?;
        }
        Ok(BatchSocket { socket, state })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Datagrams one send may carry (1 without GSO).
    pub fn max_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Sends `contents` to `to`: one datagram, or with `segment_size`
    /// several of that size (the last may be shorter). Where the network
    /// card turns out not to segment (the first such send fails, and
    /// `quinn-udp` stops segmenting), the run goes out a datagram at a time.
    pub async fn send(
        &self,
        to: SocketAddr,
        contents: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        let segment_size = segment_size.filter(|&size| size > 0 && size < contents.len());
        let sent = self.send_one_call(to, contents, segment_size).await;
        match (sent, segment_size) {
            (Err(_), Some(size)) if self.max_segments() == 1 => {
                for datagram in contents.chunks(size) {
                    self.send_one_call(to, datagram, None).await?;
                }
                Ok(())
            }
            (sent, _) => sent,
        }
    }

    async fn send_one_call(
        &self,
        to: SocketAddr,
        contents: &[u8],
        segment_size: Option<usize>,
    ) -> io::Result<()> {
        let transmit = Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size,
            src_ip: None,
        };
        self.socket
            .async_io(Interest::WRITABLE, || {
                self.state
                    .try_send(UdpSockRef::from(&self.socket), &transmit)
            })
            .await
    }

    /// Waits for datagrams and fills `buffers`; returns how many slots
    /// were filled.
    pub async fn recv(&self, buffers: &mut RecvBuffers) -> io::Result<usize> {
        let RecvBuffers {
            storage,
            slot,
            metas,
        } = buffers;
        self.socket
            .async_io(Interest::READABLE, || {
                let mut chunks = storage.chunks_mut(*slot);
                let mut slices: [IoSliceMut<'_>; RECV_SLOTS] =
                    std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
                self.state
                    .recv(UdpSockRef::from(&self.socket), &mut slices, metas)
            })
            .await
    }

    /// Buffers for [`BatchSocket::recv`], each slot large enough for the
    /// coalesced datagrams the kernel may hand over at once, plus one byte
    /// so that a single datagram over kNet's limit shows as such.
    pub fn recv_buffers(&self) -> RecvBuffers {
        let slot = self.state.gro_segments().max(1) * (MAX_RECEIVE_DATAGRAM + 1);
        RecvBuffers {
            storage: vec![0; slot * RECV_SLOTS],
            slot,
            metas: [RecvMeta::default(); RECV_SLOTS],
        }
    }
}

/// Where [`BatchSocket::recv`] puts what it received.
pub struct RecvBuffers {
    storage: Vec<u8>,
    slot: usize,
    metas: [RecvMeta; RECV_SLOTS],
}

impl RecvBuffers {
    /// The datagrams of the first `filled` slots, in order, with their
    /// sources: coalesced ones cut at their stride.
    pub fn datagrams(&self, filled: usize) -> impl Iterator<Item = (SocketAddr, &[u8])> {
        self.metas
            .iter()
            .zip(self.storage.chunks(self.slot))
            .take(filled)
            .flat_map(|(meta, slot)| {
                let received = &slot[..meta.len.min(slot.len())];
                received
                    .chunks(meta.stride.max(1))
                    .map(move |datagram| (meta.addr, datagram))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair() -> (BatchSocket, UdpSocket) {
        let node = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let node = BatchSocket::new(node).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(node.local_addr().unwrap()).await.unwrap();
        (node, client)
    }

    #[tokio::test]
    async fn a_run_of_equal_datagrams_sent_at_once_arrives_as_separate_datagrams() {
        let (node, client) = pair().await;
        let to = client.local_addr().unwrap();
        let segments = node.max_segments().min(8);
        let mut run = Vec::new();
        for i in 0..segments {
            run.extend(std::iter::repeat_n(i as u8, 1363));
        }
        run.extend([0xEE; 700]); // a shorter last datagram
        node.send(to, &run, Some(1363)).await.unwrap();
        let mut buffer = [0u8; 4096];
        for i in 0..segments {
            let len = client.recv(&mut buffer).await.unwrap();
            assert_eq!(len, 1363);
            assert!(buffer[..len].iter().all(|&b| b == i as u8));
        }
        let len = client.recv(&mut buffer).await.unwrap();
        assert_eq!(&buffer[..len], &[0xEE; 700][..]);
    }

    #[tokio::test]
    async fn datagrams_come_back_one_by_one_with_their_source_and_oversize_shows() {
        let (node, client) = pair().await;
        let mut sent = Vec::new();
        for i in 0..40u8 {
            let datagram = vec![i; 100 + usize::from(i)];
            client.send(&datagram).await.unwrap();
            sent.push(datagram);
        }
        client.send(&[7; MAX_RECEIVE_DATAGRAM + 200]).await.unwrap();
        let mut buffers = node.recv_buffers();
        let mut received = Vec::new();
        while received.len() < sent.len() + 1 {
            let filled = node.recv(&mut buffers).await.unwrap();
            for (from, datagram) in buffers.datagrams(filled) {
                assert_eq!(from, client.local_addr().unwrap());
                received.push(datagram.to_vec());
            }
        }
        assert_eq!(&received[..sent.len()], &sent[..]);
        assert!(received[sent.len()].len() > MAX_RECEIVE_DATAGRAM);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_socket_keeps_its_own_path_mtu_setting() {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let before = rustix::net::sockopt::ip_mtu_discover(&socket).unwrap();
        let node = BatchSocket::new(socket).unwrap();
        assert_eq!(
            rustix::net::sockopt::ip_mtu_discover(&node.socket).unwrap(),
            before
        );
    }
}
