//! A system's budget as a health endpoint shows it: [`System::budget_state`](crate::System::budget_state).

use std::sync::atomic::Ordering::Relaxed;

use super::Budget;
use super::config::UNLIMITED;
use super::registry;

/// What a retry budget does now: see [`System::budget_state`](crate::System::budget_state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BudgetMode {
    /// An [adaptive](Budget::adaptive) budget whose retries succeed, or that has no evidence
    /// yet: retries are allowed up to one failed retry per call.
    Open,
    /// An [adaptive](Budget::adaptive) budget whose retries fail: retries are held to 5 % of
    /// calls plus 5 per second.
    Protecting,
    /// A fixed [`Budget::new`].
    Static,
    /// [`Budget::unlimited`].
    Unlimited,
}

impl BudgetMode {
    /// `"open"`, `"protecting"`, `"static"` or `"unlimited"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            BudgetMode::Open => "open",
            BudgetMode::Protecting => "protecting",
            BudgetMode::Static => "static",
            BudgetMode::Unlimited => "unlimited",
        }
    }
}

/// A retry budget's mode and the evidence behind it: the retries (attempts after the first)
/// that returned in the last 0.5–1 s, and how many of them succeeded. The evidence is kept by
/// adaptive budgets only (0 for the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetState {
    /// What the budget does now.
    pub mode: BudgetMode,
    /// Retries that returned in the last 0.5–1 s: succeeded, or failed with a transient error.
    pub retries: u32,
    /// Those of them that succeeded.
    pub retries_succeeded: u32,
}

impl BudgetState {
    /// `retries_succeeded / retries`, or `None` with no retries.
    pub fn retry_success_rate(&self) -> Option<f64> {
        (self.retries > 0).then(|| f64::from(self.retries_succeeded) / f64::from(self.retries))
    }
}

impl Budget {
    /// This budget's mode and evidence. Reads a few atomics and the clock; no lock.
    pub fn state(&self) -> BudgetState {
        let mode = if self.reserve.load(Relaxed) == UNLIMITED {
            BudgetMode::Unlimited
        } else if !self.learner.adaptive.load(Relaxed) {
            BudgetMode::Static
        } else if self.learner.is_protecting() {
            BudgetMode::Protecting
        } else {
            BudgetMode::Open
        };
        let seen = match mode {
            BudgetMode::Open | BudgetMode::Protecting => {
                self.learner.evidence(self.evidence_epoch())
            }
            _ => Default::default(),
        };
        BudgetState {
            mode,
            retries: seen.retries,
            retries_succeeded: seen.succeeded,
        }
    }
}

/// [`System::budget_state`](crate::System::budget_state) by name.
pub(crate) fn budget_state(system: &str) -> Option<BudgetState> {
    registry::lookup(system).map(Budget::state)
}
