//! What every contender's measurement shares: the counters its handlers bump, the wait for the
//! last handler run, the fresh database, the percentiles and medians, and the crash run's wait.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::Db;

/// Times the handlers ran in the current measurement.
pub(crate) static RAN: AtomicUsize = AtomicUsize::new(0);
/// Due → pickup latencies of the current measurement, in µs.
pub(crate) static LATENCIES: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// When the crash-recovery task was started again, µs since the epoch.
pub(crate) static RESTARTED_AT: Mutex<Option<u64>> = Mutex::new(None);

/// The idle workers' poll interval in the latency and crash runs (ours and apalis).
pub(crate) const POLL: Duration = Duration::from_millis(100);
/// The bound of every wait that is not a throughput run.
pub(crate) const LIMIT: Duration = Duration::from_secs(300);

pub(crate) fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_micros(),
    )
    .expect("µs fit in u64")
}

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn percentile(sorted_us: &[u64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p / 100.0) * sorted_us.len() as f64).ceil() as usize;
    sorted_us[rank.clamp(1, sorted_us.len()) - 1] as f64 / 1000.0
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
    /// The same server through PgBouncer (transaction pooling): ours only.
    PgBouncer,
}

/// A fresh database of `backend`.
pub(crate) async fn fresh_db(backend: Backend) -> Db {
    Db::new(backend != Backend::Sqlite, "bench").await
}

/// One throughput measurement: enqueue calls per second, and handler runs per second from the
/// worker's start and from its first run (see [`drain`]); `ran` < the tasks enqueued when the
/// run hit its time cap.
#[derive(Clone, Copy)]
pub(crate) struct Rates {
    pub(crate) enqueue: f64,
    pub(crate) tasks: f64,
    pub(crate) steady: f64,
    pub(crate) ran: usize,
}

/// Starts a throughput run: zeroes the handler count.
pub(crate) fn reset_ran() {
    RAN.store(0, Ordering::SeqCst);
}

/// Waits until the handlers ran `n` times, or `cap` (`DURABLE_BENCH_CAP_S`) passed since
/// `start`: a contender that would take many minutes at its defaults (River polls every
/// 100 ms, one job per worker slot) is stopped there and its rate taken over what ran. The
/// steady rate counts from the first run seen, which leaves out the worker's start
/// (connections, its first claim) that the first figure includes.
pub(crate) async fn drain(n: usize, start: Instant, enqueue: f64) -> Rates {
    let cap = Duration::from_secs(env_usize("DURABLE_BENCH_CAP_S", 30) as u64);
    let mut first: Option<(Instant, usize)> = None;
    loop {
        let ran = RAN.load(Ordering::SeqCst);
        if ran > 0 && first.is_none() {
            first = Some((Instant::now(), ran));
        }
        let took = start.elapsed();
        if ran >= n || took >= cap {
            let steady = first.map_or(0.0, |(at, counted)| {
                (ran.min(n) - counted) as f64 / at.elapsed().as_secs_f64().max(1e-9)
            });
            return Rates {
                enqueue,
                tasks: ran.min(n) as f64 / took.as_secs_f64(),
                steady,
                ran: ran.min(n),
            };
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Enqueues `n` tasks one call at a time through `enqueue`; returns calls per second.
pub(crate) async fn enqueue_each<F, Fut>(n: usize, mut enqueue: F) -> f64
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let start = Instant::now();
    for i in 0..n as u64 {
        enqueue(i).await;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Records a latency task's pickup: `due` is when its enqueue call started, in µs.
pub(crate) fn picked_up(due: u64) {
    let picked = now_us();
    LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(picked.saturating_sub(due));
}

/// Clears the latencies before a latency run.
pub(crate) fn reset_latencies() {
    LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// The latency run's enqueues: after the idle worker's start, `tasks` tasks 10–30 ms apart,
/// each carrying the time just before its enqueue call; then waits for every pickup and returns
/// the latencies sorted.
pub(crate) async fn latency_run<F, Fut>(tasks: usize, mut enqueue: F) -> Vec<u64>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..tasks {
        tokio::time::sleep(Duration::from_millis(10 + (i as u64 * 7919) % 21)).await;
        enqueue(now_us()).await;
    }
    let start = Instant::now();
    while LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len()
        < tasks
    {
        assert!(start.elapsed() < LIMIT, "latency tasks did not all run");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut v = std::mem::take(&mut *LATENCIES.lock().unwrap_or_else(PoisonError::into_inner));
    v.sort_unstable();
    v
}

/// Clears the restart time before a crash run.
pub(crate) fn reset_restarted() {
    *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) = None;
}

/// Records that the crash task started again (on the surviving worker).
pub(crate) fn restarted() {
    *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) = Some(now_us());
}

/// Waits, bounded, for the surviving worker to start the crash task; returns seconds since
/// `killed` (µs since the epoch).
pub(crate) async fn wait_restarted(killed: u64, within: Duration) -> Result<f64, String> {
    let start = Instant::now();
    loop {
        if let Some(at) = *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) {
            return Ok(at.saturating_sub(killed) as f64 / 1e6);
        }
        if start.elapsed() > within {
            return Err(format!("not started again within {within:?} of the kill"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
