//! Steady traffic through the storm's simulated server: requests arriving as a Poisson process.

use retry_runtime::system;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::{BudgetKind, Jitter, Server, Sim, call_full, splitmix64, unit};

/// Steady traffic: requests arrive as a Poisson process, `per_sec` a second for `secs`
/// seconds, each through the `jitter = "full"` fn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steady {
    /// Requests per second.
    pub per_sec: u32,
    /// Seconds of traffic.
    pub secs: u32,
    /// The server model.
    pub server: Server,
    /// The retry budget.
    pub budget: BudgetKind,
    /// Seed of the arrivals and the server's failures.
    pub seed: u64,
}

/// What a [`Steady`] run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteadyReport {
    /// Calls that reached the server, retries included.
    pub calls: u64,
    /// Each request: when it started, and whether it succeeded.
    pub requests: Vec<(Duration, bool)>,
}

impl SteadyReport {
    /// Requests that succeeded, in %.
    pub fn served(&self) -> f64 {
        self.served_between(Duration::ZERO, Duration::MAX)
    }

    /// Requests started in `[from, to)` that succeeded, in % (100 with none).
    pub fn served_between(&self, from: Duration, to: Duration) -> f64 {
        let (ok, all) = self
            .requests
            .iter()
            .filter(|(start, _)| (from..to).contains(start))
            .fold((0u32, 0u32), |(ok, all), &(_, served)| {
                (ok + u32::from(served), all + 1)
            });
        if all == 0 {
            100.0
        } else {
            f64::from(ok) * 100.0 / f64::from(all)
        }
    }

    /// Calls per request.
    pub fn amplification(&self) -> f64 {
        self.calls as f64 / self.requests.len().max(1) as f64
    }
}

/// Runs steady traffic on a fresh paused current-thread runtime.
pub fn run_steady(steady: &Steady) -> SteadyReport {
    let rt = crate::runtime(true);
    rt.block_on(async {
        system(Jitter::Full.system()).set_budget(steady.budget.budget());
        let start = Instant::now();
        let sim = Arc::new(Sim::new(steady.server, steady.seed, start));
        let end = Duration::from_secs(u64::from(steady.secs));
        let mut clients = tokio::task::JoinSet::new();
        let (mut at, mut n) = (Duration::ZERO, 0u64);
        loop {
            // Exponential gaps: -ln(u) / rate, u in (0, 1].
            let u = 1.0 - unit(splitmix64(!steady.seed ^ n));
            at += Duration::from_secs_f64(-u.ln() / f64::from(steady.per_sec.max(1)));
            n += 1;
            if at >= end {
                break;
            }
            tokio::time::sleep_until(start + at).await;
            let sim = Arc::clone(&sim);
            clients.spawn(async move {
                let tries = AtomicU32::new(0);
                (at, call_full(&sim, &tries).await.is_ok())
            });
        }
        let mut requests = Vec::with_capacity(clients.len());
        while let Some(joined) = clients.join_next().await {
            requests.push(joined.expect("a client task panicked"));
        }
        requests.sort_by_key(|&(at, _)| at);
        SteadyReport {
            calls: sim.calls.load(Ordering::Relaxed),
            requests,
        }
    })
}
