//! What a finished retry tells its budget: a success is refunded, and an adaptive budget's
//! learner counts the outcome and may switch mode (see [`Budget::adaptive`]).

use std::sync::atomic::Ordering::Relaxed;

use super::Budget;
use super::adaptive::{EVIDENCE_EPOCH_NANOS, FIRST_EPOCH, MIN_EVIDENCE, Switch};

impl Budget {
    /// The retry outcomes an [adaptive](Budget::adaptive) budget needs in its evidence (the
    /// last 0.5–1 s) before it changes mode; with fewer, it keeps the mode it has (a new one is
    /// open).
    pub const MIN_EVIDENCE: u32 = MIN_EVIDENCE;

    /// The learner's current epoch.
    pub(super) fn evidence_epoch(&self) -> u64 {
        FIRST_EPOCH + self.elapsed_nanos() / EVIDENCE_EPOCH_NANOS
    }

    /// A retry (an attempt after the first) returned: `succeeded`, or failed with a transient
    /// error. Counts it, refunds it if it succeeded, and switches the mode if the evidence says
    /// so. Nothing for a static or unlimited budget.
    #[cold]
    #[inline(never)]
    pub(crate) fn retry_finished(&self, system: &str, succeeded: bool) {
        if !self.learner.adaptive.load(Relaxed) {
            return;
        }
        if succeeded {
            self.refund();
        }
        if let Some(switch) = self.learner.finished(self.evidence_epoch(), succeeded) {
            announce(system, switch);
        }
    }
}

/// The tracing event of a switch (feature `tracing`).
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
fn announce(system: &str, switch: Switch) {
    #[cfg(feature = "tracing")]
    {
        let rate = |seen: super::adaptive::Evidence| {
            f64::from(seen.succeeded) / f64::from(seen.retries.max(1))
        };
        match switch {
            Switch::ToProtecting(seen) => tracing::warn!(
                system,
                retry_success_rate = rate(seen),
                retries = seen.retries,
                "retry budget protecting: retries fail, held to 5 % of calls"
            ),
            Switch::ToOpen(seen) => tracing::info!(
                system,
                retry_success_rate = rate(seen),
                retries = seen.retries,
                "retry budget open: retries succeed"
            ),
        }
    }
}
