//! [`Site`]: everything one `#[retry]` fn (or one tower layer, one reqwest middleware) knows at
//! compile time, and the handles it looks up once on its first call: its system's budget,
//! breaker and bulkhead, its counters, and the repeats of its give-ups.

use std::sync::OnceLock;
use std::time::Duration;

use crate::backoff::{Jitter, Policy};
use crate::budget::{self, Budget};
#[cfg(feature = "metrics")]
use crate::observe::OUTCOMES;
use crate::observe::Repeats;
use crate::protect::Protection;

/// Everything one annotated fn knows at compile time; one `static` per fn, built by [`site`].
#[derive(Debug)]
pub struct Site {
    /// The external system's label (`system = "..."`, or the fn's name): the key of the retry
    /// budget, and a label of the events and the counter.
    pub system: &'static str,
    /// The operation's label (`name = "..."`, or the fn's name): read only when an event is
    /// emitted or the counters are registered, never on the happy path.
    pub operation: &'static str,
    /// The schedule, as compiled (the configuration may tighten it: `config::effective`).
    pub policy: Policy,
    /// `protect`: the loop consults the system's breaker and bulkhead, and feeds the breaker.
    pub protect: bool,
    /// The system's retry budget, looked up on the site's first call and kept.
    budget: OnceLock<&'static Budget>,
    /// The system's breaker and bulkhead, likewise (`protect/admission.rs`).
    pub(crate) protection: OnceLock<&'static Protection>,
    /// Its give-ups, for logging them once per interval (`observe/repeats.rs`).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) give_ups: Repeats,
    /// Its counters, registered on its first call (`observe.rs`).
    #[cfg(feature = "metrics")]
    pub(crate) counters: OnceLock<[metrics::Counter; OUTCOMES]>,
}

impl Site {
    /// A site for `policy` at run time: leaked, once per layer or middleware ([`BuiltSite`]).
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(super) fn leaked(
        system: &'static str,
        operation: &'static str,
        policy: Policy,
        protect: bool,
    ) -> &'static Site {
        Box::leak(Box::new(Site {
            system,
            operation,
            policy,
            protect,
            budget: OnceLock::new(),
            protection: OnceLock::new(),
            give_ups: Repeats::new(),
            #[cfg(feature = "metrics")]
            counters: OnceLock::new(),
        }))
    }

    /// The retry budget of this site's system.
    #[inline]
    pub(crate) fn budget(&'static self) -> &'static Budget {
        self.budget.get_or_init(|| budget::for_system(self.system))
    }
}

/// Builds a [`Site`] in a `static`: a policy the macro let through but the runtime refuses
/// fails the build here, in const evaluation.
#[allow(clippy::too_many_arguments)]
pub const fn site(
    system: &'static str,
    operation: &'static str,
    attempts: u32,
    delay_ms: u64,
    max_delay_ms: u64,
    jitter: Jitter,
    protect: bool,
) -> Site {
    match Policy::new(
        attempts,
        Duration::from_millis(delay_ms),
        Duration::from_millis(max_delay_ms),
        jitter,
    ) {
        Ok(policy) => Site {
            system,
            operation,
            policy,
            protect,
            budget: OnceLock::new(),
            protection: OnceLock::new(),
            give_ups: Repeats::new(),
            #[cfg(feature = "metrics")]
            counters: OnceLock::new(),
        },
        Err(_) => panic!("#[retry]: the macro and the runtime disagree on this policy"),
    }
}
