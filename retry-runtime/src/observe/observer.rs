//! [`Observer`]: what the events and the counter keep of one site.

#[cfg(feature = "metrics")]
use std::sync::OnceLock;

#[cfg(feature = "metrics")]
use super::outcome::{OUTCOMES, Outcome};
use super::repeats::Repeats;

/// One site's labels, its counters (registered on its first call) and the repeats of its
/// give-ups: a field of the site's `static`, so the events need nothing above them.
#[derive(Debug)]
pub(crate) struct Observer {
    /// The `system` label.
    #[cfg_attr(not(any(feature = "tracing", feature = "metrics")), allow(dead_code))]
    pub(crate) system: &'static str,
    /// The `operation` label.
    #[cfg_attr(not(any(feature = "tracing", feature = "metrics")), allow(dead_code))]
    pub(crate) operation: &'static str,
    /// Its give-ups, for logging them once per interval (`repeats.rs`).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(super) give_ups: Repeats,
    /// Its answers from a `fallback`, logged once per interval the same way, in lines of their
    /// own: a degraded answer is a WARN, not a give-up's ERROR.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(super) fallbacks: Repeats,
    /// Its counters, one per outcome, registered on its first call.
    #[cfg(feature = "metrics")]
    counters: OnceLock<[metrics::Counter; OUTCOMES]>,
}

impl Observer {
    /// The observer of a site with these labels; nothing is registered before its first call.
    pub(crate) const fn new(system: &'static str, operation: &'static str) -> Observer {
        Observer {
            system,
            operation,
            give_ups: Repeats::new(),
            fallbacks: Repeats::new(),
            #[cfg(feature = "metrics")]
            counters: OnceLock::new(),
        }
    }

    /// The site's counters, one per outcome: registered on its first call ([`register`]).
    #[cfg(feature = "metrics")]
    pub(super) fn counters(&'static self) -> &'static [metrics::Counter; OUTCOMES] {
        self.counters
            .get_or_init(|| register(self.system, self.operation))
    }
}

/// The counters of one site, registered with the global recorder on the site's first call and
/// kept: later calls count with an atomic add, no lookup, no allocation. Install the recorder
/// before the first call (as every `metrics` exporter asks). Every label value is a
/// `&'static str` written in the source (a `system`, a fn's name or its `name = "…"`, an
/// outcome), so the number of series is bounded by the code, never by the traffic.
#[cfg(feature = "metrics")]
fn register(system: &'static str, operation: &'static str) -> [metrics::Counter; OUTCOMES] {
    Outcome::ALL.map(|outcome| {
        metrics::counter!(
            "retry_attempts_total",
            "system" => system,
            "operation" => operation,
            "outcome" => outcome.label()
        )
    })
}
