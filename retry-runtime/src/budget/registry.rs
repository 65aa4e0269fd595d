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

/// [`System::set_budget`](crate::System::set_budget) by name. The first of a name not yet used
/// keeps a copy of the name for the life of the process.
pub(crate) fn set_budget(system: &str, budget: Budget) {
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
