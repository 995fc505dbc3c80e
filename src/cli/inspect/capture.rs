//! The UDP datagrams of a packet capture, for `lessgate inspect less --pcap`.
//!
//! Reads classic pcap and pcapng (the `pcap-file` crate) and takes each
//! frame apart with `etherparse`: Ethernet, Linux cooked (SLL), raw IP and
//! BSD loopback link types. Keeps the UDP datagrams whose source or
//! destination port is the node's LESS data port (or, for `inspect knet`,
//! the UDP datagrams and TCP segments of the kNet port). IP fragments are skipped
//! (LESS datagrams are bounded by the link MTU, 1200 bytes by default, so a
//! fragmented one means a misconfigured MTU). This file reads bytes only.

use std::time::Duration;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;

/// One captured UDP datagram.
#[derive(Debug, Clone, PartialEq)]
pub struct Datagram {
    /// Capture time, seconds since the Unix epoch.
    pub time: f64,
    /// `ip:port` of the sender (empty when not from a capture).
    pub src: String,
    /// `ip:port` of the receiver.
    pub dst: String,
    /// The UDP payload.
    pub bytes: Vec<u8>,
}

impl Datagram {
    /// A frame that did not come from a capture (`--hex-lines`).
    pub fn unaddressed(bytes: Vec<u8>) -> Datagram {
        Datagram {
            time: 0.0,
            src: String::new(),
            dst: String::new(),
            bytes,
        }
    }
}

/// pcapng files start with a section header block of this type.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// The UDP datagrams to or from `port` in a pcap or pcapng capture, in
/// capture order.
pub fn udp_datagrams(capture: &[u8], port: u16) -> Result<Vec<Datagram>, String> {
    let mut out = Vec::new();
    for_each_frame(capture, |link, time, data| {
        push_udp(&mut out, link, time, data, port)
    })?;
    Ok(out)
}

/// One captured TCP segment (`lessgate inspect knet`).
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Capture time, seconds since the Unix epoch.
    pub time: f64,
    /// `ip:port` of the sender.
    pub src: String,
    /// `ip:port` of the receiver.
    pub dst: String,
    /// The sequence number of the first payload byte (of the SYN if set).
    pub seq: u32,
    /// SYN and FIN flags.
    pub syn: bool,
    pub fin: bool,
    /// The TCP payload.
    pub bytes: Vec<u8>,
}

/// The TCP segments to or from `port` in a pcap or pcapng capture, in
/// capture order (retransmissions included: the caller orders by `seq`).
pub fn tcp_segments(capture: &[u8], port: u16) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    for_each_frame(capture, |link, time, data| {
        push_tcp(&mut out, link, time, data, port)
    })?;
    Ok(out)
}

/// Calls `frame` with the link type, time and bytes of every captured frame.
fn for_each_frame(
    capture: &[u8],
    mut frame: impl FnMut(DataLink, Duration, &[u8]),
) -> Result<(), String> {
    if capture.starts_with(&PCAPNG_MAGIC) {
        let mut reader = PcapNgReader::new(capture).map_err(|e| format!("pcapng: {e}"))?;
        // Link types of the interfaces declared so far, by interface id.
        let mut links = Vec::new();
        while let Some(block) = reader.next_block() {
            match block.map_err(|e| format!("pcapng: {e}"))? {
                Block::SectionHeader(_) => links.clear(),
                Block::InterfaceDescription(interface) => links.push(interface.linktype),
                Block::EnhancedPacket(packet) => {
                    let link = usize::try_from(packet.interface_id)
                        .ok()
                        .and_then(|id| links.get(id).copied())
                        .ok_or("pcapng: packet of an undeclared interface")?;
                    frame(link, packet.timestamp, &packet.data);
                }
                _ => {}
            }
        }
    } else {
        let mut reader = PcapReader::new(capture).map_err(|e| format!("pcap: {e}"))?;
        let link = reader.header().datalink;
        while let Some(packet) = reader.next_packet() {
            let packet = packet.map_err(|e| format!("pcap: {e}"))?;
            frame(link, packet.timestamp, &packet.data);
        }
    }
    Ok(())
}

/// Takes a frame of link type `link` apart down to its transport layer.
fn slice(link: DataLink, data: &[u8]) -> Option<SlicedPacket<'_>> {
    let sliced = match link {
        DataLink::ETHERNET => SlicedPacket::from_ethernet(data),
        DataLink::LINUX_SLL => SlicedPacket::from_linux_sll(data),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => SlicedPacket::from_ip(data),
        // BSD loopback: a 4-byte address family in host order, then IP.
        DataLink::NULL | DataLink::LOOP => SlicedPacket::from_ip(data.get(4..)?),
        _ => return None,
    };
    sliced.ok()
}

/// The source and destination addresses of a sliced packet.
fn addresses(sliced: &SlicedPacket<'_>) -> Option<(String, String)> {
    match &sliced.net {
        Some(NetSlice::Ipv4(ip)) => Some((
            ip.header().source_addr().to_string(),
            ip.header().destination_addr().to_string(),
        )),
        Some(NetSlice::Ipv6(ip)) => Some((
            format!("[{}]", ip.header().source_addr()),
            format!("[{}]", ip.header().destination_addr()),
        )),
        None => None,
    }
}

fn push_udp(out: &mut Vec<Datagram>, link: DataLink, time: Duration, data: &[u8], port: u16) {
    let Some(sliced) = slice(link, data) else {
        return;
    };
    let Some(TransportSlice::Udp(udp)) = &sliced.transport else {
        return;
    };
    if udp.source_port() != port && udp.destination_port() != port {
        return;
    }
    let Some((src, dst)) = addresses(&sliced) else {
        return;
    };
    out.push(Datagram {
        time: time.as_secs_f64(),
        src: format!("{src}:{}", udp.source_port()),
        dst: format!("{dst}:{}", udp.destination_port()),
        bytes: udp.payload().to_vec(),
    });
}

fn push_tcp(out: &mut Vec<Segment>, link: DataLink, time: Duration, data: &[u8], port: u16) {
    let Some(sliced) = slice(link, data) else {
        return;
    };
    let Some(TransportSlice::Tcp(tcp)) = &sliced.transport else {
        return;
    };
    if tcp.source_port() != port && tcp.destination_port() != port {
        return;
    }
    let Some((src, dst)) = addresses(&sliced) else {
        return;
    };
    out.push(Segment {
        time: time.as_secs_f64(),
        src: format!("{src}:{}", tcp.source_port()),
        dst: format!("{dst}:{}", tcp.destination_port()),
        seq: tcp.sequence_number(),
        syn: tcp.syn(),
        fin: tcp.fin(),
        bytes: tcp.payload().to_vec(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use pcap_file::pcap::{PcapPacket, PcapWriter};

    fn udp_frame(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let builder = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([127, 0, 0, 1], [127, 0, 0, 2], 64)
            .udp(src_port, dst_port);
        let mut frame = Vec::with_capacity(builder.size(payload.len()));
        builder.write(&mut frame, payload).unwrap();
        frame
    }

    #[test]
    fn picks_the_datagrams_of_the_port() {
        let mut writer = PcapWriter::new(Vec::new()).unwrap();
        let frames = [
            udp_frame(40000, 7000, b"to"),
            udp_frame(5353, 5353, b"other"),
            udp_frame(7000, 40000, b"from"),
        ];
        for (i, frame) in frames.iter().enumerate() {
            let time = Duration::from_micros(1_000_000 + i as u64);
            let packet = PcapPacket::new(time, frame.len() as u32, frame);
            writer.write_packet(&packet).unwrap();
        }
        let capture = writer.into_writer();
        let datagrams = udp_datagrams(&capture, 7000).unwrap();
        assert_eq!(datagrams.len(), 2);
        assert_eq!(datagrams[0].src, "127.0.0.1:40000");
        assert_eq!(datagrams[0].dst, "127.0.0.2:7000");
        assert_eq!(datagrams[0].bytes, b"to");
        assert_eq!(datagrams[1].bytes, b"from");
        assert_eq!(datagrams[1].time, 1.000002);
        // Truncated captures are errors, not panics.
        for len in 0..capture.len() {
            let _ = udp_datagrams(&capture[..len], 7000);
        }
        assert!(udp_datagrams(b"not a capture", 7000).is_err());
    }
}
