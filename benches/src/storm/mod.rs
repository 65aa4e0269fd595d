//! The storm simulation: `clients` callers start one logical request each at the same instant,
//! on a paused tokio clock, through a `#[retry]` fn (4 attempts, pauses from 10 ms, one fn per
//! jitter mode), against a simulated server. Counts the calls that reach the server, per
//! millisecond too, and when the last caller is done.
//!
//! Two server models:
//!
//! - [`Server::Failing`]: each call fails with a fixed probability, whatever the load (an
//!   outage or a flaky dependency). The calls a request makes then do not depend on when its
//!   retries land, so jitter cannot change their expected number (1 + p + p² + p³); it only
//!   spreads them in time.
//! - [`Server::Capacity`]: the server completes at most `per_ms` calls in each millisecond and
//!   fails the rest (an overloaded server, or optimistic concurrency where concurrent writers
//!   conflict). Failures then depend on how many calls land together, which is the contention
//!   model of the AWS "Exponential Backoff and Jitter" article.
//! - [`Server::PerSecond`]: a token bucket of `per_sec` calls a second (100 ms of burst); calls
//!   that find it empty fail (sustained overload).
//! - [`Server::DownThen`]: every call fails until `until`, then each with probability `p`.
//!
//! Two traffic shapes: a burst ([`run`]: every client at time 0) and steady traffic
//! ([`run_steady`]: requests arriving as a Poisson process at `per_sec` for `secs`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use retry_runtime::{Budget, retry, system};
use tokio::time::Instant;

use crate::Unavailable;

mod steady;

pub use steady::{Steady, SteadyReport, run_steady};

/// The jitter of the `#[retry]` fn the clients call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Each pause uniform in [d/2, d] (`#[retry]`'s default).
    Equal,
    /// Each pause uniform in [0, d].
    Full,
    /// Each pause exactly d.
    None,
}

impl Jitter {
    /// The three modes, in table order.
    pub const ALL: [Jitter; 3] = [Jitter::Equal, Jitter::Full, Jitter::None];

    /// The `jitter = "..."` value.
    pub const fn name(self) -> &'static str {
        match self {
            Jitter::Equal => "equal",
            Jitter::Full => "full",
            Jitter::None => "none",
        }
    }

    /// The `system = "..."` of the fn with this jitter (each has its own budget).
    pub const fn system(self) -> &'static str {
        match self {
            Jitter::Equal => "storm-equal",
            Jitter::Full => "storm-full",
            Jitter::None => "storm-none",
        }
    }
}

/// How the simulated server decides which calls fail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Server {
    /// Each call fails with this probability (0.0 ..= 1.0), independently of the load.
    Failing(f64),
    /// At most this many calls succeed in each millisecond; the others fail.
    Capacity {
        /// Calls the server completes per millisecond.
        per_ms: u32,
    },
    /// A token bucket: `per_sec` calls a second succeed (with 100 ms of burst), the rest fail.
    PerSecond(u32),
    /// Every call fails until `until` (from the start), then each with probability `p`.
    DownThen {
        /// When the server recovers.
        until: Duration,
        /// The failure probability after it.
        p: f64,
    },
}

/// The retry budget of the clients' system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetKind {
    /// The default, `Budget::adaptive()`.
    Adaptive,
    /// The former default, static: `Budget::new(0.2, 10, 10 s)`.
    Static,
    /// `Budget::unlimited()`.
    None,
}

impl BudgetKind {
    /// The three, in table order.
    pub const ALL: [BudgetKind; 3] = [BudgetKind::Adaptive, BudgetKind::Static, BudgetKind::None];

    /// A table's name for it.
    pub const fn name(self) -> &'static str {
        match self {
            BudgetKind::Adaptive => "adaptive (default)",
            BudgetKind::Static => "static 20 % + 10/s",
            BudgetKind::None => "none",
        }
    }

    fn budget(self) -> Budget {
        match self {
            BudgetKind::Adaptive => Budget::adaptive(),
            BudgetKind::Static => Budget::new(0.2, 10, Duration::from_secs(10)),
            BudgetKind::None => Budget::unlimited(),
        }
    }
}

/// One run of the simulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scenario {
    /// Callers, each making one logical request at time 0.
    pub clients: u32,
    /// The server model.
    pub server: Server,
    /// The jitter of the retry loop.
    pub jitter: Jitter,
    /// The retry budget.
    pub budget: BudgetKind,
    /// Seed of the server's failures (the jitter draws from the thread's RNG).
    pub seed: u64,
}

/// What a [`Scenario`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Calls that reached the server, retries included.
    pub calls: u64,
    /// Logical requests that succeeded.
    pub succeeded: u32,
    /// When the last caller got its answer (virtual time).
    pub completion: Duration,
    /// Mean time a caller waited for its answer (virtual time).
    pub mean_latency: Duration,
    /// The most retries (calls after a request's first) the server received in any one
    /// millisecond: how well the retries are spread.
    pub peak_retries_per_ms: u32,
}

impl Report {
    /// Calls per logical request.
    pub fn amplification(&self, clients: u32) -> f64 {
        self.calls as f64 / f64::from(clients)
    }
}

/// The simulated server: counts calls, per millisecond too.
struct Sim {
    server: Server,
    seed: u64,
    start: Instant,
    calls: AtomicU64,
    /// Per millisecond since `start`: (calls, retries among them, calls that succeeded).
    per_ms: Mutex<Vec<(u32, u32, u32)>>,
    /// [`Server::PerSecond`]'s tokens, and when they were counted.
    bucket: Mutex<(f64, Duration)>,
}

impl Sim {
    /// One call; `tries` counts the calls of this logical request.
    fn call(&self, tries: &AtomicU32) -> Result<(), Unavailable> {
        let retry = tries.fetch_add(1, Ordering::Relaxed) > 0;
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let ms = usize::try_from(self.start.elapsed().as_millis()).unwrap_or(usize::MAX);
        let mut per_ms = self.per_ms.lock().unwrap_or_else(PoisonError::into_inner);
        if per_ms.len() <= ms {
            per_ms.resize(ms + 1, (0, 0, 0));
        }
        let bucket = &mut per_ms[ms];
        bucket.0 += 1;
        bucket.1 += u32::from(retry);
        let ok = match self.server {
            Server::Failing(p) => unit(splitmix64(self.seed ^ n)) >= p,
            Server::Capacity { per_ms } => bucket.2 < per_ms,
            Server::PerSecond(per_sec) => self.take_token(per_sec),
            Server::DownThen { until, p } => {
                self.start.elapsed() >= until && unit(splitmix64(self.seed ^ n)) >= p
            }
        };
        if ok {
            bucket.2 += 1;
            Ok(())
        } else {
            Err(Unavailable {
                call: u32::try_from(n + 1).unwrap_or(u32::MAX),
            })
        }
    }
}

impl Sim {
    fn new(server: Server, seed: u64, start: Instant) -> Sim {
        Sim {
            server,
            seed,
            start,
            calls: AtomicU64::new(0),
            per_ms: Mutex::new(Vec::new()),
            bucket: Mutex::new((0.0, Duration::ZERO)),
        }
    }

    /// A token of a bucket refilled at `per_sec` and holding 100 ms of them (at least one).
    fn take_token(&self, per_sec: u32) -> bool {
        let mut bucket = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let now = self.start.elapsed();
        let burst = (f64::from(per_sec) / 10.0).max(1.0);
        bucket.0 = (bucket.0 + (now - bucket.1).as_secs_f64() * f64::from(per_sec)).min(burst);
        bucket.1 = now;
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A well-mixed 64-bit hash (splitmix64's finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A hash mapped to [0, 1).
fn unit(hash: u64) -> f64 {
    (hash >> 11) as f64 / (1u64 << 53) as f64
}

#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "equal",
    system = "storm-equal"
)]
async fn call_equal(sim: &Sim, tries: &AtomicU32) -> Result<(), Unavailable> {
    sim.call(tries)
}

#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "full",
    system = "storm-full"
)]
async fn call_full(sim: &Sim, tries: &AtomicU32) -> Result<(), Unavailable> {
    sim.call(tries)
}

#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "storm-none"
)]
async fn call_none(sim: &Sim, tries: &AtomicU32) -> Result<(), Unavailable> {
    sim.call(tries)
}

/// Runs one scenario on a fresh paused current-thread runtime.
pub fn run(scenario: &Scenario) -> Report {
    let rt = crate::runtime(true);
    rt.block_on(async {
        // Set inside the runtime: the new budget's window starts on this runtime's clock.
        system(scenario.jitter.system()).set_budget(scenario.budget.budget());
        let start = Instant::now();
        let sim = Arc::new(Sim::new(scenario.server, scenario.seed, start));
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..scenario.clients {
            let sim = Arc::clone(&sim);
            let jitter = scenario.jitter;
            clients.spawn(async move {
                let tries = AtomicU32::new(0);
                let result = match jitter {
                    Jitter::Equal => call_equal(&sim, &tries).await,
                    Jitter::Full => call_full(&sim, &tries).await,
                    Jitter::None => call_none(&sim, &tries).await,
                };
                (result.is_ok(), start.elapsed())
            });
        }
        let (mut succeeded, mut completion, mut total) = (0, Duration::ZERO, Duration::ZERO);
        while let Some(joined) = clients.join_next().await {
            let (ok, latency) = joined.expect("a client task panicked");
            succeeded += u32::from(ok);
            completion = completion.max(latency);
            total += latency;
        }
        let per_ms = sim.per_ms.lock().unwrap_or_else(PoisonError::into_inner);
        Report {
            calls: sim.calls.load(Ordering::Relaxed),
            succeeded,
            completion,
            mean_latency: total / scenario.clients.max(1),
            peak_retries_per_ms: per_ms
                .iter()
                .map(|&(_, retries, _)| retries)
                .max()
                .unwrap_or(0),
        }
    })
}

#[cfg(test)]
mod tests;
