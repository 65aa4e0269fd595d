//! What the benchmarks share: the operation every contender retries, the contenders
//! themselves, and the storm simulation. `BENCHMARKS.md` at the workspace root has the figures
//! and the commands.
//!
//! Every contender runs the same operation ([`operation`]: an `#[inline(never)] async fn` that
//! fails the first k calls of a [`Flaky`] server, then succeeds) with the same schedule: at most
//! [`ATTEMPTS`] attempts, pauses of 10, 20 and 40 ms, no jitter, every failure transient.

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use retry_runtime::{Classify, retry, system};

pub mod peers;
pub mod storm;

/// The error of the `protect` and `instructions` benches' calls: the system down (transient), or
/// a protection's refusal (a rejection, never retried).
#[derive(Debug)]
pub enum CallError {
    /// The system answered 503.
    Unavailable,
    /// The breaker or the bulkhead refused the call.
    Rejected(#[allow(dead_code, reason = "shown by `Debug`")] retry_runtime::Rejected),
}

impl From<retry_runtime::Rejected> for CallError {
    fn from(rejected: retry_runtime::Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}

impl Classify for CallError {
    fn is_transient(&self) -> bool {
        matches!(self, CallError::Unavailable)
    }
    fn is_rejection(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }
}

/// Attempts per call, the first included.
pub const ATTEMPTS: u32 = 4;
/// The first pause; the next ones double: 10, 20, 40 ms.
pub const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The pauses of a call that fails `ATTEMPTS - 1` times: 10 + 20 + 40 ms.
pub const FAILING_PATH_PAUSES: Duration = Duration::from_millis(70);
/// The system name of [`with_retry`], for `set_budget`.
pub const SYSTEM: &str = "bench";
/// The system name of [`with_retry_unbudgeted`], whose budget the benches set to unlimited.
pub const SYSTEM_UNBUDGETED: &str = "bench-unbudgeted";

/// The operation's failure: always transient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable {
    /// Which call of the server failed (1-based).
    pub call: u32,
}

impl Classify for Unavailable {
    fn is_transient(&self) -> bool {
        true
    }
}

/// A server that fails its first `fail_first` calls, then succeeds; counts its calls with an
/// atomic and allocates nothing.
#[derive(Debug)]
pub struct Flaky {
    calls: AtomicU32,
    fail_first: u32,
}

impl Flaky {
    /// A server that fails its first `fail_first` calls.
    pub const fn new(fail_first: u32) -> Self {
        Flaky {
            calls: AtomicU32::new(0),
            fail_first,
        }
    }

    /// Forgets the calls made so far: the next call is the first again.
    pub fn reset(&self) {
        self.calls.store(0, Ordering::Relaxed);
    }

    /// Calls made since the last reset.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    /// One call, as a blocking fn would make it (the same work as [`operation`]).
    pub fn call_blocking(&self) -> Result<u32, Unavailable> {
        self.call()
    }

    fn call(&self) -> Result<u32, Unavailable> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if call <= self.fail_first {
            Err(Unavailable { call })
        } else {
            Ok(call)
        }
    }
}

/// The operation, undecorated: one call to the server.
#[inline(never)]
pub async fn operation(server: &Flaky) -> Result<u32, Unavailable> {
    server.call()
}

/// The anchor: the retry loop one would write by hand, with `tokio::time::sleep`.
pub async fn hand_loop(server: &Flaky) -> Result<u32, Unavailable> {
    let mut attempt = 1;
    let mut pause = FIRST_PAUSE;
    loop {
        match operation(server).await {
            Ok(value) => return Ok(value),
            Err(error) if attempt < ATTEMPTS && error.is_transient() => {
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// `#[retry]`, with the budget of [`SYSTEM`] (the default budget unless a bench sets another).
#[retry(read, attempts = 4, delay = "10ms", jitter = "none", system = "bench")]
pub async fn with_retry(server: &Flaky) -> Result<u32, Unavailable> {
    operation(server).await
}

/// `#[retry]` under [`SYSTEM_UNBUDGETED`], whose budget [`unbudgeted`] makes unlimited.
#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "bench-unbudgeted"
)]
pub async fn with_retry_unbudgeted(server: &Flaky) -> Result<u32, Unavailable> {
    operation(server).await
}

/// Sets the budget of [`SYSTEM_UNBUDGETED`] to unlimited (call once, before measuring).
pub fn unbudgeted() {
    system(SYSTEM_UNBUDGETED).set_budget(retry_runtime::Budget::unlimited());
}

/// backon's exponential backoff: 3 retries from 10 ms, doubling, no jitter (backon's default).
const BACKON: backon::ExponentialBuilder = backon::ExponentialBuilder::new()
    .with_min_delay(FIRST_PAUSE)
    .with_factor(2.0)
    .with_max_times(ATTEMPTS as usize - 1);

/// backon 1.x: `(|| op()).retry(builder).when(transient)`, sleeping with tokio.
pub fn with_backon(server: &Flaky) -> impl Future<Output = Result<u32, Unavailable>> + '_ {
    use backon::Retryable as _;
    (move || operation(server))
        .retry(BACKON)
        .when(Unavailable::is_transient)
}

/// tokio-retry 0.3: `RetryIf::start` over `ExponentialBackoff::from_millis(2).factor(5)`
/// (2ⁿ × 5 ms: 10, 20, 40), 3 retries; tokio-retry has no jitter unless mapped in.
pub fn with_tokio_retry(server: &Flaky) -> impl Future<Output = Result<u32, Unavailable>> + '_ {
    let strategy = tokio_retry::strategy::ExponentialBackoff::from_millis(2)
        .factor(5)
        .take(ATTEMPTS as usize - 1);
    tokio_retry::RetryIf::start(
        strategy,
        move || operation(server),
        Unavailable::is_transient,
    )
}

/// tokio-retry2 0.9: `Retry::spawn` over `ExponentialFactorBackoff::from_millis(10, 2.0)`, 3
/// retries; its action tells transient from permanent errors through `RetryError`.
pub fn with_tokio_retry2(server: &Flaky) -> impl Future<Output = Result<u32, Unavailable>> + '_ {
    use tokio_retry2::RetryError;
    let strategy = tokio_retry2::strategy::ExponentialFactorBackoff::from_millis(10, 2.0)
        .take(ATTEMPTS as usize - 1);
    tokio_retry2::Retry::spawn(strategy, move || async move {
        operation(server).await.map_err(|error| {
            if error.is_transient() {
                RetryError::transient(error)
            } else {
                RetryError::permanent(error)
            }
        })
    })
}

/// A contender, as the tables name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contender {
    /// The name in the tables.
    pub name: &'static str,
    /// The criterion benchmark id (and directory name).
    pub id: &'static str,
    /// `false` for the undecorated fn, which cannot retry.
    pub retries: bool,
}

/// The contenders, in table order; [`each_contender!`] pairs each with its fn.
pub const CONTENDERS: [Contender; 7] = [
    Contender {
        name: "undecorated fn",
        id: "undecorated",
        retries: false,
    },
    Contender {
        name: "hand-written loop",
        id: "hand_loop",
        retries: true,
    },
    Contender {
        name: "#[retry] (default budget)",
        id: "retry",
        retries: true,
    },
    Contender {
        name: "#[retry], budget unlimited",
        id: "retry_unbudgeted",
        retries: true,
    },
    Contender {
        name: "backon 1.x",
        id: "backon",
        retries: true,
    },
    Contender {
        name: "tokio-retry 0.3",
        id: "tokio_retry",
        retries: true,
    },
    Contender {
        name: "tokio-retry2 0.9",
        id: "tokio_retry2",
        retries: true,
    },
];

/// Runs `$body` once per contender of [`CONTENDERS`], in order, with `$contender` (a
/// [`Contender`]) and `$call` (the fn from `&Flaky` to the contender's future).
#[macro_export]
macro_rules! each_contender {
    (|$contender:ident, $call:ident| $body:block) => {{
        let [c0, c1, c2, c3, c4, c5, c6] = $crate::CONTENDERS;
        {
            let ($contender, $call) = (c0, $crate::operation);
            $body
        }
        {
            let ($contender, $call) = (c1, $crate::hand_loop);
            $body
        }
        {
            let ($contender, $call) = (c2, $crate::with_retry);
            $body
        }
        {
            let ($contender, $call) = (c3, $crate::with_retry_unbudgeted);
            $body
        }
        {
            let ($contender, $call) = (c4, $crate::with_backon);
            $body
        }
        {
            let ($contender, $call) = (c5, $crate::with_tokio_retry);
            $body
        }
        {
            let ($contender, $call) = (c6, $crate::with_tokio_retry2);
            $body
        }
    }};
}

/// Builds a future with `make` and polls it once with a no-op waker, outside any runtime;
/// returns its output. The future is built in place, in its pinned slot (a future passed by
/// value would be copied there first: a `memcpy` of its size on every call).
///
/// # Panics
///
/// If the future is not ready after one poll: on the happy path none of the contenders
/// sleeps, so each completes on its first poll.
#[inline(always)]
pub fn poll_once<F: Future>(make: impl FnOnce() -> F) -> F::Output {
    let mut future = pin!(make());
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the happy path must complete on its first poll"),
    }
}

/// A current-thread runtime with the time driver; its clock paused if `paused`.
///
/// # Panics
///
/// If the runtime cannot be built.
pub fn runtime(paused: bool) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(paused)
        .build()
        .expect("a current-thread runtime")
}

/// Where cargo puts build output: `$CARGO_TARGET_DIR`, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// Criterion's output directory: `$CRITERION_HOME`, else `criterion/` in [`target_dir`] (what
/// criterion itself picks), so that a bench can read its own estimates back.
pub fn criterion_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME").map_or_else(|| target_dir().join("criterion"), PathBuf::from)
}

/// What criterion measured for one benchmark, read back from its output directory, in ns per
/// iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimates {
    /// The median.
    pub median: f64,
    /// The mean.
    pub mean: f64,
    /// The mean's 95 % confidence interval.
    pub mean_ci: (f64, f64),
    /// The fastest and the slowest sample (each the mean of its iterations).
    pub samples: (f64, f64),
}

/// Reads the estimates criterion wrote for `group/id` in this run; `None` if it did not run
/// (filtered out).
pub fn estimates(group: &str, id: &str) -> Option<Estimates> {
    let dir = criterion_dir().join(group).join(id).join("new");
    let read = |file: &str| -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(dir.join(file)).ok()?).ok()
    };
    let estimates = read("estimates.json")?;
    let sample = read("sample.json")?;
    let number = |value: &serde_json::Value| value.as_f64();
    let point = |name: &str| number(&estimates[name]["point_estimate"]);
    let per_iteration: Vec<f64> = sample["iters"]
        .as_array()?
        .iter()
        .zip(sample["times"].as_array()?)
        .filter_map(|(iters, time)| Some(number(time)? / number(iters)?))
        .collect();
    Some(Estimates {
        median: point("median")?,
        mean: point("mean")?,
        mean_ci: (
            number(&estimates["mean"]["confidence_interval"]["lower_bound"])?,
            number(&estimates["mean"]["confidence_interval"]["upper_bound"])?,
        ),
        samples: (
            per_iteration.iter().copied().fold(f64::INFINITY, f64::min),
            per_iteration.iter().copied().fold(0.0, f64::max),
        ),
    })
}

/// The `uptime` line, or `None` where there is no `uptime` (for the load notes).
pub fn uptime() -> Option<String> {
    let output = std::process::Command::new("uptime").output().ok()?;
    Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests;
