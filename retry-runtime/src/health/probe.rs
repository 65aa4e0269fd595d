//! [`probe`]: a health check of one system on its own schedule, and its last result.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::System;
use crate::protect;

/// A probe result is fresh for this many intervals: a probe that stops running (its runtime
/// shut down) goes stale after it, and the breaker goes back to its own half-open rounds.
pub const STALE_AFTER_INTERVALS: u32 = 3;

/// One probe run's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    /// Whether the check returned `Ok` within its interval.
    pub passed: bool,
    /// The error's text (or "timed out after …") when it did not.
    pub error: Option<String>,
    /// When the run ended (tokio clock).
    pub at: Instant,
    /// How long the run took.
    pub took: Duration,
}

/// The probe of one system: its schedule, its task and its last result.
struct Slot {
    every: Duration,
    generation: u64,
    task: AbortHandle,
    last: Option<ProbeResult>,
}

/// The probes by system, and the generation the next probe gets.
static PROBES: Mutex<(BTreeMap<&'static str, Slot>, u64)> = Mutex::new((BTreeMap::new(), 0));

fn probes() -> std::sync::MutexGuard<'static, (BTreeMap<&'static str, Slot>, u64)> {
    PROBES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`probe`] was called outside a tokio runtime: there is nothing to run the probe on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRuntime;

impl fmt::Display for NoRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("retry_runtime::health::probe needs a tokio runtime to run on")
    }
}

impl std::error::Error for NoRuntime {}

/// A running probe. Dropping it leaves the probe running (it belongs to the system until
/// [`stop`](Probe::stop) or another [`probe`] of the same system replaces it).
#[derive(Debug)]
#[must_use = "dropping a Probe leaves it running; keep it to stop it"]
pub struct Probe {
    system: System,
    generation: u64,
}

impl Probe {
    /// The system it probes.
    pub fn system(&self) -> System {
        self.system
    }

    /// Stops the probe: its task ends, its last result is forgotten, and the system's breaker
    /// goes back to its own half-open rounds. Does nothing if another probe replaced it.
    pub fn stop(self) {
        let mut guard = probes();
        if guard.0.get(self.system.name()).map(|s| s.generation) != Some(self.generation) {
            return;
        }
        if let Some(slot) = guard.0.remove(self.system.name()) {
            slot.task.abort();
        }
        protect::for_system(self.system.name())
            .breaker
            .on_probe(false, None);
    }
}

/// Runs `check` for `system` every `every` (the first run at once) on a task of the current
/// tokio runtime, replacing the system's previous probe, and keeps its last result.
///
/// A run passes when `check` returns `Ok` within `every` (a slower one fails, "timed out").
/// It is never retried, and its failure is not a call's failure: it feeds no breaker, no
/// budget. While the result is fresh ([`STALE_AFTER_INTERVALS`] intervals), an open breaker of
/// the system refuses user calls until a run passes (none of them is used as the probe); the
/// run that passes moves it to half-open, whose round of user calls closes it. A stale probe
/// (its runtime shut down) hands this back to the breaker's own half-open rounds.
///
/// `every` is clamped to 1 ms – 1 h. Errs outside a tokio runtime.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{declare_system, health};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let partner = declare_system("partner-api");
/// let probe = health::probe(partner, Duration::from_secs(5), || async {
///     // A cheap call the partner answers when it can serve: its own health route, say.
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// tokio::time::sleep(Duration::from_millis(1)).await;
/// assert!(health::last_probe(partner).unwrap().passed);
/// probe.stop();
/// # }
/// ```
pub fn probe<F, Fut, E>(system: System, every: Duration, check: F) -> Result<Probe, NoRuntime>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| NoRuntime)?;
    let every = every.clamp(Duration::from_millis(1), Duration::from_secs(3_600));
    let mut guard = probes();
    guard.1 += 1;
    let generation = guard.1;
    let task = runtime.spawn(run(system, every, generation, check));
    let slot = Slot {
        every,
        generation,
        task: task.abort_handle(),
        last: None,
    };
    if let Some(old) = guard.0.insert(system.name(), slot) {
        old.task.abort();
    }
    Ok(Probe { system, generation })
}

/// The probe's loop: one run per tick, a late tick delayed rather than bunched.
async fn run<F, Fut, E>(system: System, every: Duration, generation: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: fmt::Display,
{
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let started = Instant::now();
        let error = match tokio::time::timeout(every, check()).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("timed out after {every:?}")),
        };
        let result = ProbeResult {
            passed: error.is_none(),
            error,
            at: Instant::now(),
            took: started.elapsed(),
        };
        if !record(system, generation, result, every) {
            return; // Replaced or stopped.
        }
    }
}

/// Keeps `result` as the system's last and tells its breaker; false if the probe was replaced.
fn record(system: System, generation: u64, result: ProbeResult, every: Duration) -> bool {
    let mut guard = probes();
    let Some(slot) = guard.0.get_mut(system.name()) else {
        return false;
    };
    if slot.generation != generation {
        return false;
    }
    #[cfg(feature = "tracing")]
    if !result.passed && slot.last.as_ref().is_none_or(|l| l.passed) {
        tracing::warn!(system = system.name(), error = ?result.error, "health probe failed");
    }
    let passed = result.passed;
    slot.last = Some(result);
    drop(guard);
    protect::for_system(system.name())
        .breaker
        .on_probe(passed, Some(every.saturating_mul(STALE_AFTER_INTERVALS)));
    true
}

/// The system's last probe result, and the probe's interval; `None` without a probe or
/// before its first run ends.
pub(crate) fn last(system: System) -> Option<(ProbeResult, Duration)> {
    last_named(system.name())
}

/// [`last`] of the system named `name`: for the durable worker's heartbeat, which knows its
/// systems by name (looking one up by name declares nothing).
pub(crate) fn last_named(name: &str) -> Option<(ProbeResult, Duration)> {
    let guard = probes();
    let slot = guard.0.get(name)?;
    Some((slot.last.clone()?, slot.every))
}

/// Whether the system named `name` has a fresh failing probe: its last run failed less than
/// [`STALE_AFTER_INTERVALS`] intervals ago. The durable worker then takes no user task as the
/// queue's shared breaker probe of the system (`durable/worker/execution/shared_breaker.rs`).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn failing(name: &str) -> bool {
    last_named(name).is_some_and(|(last, every)| {
        let age = Instant::now().saturating_duration_since(last.at);
        !last.passed && age < every.saturating_mul(STALE_AFTER_INTERVALS)
    })
}

/// The system's last probe result: `None` without a probe or before its first run ends.
pub fn last_probe(system: System) -> Option<ProbeResult> {
    last(system).map(|(result, _)| result)
}

/// The systems with a probe.
pub(crate) fn probed_systems() -> Vec<&'static str> {
    probes().0.keys().copied().collect()
}
