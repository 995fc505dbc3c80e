//! Larger kernel buffers for the node's UDP sockets (peer data, kNet).
//!
//! The default (about 200 KiB, some 90 full datagrams of kernel
//! accounting) overflows when a burst arrives while the node is busy: a
//! peer's window of 64 datagrams meeting a burst of acknowledgements and
//! re-sends, or a native client sending a tick's thousands of moves at
//! once (at 10 000 moves per tick over kNet UDP the node saw 43 % of them).
//! The kernel drops what does not fit; LESS and kNet's reliable messages
//! re-send it, its unreliable ones are lost. The kernel caps the request
//! at `net.core.rmem_max` / `wmem_max`.

use tracing::debug;

/// Buffer asked for each way.
const UDP_SOCKET_BUFFER: usize = 4 << 20;

/// Best effort: a smaller buffer still works, with more drops under bursts.
pub fn enlarge_buffers(socket: socket2::SockRef<'_>, what: &'static str) {
    if let Err(error) = socket.set_recv_buffer_size(UDP_SOCKET_BUFFER) {
        debug!(%error, socket = what, "cannot enlarge the UDP receive buffer");
    }
    if let Err(error) = socket.set_send_buffer_size(UDP_SOCKET_BUFFER) {
        debug!(%error, socket = what, "cannot enlarge the UDP send buffer");
    }
    debug!(
        socket = what,
        receive = socket.recv_buffer_size().unwrap_or(0),
        send = socket.send_buffer_size().unwrap_or(0),
        "UDP socket buffers"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_grow_beyond_the_default_where_the_kernel_allows() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = socket2::SockRef::from(&socket).recv_buffer_size().unwrap();
        enlarge_buffers(socket2::SockRef::from(&socket), "test");
        let after = socket2::SockRef::from(&socket).recv_buffer_size().unwrap();
        // The kernel caps the request at rmem_max (and reports twice what
        // it was asked for, its own accounting included).
        let cap = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok());
        match cap {
            Some(cap) if cap > before => assert!(after > before, "{before} -> {after}"),
            _ => assert!(after >= before, "{before} -> {after}"),
        }
    }
}
