//! What the code sets for a system beside its sites: its circuit breaker ([`set_breaker`]) and
//! bulkhead ([`set_bulkhead`]), each with the warning that names the system's `#[retry]` sites
//! compiled without `protect`, and the same warning when the configuration gives a system a
//! protection it did not have ([`refresh`]). Above both the protections and the sites, since
//! it names both.

use crate::protect::{self, Breaker, Bulkhead, Protection};
use crate::site::listed;

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
    let protection = protect::for_system(system);
    protection.set_code(|code| code.breaker = Some(breaker));
    listed::warn_unprotected(protection.system, "a circuit breaker");
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
    let protection = protect::for_system(system);
    protection.set_code(|code| code.bulkhead = Some(bulkhead));
    listed::warn_unprotected(protection.system, "a bulkhead");
}

/// Puts `protection`'s code settings, tightened by the configuration now in force, into effect
/// (the configuration changed), and logs the sites without `protect` when this gives the system
/// a protection it did not have.
pub(crate) fn refresh(protection: &Protection) {
    let had = (
        protection.breaker.is_enabled(),
        protection.bulkhead.is_enabled(),
    );
    protection.refresh();
    if !had.0 && protection.breaker.is_enabled() {
        listed::warn_unprotected(protection.system, "a circuit breaker");
    }
    if !had.1 && protection.bulkhead.is_enabled() {
        listed::warn_unprotected(protection.system, "a bulkhead");
    }
}
