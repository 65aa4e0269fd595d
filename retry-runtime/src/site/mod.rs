//! [`Site`]: everything one `#[retry]` fn (or one tower layer, one reqwest middleware) knows at
//! compile time, and the handles it looks up once on its first call: its system's budget,
//! breaker and bulkhead, and its observer (counters, the repeats of its give-ups).
//!
//! The bottom of the retry core's upper half: a site names the mechanisms below it (the budget,
//! the protections, the observer) and calls down into them; the configuration, the engine and
//! the hedge read a site, and nothing below names one. Every `impl Site` is in this module.
//! `listed.rs` lists every `#[retry]` site at link time; `built.rs` makes the site of a layer
//! built at run time.

use std::sync::OnceLock;
use std::time::Duration;

use crate::backoff::{Jitter, Policy};
use crate::budget::{self, Budget};
use crate::classify::Verdict;
use crate::observe::{self, Observer};
use crate::protect::{self, Protection, Rejected};

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod built;
pub(crate) mod listed;

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) use built::BuiltSite;
pub use listed::SiteEntry;

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
    /// Its labels, counters and give-ups, for the events (`crate::observe`).
    pub(crate) observer: Observer,
}

impl Site {
    /// The site of `operation` on `system` with `policy`, its lookups not made yet: what both
    /// a `static` ([`site`]) and a leaked site ([`BuiltSite`]) hold.
    const fn new(
        system: &'static str,
        operation: &'static str,
        policy: Policy,
        protect: bool,
    ) -> Site {
        Site {
            system,
            operation,
            policy,
            protect,
            budget: OnceLock::new(),
            protection: OnceLock::new(),
            observer: Observer::new(system, operation),
        }
    }

    /// A site for `policy` at run time: leaked, once per layer or middleware ([`BuiltSite`]).
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    fn leaked(
        system: &'static str,
        operation: &'static str,
        policy: Policy,
        protect: bool,
    ) -> &'static Site {
        Box::leak(Box::new(Site::new(system, operation, policy, protect)))
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
        self.admit_uncounted().inspect_err(|rejected| {
            observe::rejected(&self.observer, *rejected);
        })
    }

    /// [`admit`](Site::admit), the refusal not counted (its caller counts what it does next).
    #[inline]
    pub(crate) fn admit_uncounted(&'static self) -> Result<(), Rejected> {
        if self.protection().breaker.admit() {
            return Ok(());
        }
        Err(Rejected::BreakerOpen {
            system: self.system,
        })
    }

    /// Tells a protected site's breaker what became of an attempt: `None` a success, else its
    /// verdict. A transient failure counts against the system, a permanent error is an answer
    /// (the system is up), a rejection is nothing (R-RES-RE-X4). An unprotected site only tests
    /// its flag.
    /// A success (`None`, what `#[retry]`'s happy path passes, a constant there) calls
    /// [`feed_success`](Site::feed_success): no verdict built, passed or tested.
    #[inline(always)]
    pub(crate) fn feed_breaker(&'static self, verdict: Option<Verdict>) {
        if self.protect {
            match verdict {
                None => self.feed_success(),
                Some(verdict) => self.feed_protected(verdict),
            }
        }
    }

    #[inline(never)]
    fn feed_success(&'static self) {
        self.protection().breaker.on_answer();
    }

    #[inline(never)]
    fn feed_protected(&'static self, verdict: Verdict) {
        let breaker = &self.protection().breaker;
        match verdict {
            Verdict {
                rejection: true, ..
            } => {}
            Verdict {
                transient: true, ..
            } => breaker.on_failure(),
            _ => breaker.on_answer(),
        }
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
        Ok(policy) => Site::new(system, operation, policy, protect),
        Err(_) => panic!("#[retry]: the macro and the runtime disagree on this policy"),
    }
}
