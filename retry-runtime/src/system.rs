//! [`System`]: an external system by name, the key of its retry budget, circuit breaker,
//! bulkhead and a durable worker's limits. [`system`] gives the handle and warns once on a name
//! nothing declared, so that a misspelt name does not make a new system in silence.
//!
//! The handle sits above the registries it reaches (`budget/registry.rs`,
//! `protect/registry.rs`), which keep working by name: `#[retry]` sites and layers reach them
//! with the name they compiled, without a handle.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use crate::budget::{self, Budget, BudgetState};
use crate::protect::{self, Breaker, BreakerState, Bulkhead, BulkheadState};

/// An external system: the `system = "…"` of `#[retry]`, a tower layer's or reqwest
/// middleware's system, a durable task's. Its retry budget, circuit breaker and bulkhead are
/// shared by every call naming it; a durable [`Worker`](crate::durable::Worker) limits its tasks.
///
/// A handle is its name, kept for the life of the process: `Copy`, compared and hashed by
/// name. Get it with [`system`] (or [`declare_system`] for a system no `#[retry]` site names).
///
/// ```
/// use retry_runtime::{system, Breaker, BreakerState};
///
/// let payments = system("payments");
/// payments.set_breaker(Breaker::new().consecutive_failures(5));
/// assert_eq!(payments.breaker_state(), Some(BreakerState::Closed));
/// assert_eq!(payments.to_string(), "payments");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct System {
    name: &'static str,
}

/// Every name a handle was made for, kept for the life of the process.
static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// The handle of the system named `name`. Takes a lock (and, the first time a name is seen,
/// keeps a copy of it for the life of the process): get handles at start-up and keep them.
///
/// The first time a name is seen, one WARN (`retry: no #[retry] site names this system`,
/// with `system` and the systems the program knows) says so when nothing declared it: no
/// `#[retry(…, system = "…")]` site of the program, and no budget, breaker, bulkhead, durable
/// worker or tower layer or reqwest middleware that has served a request. A misspelt name
/// would otherwise give a breaker, a budget or a limit to a system no call uses. A system only
/// layers or durable tasks call is named with [`declare_system`] instead, which does not warn.
pub fn system(name: &str) -> System {
    let (system, new) = intern(name);
    if new && !known_systems().contains(&system.name) {
        warn_undeclared(system.name);
    }
    system
}

/// The handle of the system named `name`, declaring it: for a system no `#[retry]` site names
/// (one that only tower layers, reqwest middlewares or durable tasks call). [`system`] then
/// knows it and does not warn.
///
/// ```
/// use retry_runtime::{declare_system, system, Bulkhead};
///
/// let partner = declare_system("partner-api");
/// partner.set_bulkhead(Bulkhead::new(20));
/// assert_eq!(system("partner-api"), partner);
/// ```
pub fn declare_system(name: &str) -> System {
    intern(name).0
}

/// The handle of `name`, and whether this is the first time it was seen.
fn intern(name: &str) -> (System, bool) {
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&name) = names.get(name) {
        return (System { name }, false);
    }
    let name: &'static str = Box::leak(Box::from(name));
    names.insert(name);
    (System { name }, true)
}

/// Every system the program knows: named by a `#[retry]` site (all of them, listed at link
/// time), by a call so far (a tower layer's, a reqwest middleware's), a durable worker, or
/// given a budget, a breaker or a bulkhead.
pub(crate) fn known_systems() -> Vec<&'static str> {
    let mut systems: Vec<&'static str> = crate::site::listed::every()
        .map(|site| site.system)
        .chain(protect::all().into_iter().map(|p| p.system))
        .chain(budget::systems())
        .collect();
    systems.sort_unstable();
    systems.dedup();
    systems
}

/// The WARN of a name nothing declared.
fn warn_undeclared(name: &'static str) {
    #[cfg(feature = "tracing")]
    {
        let known: Vec<&str> = known_systems();
        tracing::warn!(
            system = name,
            known = %known.join(", "),
            "retry: no #[retry] site names this system (nor a budget, breaker, bulkhead, durable worker or served layer): a misspelt name makes a new system. Declare a system only layers or durable tasks call with `retry_runtime::declare_system`"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = name;
}

impl System {
    /// Its name, as `#[retry(system = "…")]` writes it.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Gives the system a circuit breaker, replacing any it had; it starts closed. Every
    /// `#[retry(…, system = "…", protect)]` site naming the system, and the tower layer and
    /// reqwest middleware built with `.protect()`, share it. Meant for start-up, like
    /// [`set_budget`](System::set_budget); the configuration ([`config`](crate::config)) may
    /// tighten it.
    ///
    /// Logs one WARN naming the `#[retry]` sites of the system compiled without `protect`:
    /// they neither consult nor feed the breaker.
    ///
    /// ```
    /// use retry_runtime::{declare_system, Breaker, BreakerState};
    ///
    /// let partner = declare_system("partner-api");
    /// partner.set_breaker(Breaker::new().consecutive_failures(5));
    /// assert_eq!(partner.breaker_state(), Some(BreakerState::Closed));
    /// assert_eq!(declare_system("no-such-system").breaker_state(), None);
    /// ```
    pub fn set_breaker(self, breaker: Breaker) {
        crate::systems::set_breaker(self.name, breaker);
    }

    /// Gives the system a bulkhead, replacing any it had: at most `max_in_flight` calls at
    /// once, each counted from its first attempt to its last, backoff pauses included. Shared
    /// like the breaker ([`set_breaker`](System::set_breaker)); the configuration may lower its
    /// limit.
    ///
    /// ```
    /// use retry_runtime::{declare_system, Bulkhead};
    ///
    /// let receipts = declare_system("receipts");
    /// receipts.set_bulkhead(Bulkhead::new(20));
    /// let state = receipts.bulkhead_state().unwrap();
    /// assert_eq!((state.in_flight, state.limit), (0, 20));
    /// ```
    pub fn set_bulkhead(self, bulkhead: Bulkhead) {
        crate::systems::set_bulkhead(self.name, bulkhead);
    }

    /// Replaces the system's retry budget. Meant for start-up: calls made after it use the new
    /// budget, including call sites that already ran. The new budget starts with an empty
    /// window (and, if it is adaptive, cold: open, with no evidence); the budget passed in is
    /// only read for its settings. Calls racing it may see the old and the new settings mixed
    /// for that instant (each setting valid on its own).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    /// use std::time::Duration;
    /// use retry_runtime::{retry, system, Budget, Classify};
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
    /// system("gateway").set_budget(Budget::new(0.1, 0, Duration::from_secs(30)));
    /// // 10 calls while the gateway is down: 10 first attempts and 1 retry (10 % of 10), not 30.
    /// for _ in 0..10 {
    ///     assert!(status().await.is_err());
    /// }
    /// assert_eq!(CALLS.load(SeqCst), 11);
    /// # }
    /// ```
    pub fn set_budget(self, budget: Budget) {
        budget::set_budget(self.name, budget);
    }

    /// The breaker as it stands: `None` when the system has none (neither the code nor the
    /// configuration gave it one). Takes the registry's lock: for a health endpoint, not for
    /// every call.
    pub fn breaker_state(self) -> Option<BreakerState> {
        protect::breaker_state(self.name)
    }

    /// The bulkhead as it stands (calls in flight, limit): `None` when the system has none.
    /// Takes the registry's lock, like [`breaker_state`](System::breaker_state).
    pub fn bulkhead_state(self) -> Option<BulkheadState> {
        protect::bulkhead_state(self.name)
    }

    /// The retry budget as it stands: its mode, and the retries of the last 0.5–1 s with how
    /// many succeeded. `None` for a system that no call and no
    /// [`set_budget`](System::set_budget) has named yet. Takes the registry's lock, like
    /// [`breaker_state`](System::breaker_state).
    ///
    /// ```
    /// use retry_runtime::{declare_system, Budget, BudgetMode};
    ///
    /// let gateway = declare_system("gateway");
    /// gateway.set_budget(Budget::adaptive());
    /// let state = gateway.budget_state().unwrap();
    /// assert_eq!(state.mode, BudgetMode::Open, "cold: no evidence yet");
    /// assert_eq!(state.retry_success_rate(), None);
    /// assert_eq!(declare_system("never-called").budget_state(), None);
    /// ```
    pub fn budget_state(self) -> Option<BudgetState> {
        budget::budget_state(self.name)
    }
}

impl fmt::Display for System {
    /// Its name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Debug for System {
    /// `System("payments")`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("System").field(&self.name).finish()
    }
}
