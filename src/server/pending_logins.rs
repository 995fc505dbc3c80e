//! Clients connected but not logged in yet, in total and per IP address.
//!
//! Connections that never log in cost nothing to open, so they get their own
//! small budget (`[limits] max_pending_logins` and
//! `max_pending_logins_per_address`) and never take the seats of logged-in
//! clients (`max_clients`). A client counts here from its connection until it
//! logs in or leaves, whichever is first.

use std::collections::HashMap;
use std::net::IpAddr;

/// Why a connection finds no place among the pending logins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingRefusal {
    /// `max_pending_logins` connections wait to log in.
    Total,
    /// Its address has `max_pending_logins_per_address` waiting.
    Address,
}

impl PendingRefusal {
    /// The config key whose limit was reached.
    pub fn key(self) -> &'static str {
        match self {
            PendingRefusal::Total => "limits.max_pending_logins",
            PendingRefusal::Address => "limits.max_pending_logins_per_address",
        }
    }
}

/// The pending logins, counted.
#[derive(Debug, Clone, Default)]
pub struct PendingLogins {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

impl PendingLogins {
    /// Counts one more pending login from `address` if both budgets allow.
    pub fn try_admit(
        &mut self,
        address: IpAddr,
        max_total: usize,
        max_per_address: usize,
    ) -> Result<(), PendingRefusal> {
        if self.total >= max_total {
            return Err(PendingRefusal::Total);
        }
        let from_address = self.per_address.entry(address).or_insert(0);
        if *from_address >= max_per_address {
            return Err(PendingRefusal::Address);
        }
        *from_address += 1;
        self.total += 1;
        Ok(())
    }

    /// A pending login from `address` ended: logged in, or gone.
    pub fn release(&mut self, address: IpAddr) {
        if let Some(count) = self.per_address.get_mut(&address) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_address.remove(&address);
            }
            self.total = self.total.saturating_sub(1);
        }
    }

    /// Pending logins from all addresses.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn budgets_per_address_and_in_total_are_both_kept() {
        let mut pending = PendingLogins::default();
        assert_eq!(pending.try_admit(ip(1), 3, 2), Ok(()));
        assert_eq!(pending.try_admit(ip(1), 3, 2), Ok(()));
        assert_eq!(pending.try_admit(ip(1), 3, 2), Err(PendingRefusal::Address));
        assert_eq!(pending.try_admit(ip(2), 3, 2), Ok(()));
        assert_eq!(pending.try_admit(ip(3), 3, 2), Err(PendingRefusal::Total));
        pending.release(ip(1));
        assert_eq!(pending.total(), 2);
        assert_eq!(pending.try_admit(ip(3), 3, 2), Ok(()));
        for address in [ip(1), ip(2), ip(3)] {
            pending.release(address);
        }
        assert_eq!(pending.total(), 0);
        assert!(pending.per_address.is_empty());
        // Releasing what was never admitted changes nothing.
        pending.release(ip(9));
        assert_eq!(pending.total(), 0);
    }
}
