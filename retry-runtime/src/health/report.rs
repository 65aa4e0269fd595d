//! [`report`]: one system's health as a value for a `/health` route (serializable with the
//! feature `serde`).

use std::time::Duration;

use tokio::time::Instant;

use super::probe::{self, STALE_AFTER_INTERVALS};
use crate::{BreakerState, BudgetMode, System};

/// One system's health: its protections as they stand and its last probe. Serializes (feature
/// `serde`) to e.g. `{"system":"payments","breaker":"open","budget":{"mode":"open",
/// "retries":0,"retries_succeeded":0},"bulkhead":null,"probe":{"passed":false,…}}`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SystemHealth {
    /// The system's name.
    pub system: &'static str,
    /// `"closed"`, `"open"` or `"half_open"`; `None`: no breaker.
    pub breaker: Option<&'static str>,
    /// The retry budget; `None` before any call or budget named the system.
    pub budget: Option<BudgetHealth>,
    /// The bulkhead; `None`: no bulkhead.
    pub bulkhead: Option<BulkheadHealth>,
    /// The last probe; `None`: no probe, or its first run has not ended.
    pub probe: Option<ProbeHealth>,
}

/// A retry budget in a [`SystemHealth`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BudgetHealth {
    /// `"open"`, `"protecting"` (retries held back), `"static"` or `"unlimited"`.
    pub mode: &'static str,
    /// Retries that returned in the last 0.5–1 s.
    pub retries: u32,
    /// Those of them that succeeded.
    pub retries_succeeded: u32,
}

/// A bulkhead in a [`SystemHealth`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BulkheadHealth {
    /// Calls holding a permit now.
    pub in_flight: u32,
    /// The most allowed at once.
    pub limit: u32,
}

/// The last probe run in a [`SystemHealth`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProbeHealth {
    /// Whether it passed.
    pub passed: bool,
    /// Its error when it did not.
    pub error: Option<String>,
    /// How long ago it ended, in milliseconds.
    pub age_ms: u64,
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    /// The probe's interval, in milliseconds.
    pub every_ms: u64,
    /// Older than [`STALE_AFTER_INTERVALS`] intervals: the probe stopped running, and the
    /// breaker no longer waits for it.
    pub stale: bool,
}

/// `system`'s health now. Takes the registries' locks: for a health route, not for every call.
///
/// ```
/// use retry_runtime::{declare_system, health, Breaker};
///
/// let partner = declare_system("partner-health");
/// partner.set_breaker(Breaker::new());
/// let health = health::report(partner);
/// assert_eq!(health.breaker, Some("closed"));
/// assert_eq!(health.probe, None);
/// ```
pub fn report(system: System) -> SystemHealth {
    SystemHealth {
        system: system.name(),
        breaker: system.breaker_state().map(|state| match state {
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen => "half_open",
            _ => "closed",
        }),
        budget: system.budget_state().map(|state| BudgetHealth {
            mode: match state.mode {
                BudgetMode::Open => "open",
                BudgetMode::Protecting => "protecting",
                BudgetMode::Static => "static",
                _ => "unlimited",
            },
            retries: state.retries,
            retries_succeeded: state.retries_succeeded,
        }),
        bulkhead: system.bulkhead_state().map(|state| BulkheadHealth {
            in_flight: state.in_flight,
            limit: state.limit,
        }),
        probe: probe::last(system).map(|(last, every)| {
            let age = Instant::now().saturating_duration_since(last.at);
            ProbeHealth {
                passed: last.passed,
                error: last.error,
                age_ms: millis(age),
                took_ms: millis(last.took),
                every_ms: millis(every),
                stale: age >= every.saturating_mul(STALE_AFTER_INTERVALS),
            }
        }),
    }
}

/// The health of every system the program knows (named by a `#[retry]` site, a call so far,
/// a protection, a budget or a probe), by name.
pub fn report_all() -> Vec<SystemHealth> {
    let mut names = crate::system::known_systems();
    names.extend(probe::probed_systems());
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| report(crate::declare_system(name)))
        .collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
