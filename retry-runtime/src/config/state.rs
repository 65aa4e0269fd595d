//! The configuration in force: one map of system → [`Overrides`], swapped whole (`arc-swap`),
//! read by call sites on their failure path without a lock or an allocation, and the breaker
//! and bulkhead it makes of what each system's code set (a site's schedule: `effective.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use super::keys::Value;
use crate::protect::{Breaker, Bulkhead, Settings};

/// What the configuration says of one system, each value already checked (`tighten.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Overrides {
    pub(super) attempts: Option<u32>,
    pub(super) delay: Option<Duration>,
    pub(super) max_delay: Option<Duration>,
    /// `RETRIES=off`: one attempt, no retries, no hedges.
    pub(super) retries_off: bool,
    /// `HEDGE=off`: no hedged attempts.
    pub(super) hedge_off: bool,
    pub(super) bulkhead: Option<u32>,
    /// `BREAKER=on`, or any `BREAKER_*`: a breaker even where the code set none.
    pub(super) breaker_on: bool,
    pub(super) failure_rate: Option<f64>,
    pub(super) min_calls: Option<u32>,
    pub(super) consecutive: Option<u32>,
    pub(super) open_for: Option<Duration>,
    pub(super) probes: Option<u32>,
    /// A durable worker's concurrency limit for the system's tasks (`QUEUE_CONCURRENCY`).
    pub(super) queue_concurrency: Option<u32>,
    /// A durable worker's rate limit for the system's tasks (`QUEUE_RATE`).
    pub(super) queue_rate: Option<f64>,
}

impl Overrides {
    pub(super) fn set(&mut self, value: Value) {
        match value {
            Value::Attempts(n) => self.attempts = Some(n),
            Value::Delay(d) => self.delay = Some(d),
            Value::MaxDelay(d) => self.max_delay = Some(d),
            Value::Retries(on) => self.retries_off = !on,
            Value::Hedge(on) => self.hedge_off = !on,
            Value::Bulkhead(n) => self.bulkhead = Some(n),
            Value::Breaker(on) => self.breaker_on = on,
            Value::BreakerFailureRate(r) => (self.breaker_on, self.failure_rate) = (true, Some(r)),
            Value::BreakerMinCalls(n) => (self.breaker_on, self.min_calls) = (true, Some(n)),
            Value::BreakerConsecutive(n) => (self.breaker_on, self.consecutive) = (true, Some(n)),
            Value::BreakerOpen(d) => (self.breaker_on, self.open_for) = (true, Some(d)),
            Value::BreakerProbes(n) => (self.breaker_on, self.probes) = (true, Some(n)),
            Value::QueueConcurrency(n) => self.queue_concurrency = Some(n),
            Value::QueueRate(r) => self.queue_rate = Some(r),
        }
    }
}

pub(super) type Map = BTreeMap<Box<str>, Overrides>;

/// The configuration in force; `None` until a configuration call.
static IN_FORCE: ArcSwapOption<Map> = ArcSwapOption::const_empty();

pub(super) fn swap(map: Map) {
    IN_FORCE.store(Some(Arc::new(map)));
}

/// The overrides of `system`, if the configuration names it. A load of the map (no lock, no
/// allocation: `arc-swap`'s guard) and a lookup.
pub(crate) fn overrides(system: &str) -> Option<Overrides> {
    IN_FORCE
        .load()
        .as_deref()
        .and_then(|map| map.get(system).copied())
}

/// The breaker and bulkhead in effect for `system`: the code's, tightened by the configuration.
pub(crate) fn protections(system: &str, code: Settings) -> Settings {
    let Some(o) = overrides(system) else {
        return code;
    };
    let breaker = match code.breaker {
        Some(b) => Some(configured(b, &o, true)),
        None if o.breaker_on => Some(configured(Breaker::new(), &o, false)),
        None => None,
    };
    let bulkhead = match (code.bulkhead, o.bulkhead) {
        (Some(b), Some(n)) => {
            Some(Bulkhead::new(n.min(b.get_max_in_flight())).max_wait(b.get_max_wait()))
        }
        (None, Some(n)) => Some(Bulkhead::new(n)),
        (b, None) => b,
    };
    Settings { breaker, bulkhead }
}

/// `b` with the configured values: each one stricter than `b`'s own where `only_stricter` (the
/// code set `b`), every one as given where not (the configuration alone asked for a breaker, so
/// there is nothing in the code to loosen).
fn configured(b: Breaker, o: &Overrides, only_stricter: bool) -> Breaker {
    let take = |stricter: bool| stricter || !only_stricter;
    let mut b = b;
    if let Some(r) = o.failure_rate.filter(|r| take(*r < b.get_failure_rate())) {
        b = b.failure_rate(r);
    }
    if let Some(n) = o.min_calls.filter(|n| take(*n < b.get_min_calls())) {
        b = b.min_calls(n);
    }
    let consecutive = b.get_consecutive_failures();
    if let Some(n) = o
        .consecutive
        .filter(|n| take(consecutive == 0 || *n < consecutive))
    {
        b = b.consecutive_failures(n);
    }
    if let Some(d) = o.open_for.filter(|d| take(*d > b.get_open_for())) {
        b = b.open_for(d);
    }
    if let Some(n) = o.probes.filter(|n| take(*n < b.get_probes())) {
        b = b.probes(n);
    }
    b
}
