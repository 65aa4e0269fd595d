//! What hedging tells the world, beside the loop's own events ([`crate::observe`]): two more
//! outcomes of `retry_attempts_total`, registered only for hedged call sites (a fn without
//! `hedge` keeps its six series), and DEBUG events.
//!
//! | what happened | event (feature `tracing`) | `outcome` (feature `metrics`) |
//! | --- | --- | --- |
//! | a slow attempt, hedged: one more attempt starts beside it | DEBUG `slow attempt, hedging` | `hedged` |
//! | a hedge answered `Ok` first (counted instead of `success`) | DEBUG `a hedge answered first` | `hedge_won` |
//!
//! An attempt that lost the race is dropped uncounted, so a hedged site's attempts started are
//! one per call, plus `retry`, plus `hedged`.

use crate::site::Site;

/// The values of the `outcome` label that hedging adds.
#[cfg(feature = "metrics")]
const OUTCOMES: [&str; 2] = ["hedged", "hedge_won"];

/// A slow attempt was hedged: attempt `attempt` starts beside it.
pub(crate) fn hedged(site: &'static Site, hedge: &Counters, attempt: u32) {
    #[cfg(feature = "metrics")]
    hedge.get(site)[0].increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(
        system = site.system,
        operation = site.operation,
        attempt,
        attempts = site.policy.attempts(),
        "slow attempt, hedging"
    );
    let _ = (site, hedge, attempt);
}

/// Attempt `attempt`, a hedge, answered `Ok` first.
pub(crate) fn hedge_won(site: &'static Site, hedge: &Counters, attempt: u32) {
    #[cfg(feature = "metrics")]
    hedge.get(site)[1].increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(
        system = site.system,
        operation = site.operation,
        attempt,
        attempts = site.policy.attempts(),
        "a hedge answered first"
    );
    let _ = (site, hedge, attempt);
}

/// The hedge counters of one site (a field of its `HedgeSite`), registered on its first hedge.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    #[cfg(feature = "metrics")]
    cell: std::sync::OnceLock<[metrics::Counter; 2]>,
}

impl Counters {
    pub(crate) const fn new() -> Self {
        Counters {
            #[cfg(feature = "metrics")]
            cell: std::sync::OnceLock::new(),
        }
    }

    #[cfg(feature = "metrics")]
    fn get(&self, site: &'static Site) -> &[metrics::Counter; 2] {
        self.cell.get_or_init(|| register(site))
    }
}

/// The hedge counters of one site, registered on its first hedge (like the loop's own, every
/// label value is written in the source).
#[cfg(feature = "metrics")]
fn register(site: &'static Site) -> [metrics::Counter; 2] {
    OUTCOMES.map(|outcome| {
        metrics::counter!(
            "retry_attempts_total",
            "system" => site.system,
            "operation" => site.operation,
            "outcome" => outcome
        )
    })
}
