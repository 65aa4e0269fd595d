//! Every `#[retry]` site of the program, registered at link time (`inventory`), so that the
//! configuration can check a value against what each site compiled, and
//! [`System::set_breaker`](crate::System::set_breaker) can name the sites of a system that were compiled without `protect`.

use super::Site;

/// One `#[retry]` site, as its expansion registers it.
#[doc(hidden)]
pub struct SiteEntry(&'static Site);

impl SiteEntry {
    /// The entry of `site`.
    pub const fn new(site: &'static Site) -> SiteEntry {
        SiteEntry(site)
    }
}

inventory::collect!(SiteEntry);

/// The sites of `system`.
pub(crate) fn of(system: &str) -> impl Iterator<Item = &'static Site> + '_ {
    inventory::iter::<SiteEntry>
        .into_iter()
        .map(|entry| entry.0)
        .filter(move |site| site.system == system)
}

/// Every site.
pub(crate) fn every() -> impl Iterator<Item = &'static Site> {
    inventory::iter::<SiteEntry>
        .into_iter()
        .map(|entry| entry.0)
}

/// One WARN naming the sites of `system` compiled without `protect`, if any: `what` (a breaker,
/// a bulkhead) protects the other sites only.
pub(crate) fn warn_unprotected(system: &str, what: &str) {
    let unprotected = unprotected(system);
    #[cfg(feature = "tracing")]
    if !unprotected.is_empty() {
        tracing::warn!(
            system,
            sites = %unprotected.join(", "),
            "{what} is set for this system, but these #[retry] sites were compiled without `protect`: they neither consult nor feed it. Add `protect` to them: #[retry(…, system = \"{system}\", protect)]"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (unprotected, what);
}

/// The operations of the sites of `system` compiled without `protect`.
pub(crate) fn unprotected(system: &str) -> Vec<&'static str> {
    of(system)
        .filter(|site| !site.protect)
        .map(|site| site.operation)
        .collect()
}
