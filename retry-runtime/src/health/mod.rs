//! Health per external system: a probe on its own schedule ([`probe`], `probe.rs`) and a report
//! of each system's protections and last probe ([`report`], `report.rs`) for a `/health` route.
//!
//! A probe is a measurement, not a retry: it runs every interval whatever the traffic, once
//! (never retried), its result cached until the next run, and its failure is never counted as a
//! user call's failure. While a system's breaker is open and the system has a fresh probe, a
//! passing probe, not a user call, is what lets real calls try again: user calls are refused
//! until it passes, then the breaker is half-open and its round of calls closes it.
//!
//! **A service's readiness must not fail because a partner is down.** Put the report on a
//! route for people and dashboards (`/health/systems`); the readiness probe of an orchestrator
//! answers for this process only. A readiness that follows a partner takes every replica out of
//! the load balancer at once when the partner fails, turning its outage into yours, and brings
//! them all back at once when it recovers. The breakers already keep calls off the partner.
//!
//! Above [`System`](crate::System) and the registries it reaches.

mod probe;
mod report;

pub use probe::{NoRuntime, Probe, ProbeResult, STALE_AFTER_INTERVALS, last_probe, probe};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use probe::{failing, last_named};
pub use report::{BudgetHealth, BulkheadHealth, ProbeHealth, SystemHealth, report, report_all};
