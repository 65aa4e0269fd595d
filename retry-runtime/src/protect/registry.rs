//! The registry of protections: system name → its breaker and bulkhead, leaked so that a call
//! site holds a `&'static` and never takes the lock again (the budget's registry,
//! `budget/registry.rs`, works the same way; resilience4j keeps one registry per kind too).
//!
//! Each system's settings come from two places: the code ([`System::set_breaker`](crate::System::set_breaker),
//! [`System::set_bulkhead`](crate::System::set_bulkhead))
//! and the configuration (`crate::config`), which may only tighten them. The cell holds what is
//! in effect; the entry remembers what the code asked for, so that a reload can recompute it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::breaker::BreakerState;
use super::bulkhead::BulkheadState;
use super::protection::Protection;
use super::settings::Settings;

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

/// [`System::breaker_state`](crate::System::breaker_state) by name.
pub(crate) fn breaker_state(system: &str) -> Option<BreakerState> {
    lookup(system)
        .filter(|p| p.breaker.is_enabled())
        .map(|p| p.breaker.state())
}

/// [`System::bulkhead_state`](crate::System::bulkhead_state) by name.
pub(crate) fn bulkhead_state(system: &str) -> Option<BulkheadState> {
    lookup(system)
        .filter(|p| p.bulkhead.is_enabled())
        .map(|p| p.bulkhead.state())
}
