//! Open TCP connections per remote IP address, shared by every listener of
//! a node (Tundra WebSocket, HTTP, kNet TCP): one host cannot hold more than
//! `[limits] max_connections_per_address` sockets however it spreads them,
//! so it cannot use up the node's file descriptors and lock others out.
//!
//! A connection holds an [`AddressSlot`] for as long as its socket is open;
//! dropping the slot gives the place back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Counts open connections per IP address against one cap.
#[derive(Debug, Clone)]
pub struct AddressLimits {
    max_per_address: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One open connection's place in its address's count.
#[derive(Debug)]
pub struct AddressSlot {
    address: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl AddressLimits {
    /// At most `max_per_address` connections open from each IP address.
    pub fn new(max_per_address: usize) -> AddressLimits {
        AddressLimits {
            max_per_address,
            open: Arc::default(),
        }
    }

    /// The cap per address.
    pub fn max_per_address(&self) -> usize {
        self.max_per_address
    }

    /// A place for one more connection from `address`, or `None` when it
    /// already holds `max_per_address`.
    pub fn try_acquire(&self, address: IpAddr) -> Option<AddressSlot> {
        let address = canonical(address);
        // The map is only counted in, never left half-updated: a poisoned
        // lock still holds consistent counts.
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(address).or_insert(0);
        if *count >= self.max_per_address {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            address,
            open: self.open.clone(),
        })
    }

    /// Connections open from `address`.
    pub fn open_from(&self, address: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&canonical(address)).copied().unwrap_or(0)
    }

    /// Addresses with at least one open connection (the map's size, which
    /// the cap on file descriptors bounds).
    pub fn addresses(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// An IPv4 peer on a dual-stack socket shows up as `::ffff:a.b.c.d`; it is
/// the same host as `a.b.c.d`.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn each_address_holds_at_most_the_cap_and_gets_places_back_on_close() {
        let limits = AddressLimits::new(2);
        let a1 = limits.try_acquire(ip("10.0.0.1")).expect("first");
        let a2 = limits.try_acquire(ip("10.0.0.1")).expect("second");
        assert!(limits.try_acquire(ip("10.0.0.1")).is_none());
        // Another host is not affected.
        let b1 = limits.try_acquire(ip("10.0.0.2")).expect("other host");
        assert_eq!(limits.open_from(ip("10.0.0.1")), 2);
        drop(a1);
        let a3 = limits
            .try_acquire(ip("10.0.0.1"))
            .expect("place given back");
        drop((a2, a3, b1));
        assert_eq!(limits.addresses(), 0, "no entry is left for closed hosts");
    }

    #[test]
    fn mapped_ipv4_counts_as_the_same_host() {
        let limits = AddressLimits::new(1);
        let _held = limits.try_acquire(ip("192.0.2.7")).unwrap();
        assert!(limits.try_acquire(ip("::ffff:192.0.2.7")).is_none());
        assert!(limits.try_acquire(ip("2001:db8::7")).is_some());
    }
}
