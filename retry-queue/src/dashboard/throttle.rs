//! Locking out a client that guesses tokens: after [`FREE_FAILURES`] wrong bearer tokens from
//! one client address, each further wrong one locks that address out for a while, doubling
//! from [`FIRST_LOCK`] up to [`MAX_LOCK`]. While locked, **every** API request from the address
//! is answered 429 with `Retry-After`, unjudged, the right token included: a guesser learns
//! nothing from its guesses while the lock holds. Other addresses are not touched, so a guesser
//! cannot lock the operators out (one global lock would).
//!
//! An address is an IPv4 address, or the /64 prefix of an IPv6 one (a host usually holds a
//! whole /64, so its single addresses are free to rotate). The state is a map of at most
//! [`MAX_CLIENTS`] addresses behind a mutex; when full, the addresses neither locked nor failed
//! within [`QUIET`] are forgotten first, then the one whose last failure is oldest. An address
//! forgets its failures after [`QUIET`] without one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Wrong tokens answered plainly (401) before the first lock.
pub(crate) const FREE_FAILURES: u32 = 10;
/// The first lock, after the [`FREE_FAILURES`]th wrong token.
pub(crate) const FIRST_LOCK: Duration = Duration::from_secs(5);
/// The longest lock: past it, one guess per this time.
pub(crate) const MAX_LOCK: Duration = Duration::from_secs(300);
/// Failures older than this (with none since) are forgotten.
pub(crate) const QUIET: Duration = Duration::from_secs(15 * 60);
/// The most client addresses remembered at once.
pub(crate) const MAX_CLIENTS: usize = 4096;

/// What a wrong token gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// 401: judged and refused (it may have started a lock for the next requests).
    Refused,
    /// 429: the address is locked out for this long still (`Retry-After`, rounded up).
    Locked(Duration),
}

/// Who a request comes from, as the throttle counts it: an IPv4 address, an IPv6 /64, or
/// `None` when the server does not say (a router mounted without `ConnectInfo`: every such
/// request shares one count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Client(Option<u128>);

impl Client {
    /// The client at `addr` (`None`: unknown).
    pub(crate) fn of(addr: Option<IpAddr>) -> Client {
        Client(addr.map(|ip| match ip.to_canonical() {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            // The /64, marked so that it cannot equal an IPv4 address.
            IpAddr::V6(v6) => (u128::from(v6) >> 64) | (1 << 127),
        }))
    }
}

/// The failures of wrong tokens by client address, shared by every request of one dashboard.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    clients: Mutex<HashMap<Client, State>>,
}

#[derive(Clone, Copy, Debug)]
struct State {
    failures: u32,
    last_failure: Instant,
    locked_until: Option<Instant>,
}

impl Throttle {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Client, State>> {
        // A panic elsewhere while holding it leaves valid numbers: keep going.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long `client` is still locked out at `now`, if it is: checked before the token.
    pub(crate) fn locked(&self, client: Client, now: Instant) -> Option<Duration> {
        let clients = self.lock();
        let until = clients.get(&client)?.locked_until?;
        (now < until).then(|| until - now)
    }

    /// A wrong token arrived from `client` at `now` (the caller's clock: `Instant::now()` in
    /// the server, an injected one in tests).
    pub(crate) fn wrong_token(&self, client: Client, now: Instant) -> Verdict {
        let mut clients = self.lock();
        if !clients.contains_key(&client) && clients.len() >= MAX_CLIENTS {
            make_room(&mut clients, now);
        }
        let state = clients.entry(client).or_insert(State {
            failures: 0,
            last_failure: now,
            locked_until: None,
        });
        state.judge(now)
    }

    /// How many addresses it remembers.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Forgets the quiet addresses, or else the unlocked one whose last failure is oldest.
fn make_room(clients: &mut HashMap<Client, State>, now: Instant) {
    clients.retain(|_, s| {
        s.locked_until.is_some_and(|until| now < until)
            || now.saturating_duration_since(s.last_failure) < QUIET
    });
    if clients.len() >= MAX_CLIENTS {
        let unlocked = |s: &State| s.locked_until.is_none_or(|until| now >= until);
        let oldest = clients
            .iter()
            .filter(|(_, s)| unlocked(s))
            .min_by_key(|(_, s)| s.last_failure)
            .or_else(|| clients.iter().min_by_key(|(_, s)| s.last_failure))
            .map(|(client, _)| *client);
        if let Some(client) = oldest {
            clients.remove(&client);
        }
    }
}

impl State {
    fn judge(&mut self, now: Instant) -> Verdict {
        if let Some(until) = self.locked_until.filter(|until| now < *until) {
            return Verdict::Locked(until - now);
        }
        if now.saturating_duration_since(self.last_failure) >= QUIET {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        self.last_failure = now;
        if self.failures >= FREE_FAILURES {
            let doublings = (self.failures - FREE_FAILURES).min(16);
            let lock = FIRST_LOCK.saturating_mul(1 << doublings).min(MAX_LOCK);
            self.locked_until = Some(now + lock);
        }
        Verdict::Refused
    }
}

/// `Retry-After` in whole seconds, rounded up (at least 1).
pub(crate) fn retry_after_secs(left: Duration) -> u64 {
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const S: Duration = Duration::from_secs(1);

    fn v4(last: u8) -> Client {
        Client::of(Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))))
    }

    #[test]
    fn free_failures_then_doubling_locks_up_to_the_bound() {
        let throttle = Throttle::default();
        let me = v4(1);
        let t0 = Instant::now();
        for _ in 1..FREE_FAILURES {
            assert_eq!(throttle.wrong_token(me, t0), Verdict::Refused);
        }
        assert_eq!(throttle.locked(me, t0), None);
        // The 10th is judged, and locks the address for 5 s.
        assert_eq!(throttle.wrong_token(me, t0), Verdict::Refused);
        assert_eq!(throttle.locked(me, t0), Some(5 * S));
        assert_eq!(throttle.wrong_token(me, t0), Verdict::Locked(5 * S));
        assert_eq!(throttle.locked(me, t0 + 2 * S), Some(3 * S));
        // Locked attempts are not counted: the lock does not grow while it holds.
        assert_eq!(throttle.wrong_token(me, t0 + 4 * S), Verdict::Locked(S));
        assert_eq!(throttle.locked(me, t0 + 5 * S), None);
        let mut now = t0 + 5 * S;
        for expected in [10, 20, 40, 80, 160, 300, 300, 300] {
            assert_eq!(throttle.wrong_token(me, now), Verdict::Refused);
            assert_eq!(throttle.locked(me, now), Some(expected * S));
            now += expected * S;
        }
    }

    #[test]
    fn a_lock_holds_one_address_only() {
        let throttle = Throttle::default();
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            throttle.wrong_token(v4(1), t0);
        }
        assert_eq!(throttle.locked(v4(1), t0), Some(FIRST_LOCK));
        assert_eq!(throttle.locked(v4(2), t0), None);
        assert_eq!(throttle.wrong_token(v4(2), t0), Verdict::Refused);
        // One IPv6 /64 is one client; the next /64 another.
        let a = Client::of(Some(IpAddr::V6(Ipv6Addr::new(
            0x2001, 0xdb8, 0, 1, 0, 0, 0, 1,
        ))));
        let b = Client::of(Some(IpAddr::V6(Ipv6Addr::new(
            0x2001, 0xdb8, 0, 1, 9, 9, 9, 9,
        ))));
        let c = Client::of(Some(IpAddr::V6(Ipv6Addr::new(
            0x2001, 0xdb8, 0, 2, 0, 0, 0, 1,
        ))));
        for _ in 0..FREE_FAILURES {
            throttle.wrong_token(a, t0);
        }
        assert_eq!(throttle.locked(b, t0), Some(FIRST_LOCK));
        assert_eq!(throttle.locked(c, t0), None);
        // An IPv4-mapped IPv6 address is its IPv4 address.
        let mapped = Client::of(Some(IpAddr::V6(
            Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped(),
        )));
        assert_eq!(mapped, v4(1));
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_time() {
        let throttle = Throttle::default();
        let me = v4(1);
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES - 1 {
            assert_eq!(throttle.wrong_token(me, t0), Verdict::Refused);
        }
        let later = t0 + QUIET;
        for _ in 0..FREE_FAILURES - 1 {
            assert_eq!(throttle.wrong_token(me, later), Verdict::Refused);
        }
        assert_eq!(throttle.wrong_token(me, later), Verdict::Refused);
        assert_eq!(throttle.wrong_token(me, later), Verdict::Locked(FIRST_LOCK));
    }

    #[test]
    fn the_state_is_bounded_and_keeps_the_locks_it_can() {
        let throttle = Throttle::default();
        let t0 = Instant::now();
        let locked = v4(1);
        for _ in 0..FREE_FAILURES {
            throttle.wrong_token(locked, t0);
        }
        for i in 0..(MAX_CLIENTS as u32 + 100) {
            let other = Client::of(Some(IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i))));
            throttle.wrong_token(other, t0 + S);
        }
        assert_eq!(throttle.len(), MAX_CLIENTS);
        assert_eq!(throttle.locked(locked, t0 + S), Some(FIRST_LOCK - S));
        // Past the quiet time, the old addresses make room for new ones.
        let late = t0 + QUIET + S;
        throttle.wrong_token(v4(9), late);
        assert!(throttle.len() <= MAX_CLIENTS);
        assert_eq!(throttle.wrong_token(v4(9), late), Verdict::Refused);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(4001)), 5);
        assert_eq!(retry_after_secs(5 * S), 5);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
