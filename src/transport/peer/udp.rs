//! The node's one UDP data socket: receives every peer's LESS datagrams and
//! hands each to the link whose peer data address it came from
//! (docs/peer-link.md section 7.1). Datagrams from any other address are
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
                // Rate-limited: the first and then every 1000th.
                if count == 1 || count % 1000 == 0 {
                    debug!(%source, count, "datagram from unknown source dropped");
                }
            }
            Some(sender) => {
                if sender.try_send(datagram.to_vec()).is_err() {
                    let count = self.queue_full.fetch_add(1, Ordering::Relaxed) + 1;
                    // A flood is bounded here, per link, so it cannot starve
                    // the other links; rate-limited like the line above.
                    if count == 1 || count % 1000 == 0 {
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
