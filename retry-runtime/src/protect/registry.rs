//! The registry of protections: system name → its breaker and bulkhead, leaked so that a call
//! site holds a `&'static` and never takes the lock again (the budget's registry,
//! `budget/registry.rs`, works the same way; resilience4j keeps one registry per kind too).
//!
//! Each system's settings come from two places: the code ([`set_breaker`], [`set_bulkhead`])
//! and the configuration (`crate::config`), which may only tighten them. The cell holds what is
//! in effect; the entry remembers what the code asked for, so that a reload can recompute it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::breaker::{Breaker, BreakerState};
use super::bulkhead::{Bulkhead, BulkheadState};
use super::protection::Protection;
use super::settings::Settings;
use super::sites;

impl Protection {
    /// Puts the code's settings, tightened by the configuration now in force, into effect (the
    /// configuration changed). Logs the sites without `protect` when this gives the system a
    /// protection it did not have.
    pub(crate) fn refresh(&self) {
        let had = (self.breaker.is_enabled(), self.bulkhead.is_enabled());
        self.set_code(|_| {});
        if !had.0 && self.breaker.is_enabled() {
            sites::warn_unprotected(self.system, "a circuit breaker");
        }
        if !had.1 && self.bulkhead.is_enabled() {
            sites::warn_unprotected(self.system, "a bulkhead");
        }
    }
}

type Registry = BTreeMap<&'static str, &'static Protection>;

static REGISTRY: Mutex<Registry> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, Registry> {
    // Nothing panics while the lock is held; recover anyway rather than propagate a panic.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The protections of `system`, registered (with neither breaker nor bulkhead) on first use.
/// Takes the registry's lock: call it once per call site and keep the handle.
pub(crate) fn for_system(system: &str) -> &'static Protection {
    let mut registry = registry();
    if let Some(&protection) = registry.get(system) {
        return protection;
    }
    let name: &'static str = Box::leak(Box::from(system));
    let protection: &'static Protection = Box::leak(Box::new(Protection::new(name)));
    // The configuration may already give it a breaker or a bulkhead.
    protection.put_into_effect(Settings::default());
    registry.insert(name, protection);
    protection
}

/// Every system registered so far.
pub(crate) fn all() -> Vec<&'static Protection> {
    registry().values().copied().collect()
}

/// The protections of `system`, if registered.
pub(crate) fn lookup(system: &str) -> Option<&'static Protection> {
    registry().get(system).copied()
}

/// Gives `system` (the `system = "…"` of `#[retry]`) a circuit breaker, replacing any it had;
/// it starts closed. Every `#[retry(…, system = "…", protect)]` site naming the system, and the
/// tower layer and reqwest middleware built with `.protect()`, share it. Meant for start-up,
/// like [`set_budget`](crate::set_budget); the configuration (`crate::config`) may tighten it.
///
/// Logs one WARN naming the `#[retry]` sites of the system compiled without `protect`: they
/// neither consult nor feed the breaker.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{breaker_state, set_breaker, Breaker, BreakerState};
///
/// set_breaker("partner-api", Breaker::new().consecutive_failures(5));
/// assert_eq!(breaker_state("partner-api"), Some(BreakerState::Closed));
/// assert_eq!(breaker_state("no-such-system"), None);
/// ```
pub fn set_breaker(system: &str, breaker: Breaker) {
    let protection = for_system(system);
    protection.set_code(|code| code.breaker = Some(breaker));
    sites::warn_unprotected(protection.system, "a circuit breaker");
}

/// Gives `system` a bulkhead, replacing any it had: at most `max_in_flight` calls at once,
/// each counted from its first attempt to its last, backoff pauses included. Shared like the
/// breaker ([`set_breaker`]); the configuration may lower its limit.
///
/// ```
/// use retry_runtime::{bulkhead_state, set_bulkhead, Bulkhead, BulkheadState};
///
/// set_bulkhead("receipts", Bulkhead::new(20));
/// assert_eq!(bulkhead_state("receipts"), Some(BulkheadState { in_flight: 0, limit: 20 }));
/// ```
pub fn set_bulkhead(system: &str, bulkhead: Bulkhead) {
    let protection = for_system(system);
    protection.set_code(|code| code.bulkhead = Some(bulkhead));
    sites::warn_unprotected(protection.system, "a bulkhead");
}

/// The breaker of `system` as it stands: `None` when it has none (neither the code nor the
/// configuration gave it one). Takes the registry's lock: for a health endpoint, not for every
/// call.
pub fn breaker_state(system: &str) -> Option<BreakerState> {
    lookup(system)
        .filter(|p| p.breaker.is_enabled())
        .map(|p| p.breaker.state())
}

/// The bulkhead of `system` as it stands (calls in flight, limit): `None` when it has none.
/// Takes the registry's lock, like [`breaker_state`].
pub fn bulkhead_state(system: &str) -> Option<BulkheadState> {
    lookup(system)
        .filter(|p| p.bulkhead.is_enabled())
        .map(|p| p.bulkhead.state())
}
