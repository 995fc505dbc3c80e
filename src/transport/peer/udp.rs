//! The node's one UDP data socket: receives every peer's LESS datagrams and
//! hands each to the link whose peer data address it came from
//! (docs/peer-link.md §7.1). Datagrams from any other address are
//! counted and dropped before any parsing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use super::link::LinkId;

/// Datagrams queued per link between the socket task and the link task. A
/// link that falls this far behind loses datagrams, which LESS re-sends.
pub const ROUTE_QUEUE: usize = 1024;
/// Largest datagram read: the largest UDP payload. The MTU check is the
/// session's; this buffer only has to hold anything the socket can deliver.
const RECEIVE_BUFFER: usize = 65_536;

/// Route table: peer data address to the owning link and its queue.
type Table = HashMap<SocketAddr, (LinkId, mpsc::Sender<Vec<u8>>)>;

/// Where datagrams from each peer data address go.
#[derive(Debug, Default)]
pub(super) struct Routes {
    table: Mutex<Table>,
    /// Datagrams from addresses no link knows.
    pub(super) unknown_source: AtomicU64,
    /// Datagrams dropped because their link's queue was full.
    pub(super) queue_full: AtomicU64,
}

impl Routes {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Routes datagrams from `source` to a new queue owned by `link`,
    /// replacing any earlier route for that address.
    pub(super) fn register(&self, source: SocketAddr, link: LinkId) -> mpsc::Receiver<Vec<u8>> {
        let (sender, receiver) = mpsc::channel(ROUTE_QUEUE);
        self.lock().insert(source, (link, sender));
        receiver
    }

    /// Removes the route for `source` if `link` still owns it.
    pub(super) fn unregister(&self, source: SocketAddr, link: LinkId) {
        let mut table = self.lock();
        if table.get(&source).is_some_and(|(owner, _)| *owner == link) {
            table.remove(&source);
        }
    }

    fn deliver(&self, source: SocketAddr, datagram: &[u8]) {
        let sender = self.lock().get(&source).map(|(_, sender)| sender.clone());
        match sender {
            None => {
                let count = self.unknown_source.fetch_add(1, Ordering::Relaxed) + 1;
                if worth_logging(count) {
                    debug!(%source, count, "datagram from unknown source dropped");
                }
            }
            Some(sender) => {
                if sender.try_send(datagram.to_vec()).is_err() {
                    let count = self.queue_full.fetch_add(1, Ordering::Relaxed) + 1;
                    // A flood is bounded here, per link, so it cannot starve
                    // the other links; rate-limited like the line above.
                    if worth_logging(count) {
                        warn!(
                            %source,
                            count,
                            limit = ROUTE_QUEUE,
                            "datagrams refused: the link's receive queue is full (peer sends faster than the link drains)"
                        );
                    }
                }
            }
        }
    }
}

/// Whether the `count`th refusal of a kind is logged: the first and then
/// every [`LOG_EVERY`]th, so a flood costs a few lines, not one per datagram.
fn worth_logging(count: u64) -> bool {
    count == 1 || count % LOG_EVERY == 0
}

/// One refusal line per this many refusals of a kind, after the first.
const LOG_EVERY: u64 = 1000;

/// Receives until shutdown.
pub(super) async fn run(
    socket: Arc<UdpSocket>,
    routes: Arc<Routes>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; RECEIVE_BUFFER];
    loop {
        tokio::select! {
            _ = super::stopped(&mut shutdown) => return,
            received = socket.recv_from(&mut buffer) => match received {
                Ok((len, source)) => routes.deliver(source, &buffer[..len]),
                // ICMP errors surface here on some platforms; the socket
                // itself is still fine.
                Err(error) => warn!(%error, "udp data socket receive error"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_link_that_does_not_drain_holds_at_most_route_queue_datagrams() {
        let routes = Routes::default();
        let mut flooded = routes.register(address(7001), LinkId(1));
        let mut other = routes.register(address(7002), LinkId(2));
        let extra = 2_500;
        for i in 0..ROUTE_QUEUE + extra {
            routes.deliver(address(7001), &[(i % 256) as u8; 1200]);
        }
        // The other link's queue is its own: the flood does not fill it.
        routes.deliver(address(7002), &[0xab]);
        assert_eq!(routes.queue_full.load(Ordering::Relaxed), extra as u64);
        let mut held = 0;
        while let Ok(datagram) = flooded.try_recv() {
            assert_eq!(datagram.len(), 1200);
            held += 1;
        }
        assert_eq!(held, ROUTE_QUEUE);
        assert_eq!(other.try_recv().ok(), Some(vec![0xab]));
    }

    #[test]
    fn unknown_sources_are_counted_and_never_queued() {
        let routes = Routes::default();
        let mut known = routes.register(address(7001), LinkId(1));
        for _ in 0..10 {
            routes.deliver(address(9999), &[1, 2, 3]);
        }
        assert_eq!(routes.unknown_source.load(Ordering::Relaxed), 10);
        assert!(known.try_recv().is_err());
        // A route taken over by another link no longer reaches the first.
        routes.unregister(address(7001), LinkId(2));
        routes.deliver(address(7001), &[4]);
        assert_eq!(known.try_recv().ok(), Some(vec![4]));
        routes.unregister(address(7001), LinkId(1));
        routes.deliver(address(7001), &[5]);
        assert_eq!(routes.unknown_source.load(Ordering::Relaxed), 11);
    }

    #[test]
    fn refusals_are_logged_first_and_every_thousandth() {
        let logged: Vec<u64> = (1..=5_000).filter(|&n| worth_logging(n)).collect();
        assert_eq!(logged, [1, 1000, 2000, 3000, 4000, 5000]);
    }
}
