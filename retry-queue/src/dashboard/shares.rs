//! Each client address's share of the connection slots: at most
//! [`Limits::max_connections_per_address`](super::server::Limits) connections from one address
//! at once, so that one address (never-reading clients, half-sent requests re-opened as soon as
//! they are cut) cannot hold every slot and shut the operators of other addresses out. An
//! address is counted as the token's lock-out counts it ([`Client`]: an IPv4 address or an
//! IPv6 /64). A connection over its address's share is answered 503 and closed at once, never
//! queued: queued, it would hold a file descriptor and wait in front of other addresses.
//!
//! The map holds the addresses with a connection open only (an address leaves it with its
//! last connection), so it is bounded by the connection slots.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use super::throttle::Client;

/// The open connections of each client address, shared by the accept loop and the
/// connections' tasks.
#[derive(Debug)]
pub(crate) struct Shares {
    per_address: usize,
    open: Mutex<HashMap<Client, usize>>,
}

/// One connection's place in its address's share; leaving it (drop) frees the place.
#[derive(Debug)]
pub(crate) struct Share {
    shares: Arc<Shares>,
    client: Client,
}

impl Shares {
    /// At most `per_address` connections per address (at least 1).
    pub(crate) fn new(per_address: usize) -> Arc<Shares> {
        Arc::new(Shares {
            per_address: per_address.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a connection from `ip`, or `None` when its address holds its share.
    pub(crate) fn take(self: &Arc<Shares>, ip: IpAddr) -> Option<Share> {
        let client = Client::of(Some(ip));
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_insert(0);
        if *count >= self.per_address {
            return None;
        }
        *count += 1;
        Some(Share {
            shares: self.clone(),
            client,
        })
    }

    #[cfg(test)]
    fn addresses(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut open = self
            .shares
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    use super::Shares;

    #[test]
    fn an_address_holds_its_share_and_no_more_others_are_not_touched() {
        let shares = Shares::new(2);
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
        let first = shares.take(a).unwrap();
        let _second = shares.take(a).unwrap();
        assert!(shares.take(a).is_none());
        let other = shares.take(b);
        assert!(other.is_some());
        drop(first);
        assert!(shares.take(a).is_some());
        drop(other);
    }

    #[test]
    fn an_ipv6_64_is_one_address_and_addresses_leave_with_their_last_connection() {
        let shares = Shares::new(1);
        let one = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 1));
        let same_64 = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2));
        let held = shares.take(one).unwrap();
        assert!(shares.take(same_64).is_none());
        assert_eq!(shares.addresses(), 1);
        drop(held);
        assert_eq!(shares.addresses(), 0);
    }
}
