//! graphile_worker 0.14, the Rust port of graphile-worker (PostgreSQL through sqlx 0.9).
//!
//! - Defaults: `WorkerOptions::default().concurrency(concurrency)`, its own pool from the URL
//!   (`max_pg_conn` default 20), a poll every 1 s besides LISTEN/NOTIFY. Each poll tick or
//!   notification lets one slot run one job (`runner/job_loop/direct.rs`,
//!   `runner/sources/dispatch.rs`): with the tasks inserted before the worker starts (their
//!   notifications gone), that is about `concurrency` jobs per second.
//! - Tuned: the "Throughput-oriented worker" of its guide
//!   (`docs/src/configuration/worker-options.md`): poll every 500 ms, completions and permanent
//!   failures batched for 5 ms (`complete_job_batch_delay`, `fail_job_batch_delay`: "reduces the
//!   number of SQL round trips and can significantly improve throughput"), and the local queue
//!   (batch-fetches jobs, `docs/src/guides/local-queue.md`) with a TTL of 60 s and a size of
//!   100 as there, raised to the concurrency where that is larger (its size is the most jobs
//!   one fetch claims: 100 would leave 900 of 1 000 workers idle).
//! - Crash recovery: off by default (a crashed worker's jobs stay locked; graphile-worker takes
//!   back a lock after 4 h). Measured with its worker recovery on (`docs/src/guides/recovery.md`),
//!   both workers heartbeating every 1 s, the sweeper every 1 s, a worker stale after 2 s, and
//!   a recovery delay of 0: our lease 2 s / recoverer 1 s / retry delay 0.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use graphile_worker::{
    IntoTaskHandlerResult, JobSpec, LocalQueueConfig, TaskHandler, Worker, WorkerContext,
    WorkerOptions,
};
use serde::{Deserialize, Serialize};

use crate::Setup;
use crate::child::{Crashing, hold_until_killed, is_child};
use crate::measure::{
    Backend, LIMIT, RAN, Rates, drain, enqueue_each, fresh_db, latency_run, picked_up,
    reset_latencies, reset_ran, reset_restarted, restarted, wait_restarted,
};

#[derive(Deserialize, Serialize)]
struct Noop {
    i: u64,
}

impl TaskHandler for Noop {
    const IDENTIFIER: &'static str = "noop";

    async fn run(self, _ctx: WorkerContext) -> impl IntoTaskHandlerResult {
        RAN.fetch_add(1, Ordering::SeqCst);
        Ok::<(), String>(())
    }
}

#[derive(Deserialize, Serialize)]
struct Latency {
    due: u64,
}

impl TaskHandler for Latency {
    const IDENTIFIER: &'static str = "latency";

    async fn run(self, _ctx: WorkerContext) -> impl IntoTaskHandlerResult {
        picked_up(self.due);
        Ok::<(), String>(())
    }
}

#[derive(Deserialize, Serialize)]
struct Crash {}

impl TaskHandler for Crash {
    const IDENTIFIER: &'static str = "crash";

    /// In the crashing child: holds the task until killed; in the bench: the restart.
    async fn run(self, _ctx: WorkerContext) -> impl IntoTaskHandlerResult {
        if is_child() {
            hold_until_killed().await;
        }
        restarted();
        Ok::<(), String>(())
    }
}

/// The crash table's label of the measured row (see the module's doc).
pub(crate) const CRASH_LABEL: &str =
    "graphile_worker 0.14 (recovery: heartbeat 1 s, stale after 2 s, sweep every 1 s, delay 0)";

/// The row's label of `setup`.
pub(crate) fn label(setup: Setup) -> &'static str {
    match setup {
        Setup::Defaults => "graphile_worker 0.14 (defaults)",
        Setup::Tuned => {
            "graphile_worker 0.14 (tuned: local queue max(100, concurrency), batches 5 ms)"
        }
    }
}

/// A worker of `setup` on `url` (migrated by `init`), not yet running.
async fn worker(setup: Setup, url: &str, concurrency: usize) -> Worker {
    let options = WorkerOptions::default()
        .database_url(url)
        .concurrency(concurrency)
        .listen_os_shutdown_signals(false)
        .define_job::<Noop>()
        .define_job::<Latency>()
        .define_job::<Crash>();
    let options = match setup {
        Setup::Defaults => options,
        Setup::Tuned => options
            .poll_interval(Duration::from_millis(500))
            .complete_job_batch_delay(Duration::from_millis(5))
            .fail_job_batch_delay(Duration::from_millis(5))
            .local_queue(
                LocalQueueConfig::default()
                    .with_size(concurrency.max(100))
                    .with_ttl(Duration::from_secs(60)),
            ),
    };
    options.init().await.expect("graphile_worker init")
}

/// Runs `worker` on a tokio task; `stop` asks it to shut down and waits.
fn spawn(worker: Arc<Worker>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        worker.run().await.expect("graphile_worker run");
    })
}

async fn stop(worker: &Worker, running: tokio::task::JoinHandle<()>) {
    worker.request_shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(30), running).await;
}

pub(crate) async fn throughput(
    setup: Setup,
    backend: Backend,
    concurrency: usize,
    n: usize,
) -> Rates {
    let db = fresh_db(backend).await;
    let worker = Arc::new(worker(setup, &db.url, concurrency).await);
    let utils = worker.create_utils();
    let enqueue = enqueue_each(n, |i| {
        let utils = &utils;
        async move {
            utils
                .add_job(Noop { i }, JobSpec::default())
                .await
                .expect("graphile_worker add_job");
        }
    })
    .await;
    reset_ran();
    let start = Instant::now();
    let running = spawn(worker.clone());
    let rates = drain(n, start, enqueue).await;
    stop(&worker, running).await;
    drop(worker);
    db.drop_db().await;
    rates
}

pub(crate) async fn latency(setup: Setup, backend: Backend, tasks: usize) -> Vec<u64> {
    let db = fresh_db(backend).await;
    let worker = Arc::new(worker(setup, &db.url, 4).await);
    let utils = worker.create_utils();
    reset_latencies();
    let running = spawn(worker.clone());
    let v = latency_run(tasks, |due| {
        let utils = &utils;
        async move {
            utils
                .add_job(Latency { due }, JobSpec::default())
                .await
                .expect("graphile_worker add_job");
        }
    })
    .await;
    stop(&worker, running).await;
    drop(worker);
    db.drop_db().await;
    v
}

/// The crash run's worker: see the module's doc.
async fn crash_worker(url: &str) -> Worker {
    WorkerOptions::default()
        .database_url(url)
        .concurrency(1)
        .listen_os_shutdown_signals(false)
        .define_job::<Noop>()
        .define_job::<Latency>()
        .define_job::<Crash>()
        .heartbeat_interval(Duration::from_secs(1))
        .sweep_interval(Duration::from_secs(1))
        .sweep_threshold(Duration::from_secs(2))
        .recovery_delay(Duration::ZERO)
        .init()
        .await
        .expect("graphile_worker init")
}

pub(crate) async fn crash_recovery(setup: Setup, backend: Backend) -> Result<f64, String> {
    if setup == Setup::Defaults {
        return Err(
            "not measured: worker recovery is off by default (a crashed worker's \
                    job stays locked; graphile-worker takes a lock back after 4 h)"
                .to_owned(),
        );
    }
    let db = fresh_db(backend).await;
    reset_restarted();
    let b = Arc::new(crash_worker(&db.url).await);
    b.create_utils()
        .add_job(Crash {}, JobSpec::default())
        .await
        .expect("graphile_worker add_job");
    let took = match Crashing::start("graphile", &db.url) {
        Ok(holder) => {
            let running = spawn(b.clone());
            tokio::time::sleep(Duration::from_millis(200)).await;
            let killed = holder.kill();
            let took = wait_restarted(killed, LIMIT).await;
            stop(&b, running).await;
            took
        }
        Err(e) => Err(e),
    };
    drop(b);
    db.drop_db().await;
    took
}

/// The crashing child: a worker holding the crash task until killed.
pub(crate) async fn crash_child(url: &str) {
    let worker = crash_worker(url).await;
    let _ = worker.run().await;
}
