//! [`Site`]: everything one `#[retry]` fn (or one tower layer, one reqwest middleware) knows at
//! compile time, and the handles it looks up once on its first call: its system's budget,
//! breaker and bulkhead, its counters, and the repeats of its give-ups.

use std::sync::OnceLock;
use std::time::Duration;

use crate::backoff::{Jitter, Policy};
use crate::budget::{self, Budget};
use crate::classify::Verdict;
use crate::observe;
use crate::protect::{self, Protection, Rejected};

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
    /// The system's breaker and bulkhead, likewise.
    protection: OnceLock<&'static Protection>,
    /// Its give-ups, for logging them once per interval (`observe/repeats.rs`).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) give_ups: observe::Repeats,
    #[cfg(feature = "metrics")]
    counters: OnceLock<[metrics::Counter; observe::OUTCOMES]>,
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
            give_ups: observe::Repeats::new(),
            #[cfg(feature = "metrics")]
            counters: OnceLock::new(),
        }))
    }

    /// The retry budget of this site's system.
    #[inline]
    pub(crate) fn budget(&'static self) -> &'static Budget {
        self.budget.get_or_init(|| budget::for_system(self.system))
    }

    /// The breaker and bulkhead of this site's system.
    #[inline]
    pub(crate) fn protection(&'static self) -> &'static Protection {
        self.protection
            .get_or_init(|| protect::for_system(self.system))
    }

    /// Whether the system's breaker lets an attempt through now; a refusal is counted.
    #[inline]
    pub(crate) fn admit(&'static self) -> Result<(), Rejected> {
        if self.protection().breaker.admit() {
            return Ok(());
        }
        let rejected = Rejected::BreakerOpen {
            system: self.system,
        };
        observe::rejected(self, rejected);
        Err(rejected)
    }

    /// Tells a protected site's breaker what became of an attempt: `None` a success, else its
    /// verdict. A transient failure counts against the system, a permanent error is an answer
    /// (the system is up), a rejection is nothing (R-RES-RE-X4). An unprotected site only tests
    /// its flag.
    #[inline(always)]
    pub(crate) fn feed_breaker(&'static self, verdict: Option<Verdict>) {
        if self.protect {
            self.feed_protected(verdict);
        }
    }

    #[inline(never)]
    fn feed_protected(&'static self, verdict: Option<Verdict>) {
        let breaker = &self.protection().breaker;
        match verdict {
            Some(v) if v.rejection => {}
            Some(v) if v.transient => breaker.on_failure(),
            _ => breaker.on_answer(),
        }
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn counters(&'static self) -> &'static [metrics::Counter; observe::OUTCOMES] {
        self.counters
            .get_or_init(|| observe::register(self.system, self.operation))
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
            give_ups: observe::Repeats::new(),
            #[cfg(feature = "metrics")]
            counters: OnceLock::new(),
        },
        Err(_) => panic!("#[retry]: the macro and the runtime disagree on this policy"),
    }
}
