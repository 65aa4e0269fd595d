//! What the code sets for a system beside its sites: its circuit breaker ([`set_breaker`]) and
//! bulkhead ([`set_bulkhead`]) for the [`System`](crate::System) handle, each with the warning that names the system's `#[retry]` sites
//! compiled without `protect`, and the same warning when the configuration gives a system a
//! protection it did not have ([`refresh`]). Above both the protections and the sites, since
//! it names both.

use crate::protect::{self, Breaker, Bulkhead, Protection};
use crate::site::listed;

/// [`System::set_breaker`](crate::System::set_breaker) by name: replaces the system's breaker,
/// and logs one WARN naming the system's `#[retry]` sites compiled without `protect` (they
/// neither consult nor feed it).
pub(crate) fn set_breaker(system: &str, breaker: Breaker) {
    let protection = protect::for_system(system);
    protection.set_code(|code| code.breaker = Some(breaker));
    listed::warn_unprotected(protection.system, "a circuit breaker");
}

/// [`System::set_bulkhead`](crate::System::set_bulkhead) by name, with the same WARN.
pub(crate) fn set_bulkhead(system: &str, bulkhead: Bulkhead) {
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
