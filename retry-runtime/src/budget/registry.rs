//! The registry: system name → its [`Budget`], consulted by [`set_budget`] and once per call
//! site ([`for_system`]); every budget is leaked, so the loop holds a `&'static Budget` and never
//! takes the lock again.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::Budget;

/// System name → its budget, leaked (see the module docs).
static REGISTRY: Mutex<BTreeMap<&'static str, &'static Budget>> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, BTreeMap<&'static str, &'static Budget>> {
    // Nothing panics while the lock is held; recover anyway rather than propagate a panic.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Replaces the retry budget of `system` (the `system = "name"` of `#[retry]`, by default the
/// fn's name). Meant for start-up: calls made after it use the new budget, including call sites
/// that already ran. The new budget starts with an empty window (and, if it is adaptive, cold:
/// open, with no evidence); the budget passed in is only read for its settings.
///
/// The first `set_budget` of a name not yet used keeps a copy of the name for the life of the
/// process. Calls racing a `set_budget` may see the old and the new settings mixed for that
/// instant (each setting valid on its own).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
/// use std::time::Duration;
/// use retry_runtime::{retry, set_budget, Budget, Classify};
///
/// #[derive(Debug)]
/// struct Unavailable;
/// impl Classify for Unavailable {
///     fn is_transient(&self) -> bool { true }
/// }
///
/// static CALLS: AtomicU32 = AtomicU32::new(0);
///
/// #[retry(read, system = "gateway")]
/// async fn status() -> Result<(), Unavailable> {
///     CALLS.fetch_add(1, SeqCst);
///     Err(Unavailable)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // At start-up: retries may add 10 % of the gateway's calls, no floor.
/// set_budget("gateway", Budget::new(0.1, 0, Duration::from_secs(30)));
/// // 10 calls while the gateway is down: 10 first attempts and 1 retry (10 % of 10), not 30.
/// for _ in 0..10 {
///     assert!(status().await.is_err());
/// }
/// assert_eq!(CALLS.load(SeqCst), 11);
/// # }
/// ```
pub fn set_budget(system: &str, budget: Budget) {
    let config = budget.config();
    let mut registry = registry();
    if let Some(existing) = registry.get(system) {
        existing.configure(config);
        return;
    }
    let name: &'static str = Box::leak(Box::from(system));
    registry.insert(name, Box::leak(Box::new(Budget::with_config(config))));
}

/// Every system with a budget: named by a call so far, or by [`set_budget`].
pub(crate) fn systems() -> Vec<&'static str> {
    registry().keys().copied().collect()
}

/// The budget of `system`, if it is registered.
pub(super) fn lookup(system: &str) -> Option<&'static Budget> {
    registry().get(system).copied()
}

/// The budget of `system`, registered with the default budget on first use. Takes the registry
/// lock (and on first use allocates): call it once per call site and cache the handle (e.g. in
/// a `OnceLock`); [`set_budget`] updates the budget in place, so a cached handle stays current.
pub(crate) fn for_system(system: &'static str) -> &'static Budget {
    let mut registry = registry();
    if let Some(&budget) = registry.get(system) {
        return budget;
    }
    let budget: &'static Budget = Box::leak(Box::default());
    registry.insert(system, budget);
    budget
}
