//! The durable queue's numbers, side by side with the Rust peers on the same machine:
//! `cargo bench -p retry-benches --bench durable --features peers` (apalis 1.0, riverqueue 0.5,
//! graphile_worker 0.14, awa 0.6; see BENCHMARKS.md, "Durable queue"); `--features apalis`
//! runs ours and apalis alone, as before.
//!
//! - **Throughput**: N tasks (default 20 000, so that 1 000 workers take more than one batch)
//!   enqueued one per call, then one worker with concurrency 1, 4, 16, 64, 256 or 1 000 and a
//!   no-op handler; tasks/s from the worker's start until the handler has run N times (ours:
//!   then every task is checked `Completed` in the table), and the steady rate from its first
//!   run to the Nth. The contenders alternate within each round; each peer runs twice, with its
//!   defaults and as its docs advise for throughput (the row says which; each peer's module
//!   says why). A run is stopped after `DURABLE_BENCH_CAP_S` (default 30) s and its rate taken
//!   over what ran, said in the row: River's defaults work ≈ 10 jobs/s per worker slot. With
//!   `DURABLE_BENCH_FINISHED=1000000`, ours on a table that already holds that many completed
//!   tasks (a busy queue's week of finished work) is measured beside ours on an empty table,
//!   and nothing else. Then ours' rate over each peer's, per backend and concurrency.
//! - **Due → pickup latency**: an idle worker (concurrency 4; ours and apalis polling every
//!   100 ms, the peers as in their rows); 200 tasks enqueued one at a time, 10–30 ms apart,
//!   each due at once; the time from just before the enqueue call to the handler's start, p50
//!   and p99.
//! - **Crash recovery**: a worker holding a task is killed; a second worker was already
//!   running. The time from the kill to the second worker starting the task. Ours: its tokio
//!   task aborted (no more lease renewals or heartbeats), lease 2 s, recoverer every 1 s, and a
//!   retry delay of 0 (a lost lease is a failed attempt, retried after the delay: 15–44 s by
//!   default). apalis: aborted likewise, heartbeat 1 s, dead after 2 missed heartbeats (its SQL
//!   compares whole seconds), re-enqueued at once. The peers: a child process of this bench
//!   killed with SIGKILL (their workers spawn tasks of their own), with the nearest settings
//!   each has (river.rs, graphile.rs, awa.rs); with their defaults they recover in an hour or
//!   more, which the table says instead of measuring.
//!
//! SQLite runs in a fresh temp dir each time; PostgreSQL in a fresh database on the server of
//! `RETRY_TEST_POSTGRES_URL` (`eval "$(scripts/postgres.sh)"` starts one), skipped with a
//! message when it is unset. graphile_worker and awa are PostgreSQL-only; River runs on both.
//! Ours also runs on that server through PgBouncer in transaction pooling mode (issue 43: the
//! queue's pooled mode, its wake-ups on a direct `listen_url`), in the rows `PgBouncer`, with
//! the ratio to the direct rows: `RETRY_TEST_PGBOUNCER_URL` when set, else a PgBouncer started
//! by `scripts/pgbouncer.sh` in front of the server (stopped at the end); skipped with a
//! message without `pgbouncer`. Throughput and latency only (apalis keeps named prepared
//! statements and a LISTEN per connection, which a transaction pooler breaks).
//! `DURABLE_BENCH_TASKS` and `DURABLE_BENCH_ROUNDS` (default 3: the median is reported) change
//! the sizes, `DURABLE_BENCH_CONCURRENCY` (e.g. `1,4,16`) the concurrencies; to profile one
//! gap, `DURABLE_BENCH_ONLY` (e.g. `retry_runtime,graphile`: contenders whose name contains one
//! of them), `DURABLE_BENCH_BACKENDS` (e.g. `postgres`) and `DURABLE_BENCH_SECTIONS` (e.g.
//! `throughput`; also `latency`, `crash`) narrow a run. A full run with `--features peers`
//! (20 000 tasks, 3 rounds) is estimated at 1 to 1.5 h on 2 cores, most of it the 144
//! PostgreSQL throughput runs' one-per-call enqueues (20 000 calls each) and the peers' capped
//! runs at low concurrency; one round of 20 000 with `DURABLE_BENCH_CAP_S=10` took 24 min on a
//! quiet machine (run 33). `--features apalis` alone takes a fraction of that.

use std::time::Instant;

use measure::{Backend, Rates, env_usize, median, percentile};

#[path = "../common/mod.rs"]
mod common;

mod apalis;
#[cfg(feature = "peers")]
mod awa;
#[cfg(feature = "peers")]
mod child;
#[cfg(feature = "peers")]
mod graphile;
mod measure;
mod ours;
#[cfg(feature = "peers")]
mod river;

/// Which configuration of a peer a row measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(not(feature = "peers"), allow(dead_code))]
pub(crate) enum Setup {
    /// Only what the measurement needs (its concurrency).
    Defaults,
    /// As the peer's docs advise for throughput.
    Tuned,
}

/// A system measured, in one configuration: each row's measurement is written once, here, and
/// dispatched to the contender's module.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    Ours,
    Apalis,
    #[cfg(feature = "peers")]
    River(Setup),
    #[cfg(feature = "peers")]
    Graphile(Setup),
    #[cfg(feature = "peers")]
    Awa(Setup),
}

impl Contender {
    /// Every contender this build has, ours first.
    fn all() -> Vec<Contender> {
        let mut all = vec![Contender::Ours, Contender::Apalis];
        #[cfg(feature = "peers")]
        for setup in [Setup::Defaults, Setup::Tuned] {
            all.extend([
                Contender::River(setup),
                Contender::Graphile(setup),
                Contender::Awa(setup),
            ]);
        }
        all.retain(|c| picked("DURABLE_BENCH_ONLY", c.name()));
        all
    }

    /// The row's system column.
    fn name(self) -> &'static str {
        match self {
            Contender::Ours => "retry_runtime::durable",
            Contender::Apalis => "apalis 1.0",
            #[cfg(feature = "peers")]
            Contender::River(setup) => river::label(setup),
            #[cfg(feature = "peers")]
            Contender::Graphile(setup) => graphile::label(setup),
            #[cfg(feature = "peers")]
            Contender::Awa(setup) => awa::label(setup),
        }
    }

    /// The crash table's system column: a peer's crash run has settings of its own.
    fn crash_name(self) -> &'static str {
        match self {
            #[cfg(feature = "peers")]
            Contender::River(Setup::Tuned) => river::CRASH_LABEL,
            #[cfg(feature = "peers")]
            Contender::Graphile(Setup::Tuned) => graphile::CRASH_LABEL,
            #[cfg(feature = "peers")]
            Contender::Awa(Setup::Tuned) => awa::CRASH_LABEL,
            _ => self.name(),
        }
    }

    /// Whether it runs on `backend`: ours alone through PgBouncer, graphile_worker and awa on
    /// PostgreSQL alone.
    fn runs_on(self, backend: Backend) -> bool {
        match (self, backend) {
            (Contender::Ours, _) => true,
            (_, Backend::PgBouncer) => false,
            #[cfg(feature = "peers")]
            (Contender::Graphile(_) | Contender::Awa(_), Backend::Sqlite) => false,
            _ => true,
        }
    }

    async fn throughput(
        self,
        backend: Backend,
        concurrency: usize,
        n: usize,
        rows: usize,
    ) -> Rates {
        match (self, backend) {
            (Contender::Ours, _) => ours::throughput(backend, concurrency, n, rows).await,
            (Contender::Apalis, Backend::Sqlite) => {
                apalis::sqlite::throughput(backend, concurrency, n).await
            }
            (Contender::Apalis, _) => apalis::postgres::throughput(backend, concurrency, n).await,
            #[cfg(feature = "peers")]
            (Contender::River(setup), _) => river::throughput(setup, backend, concurrency, n).await,
            #[cfg(feature = "peers")]
            (Contender::Graphile(setup), _) => {
                graphile::throughput(setup, backend, concurrency, n).await
            }
            #[cfg(feature = "peers")]
            (Contender::Awa(setup), _) => awa::throughput(setup, backend, concurrency, n).await,
        }
    }

    async fn latency(self, backend: Backend, tasks: usize) -> Vec<u64> {
        match (self, backend) {
            (Contender::Ours, _) => ours::latency(backend, tasks).await,
            (Contender::Apalis, Backend::Sqlite) => apalis::sqlite::latency(backend, tasks).await,
            (Contender::Apalis, _) => apalis::postgres::latency(backend, tasks).await,
            #[cfg(feature = "peers")]
            (Contender::River(setup), _) => river::latency(setup, backend, tasks).await,
            #[cfg(feature = "peers")]
            (Contender::Graphile(setup), _) => graphile::latency(setup, backend, tasks).await,
            #[cfg(feature = "peers")]
            (Contender::Awa(setup), _) => awa::latency(setup, backend, tasks).await,
        }
    }

    /// Seconds from the kill to the restart, or why it was not measured.
    async fn crash_recovery(self, backend: Backend) -> Result<f64, String> {
        match (self, backend) {
            (Contender::Ours, _) => ours::crash_recovery(backend).await,
            (Contender::Apalis, Backend::Sqlite) => apalis::sqlite::crash_recovery(backend).await,
            (Contender::Apalis, _) => apalis::postgres::crash_recovery(backend).await,
            #[cfg(feature = "peers")]
            (Contender::River(setup), _) => river::crash_recovery(setup, backend).await,
            #[cfg(feature = "peers")]
            (Contender::Graphile(setup), _) => graphile::crash_recovery(setup, backend).await,
            #[cfg(feature = "peers")]
            (Contender::Awa(setup), _) => awa::crash_recovery(setup, backend).await,
        }
    }
}

/// Whether `name` is picked by the comma-separated list in env `var` (a part of the name, any
/// case): every name when it is unset or empty.
fn picked(var: &str, name: &str) -> bool {
    let Ok(list) = std::env::var(var) else {
        return true;
    };
    let name = name.to_lowercase();
    let parts: Vec<String> = list
        .split(',')
        .map(|p| p.trim().to_lowercase())
        .filter(|p| !p.is_empty())
        .collect();
    parts.is_empty() || parts.iter().any(|p| name.contains(p.as_str()))
}

/// The concurrencies of the throughput table.
const CONCURRENCIES: [usize; 6] = [1, 4, 16, 64, 256, 1000];

/// `DURABLE_BENCH_CONCURRENCY` (`1,4,16`: the runs before issue 45), else [`CONCURRENCIES`];
/// a value that is not a list of positive numbers is said and ignored.
fn concurrencies() -> Vec<usize> {
    let Ok(list) = std::env::var("DURABLE_BENCH_CONCURRENCY") else {
        return CONCURRENCIES.to_vec();
    };
    let parsed: Result<Vec<usize>, _> = list.split(',').map(|c| c.trim().parse()).collect();
    match parsed {
        Ok(chosen) if !chosen.is_empty() && !chosen.contains(&0) => chosen,
        _ => {
            eprintln!("DURABLE_BENCH_CONCURRENCY={list:?} is not a list like 1,4,16: ignored");
            CONCURRENCIES.to_vec()
        }
    }
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`: nothing to measure then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    #[cfg(feature = "peers")]
    if let Ok(child) = std::env::var(child::CHILD_ENV) {
        runtime.block_on(crash_child(&child));
        return;
    }
    let tasks = env_usize("DURABLE_BENCH_TASKS", 20_000);
    let rounds = env_usize("DURABLE_BENCH_ROUNDS", 3).max(1);
    // Completed tasks in ours' table before its throughput runs; with any, ours on an empty
    // table is measured beside ours on that one, and nothing else (the peers' tables hold none,
    // and the other sections do not change).
    let finished = env_usize("DURABLE_BENCH_FINISHED", 0);
    let mut backends = vec![Backend::Sqlite];
    if let Ok(server) = std::env::var("RETRY_TEST_POSTGRES_URL") {
        backends.push(Backend::Postgres);
        if picked("DURABLE_BENCH_BACKENDS", "pgbouncer") && ours::start_pgbouncer(&server) {
            backends.push(Backend::PgBouncer);
        }
    } else {
        eprintln!(
            "\n*** PostgreSQL SKIPPED: RETRY_TEST_POSTGRES_URL is not set. \
             `eval \"$(scripts/postgres.sh)\"` starts a throwaway server.\n"
        );
    }
    backends.retain(|b| picked("DURABLE_BENCH_BACKENDS", &format!("{b:?}").to_lowercase()));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "durable queue benchmark: {tasks} tasks per throughput run, median of {rounds} rounds; \
         {} CPUs; load average at start: {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let started = Instant::now();
    runtime.block_on(async {
        if picked("DURABLE_BENCH_SECTIONS", "throughput") {
            throughput_table(&backends, tasks, rounds, finished).await;
        }
        if finished > 0 {
            return;
        }
        if picked("DURABLE_BENCH_SECTIONS", "latency") {
            latency_table(&backends).await;
        }
        if picked("DURABLE_BENCH_SECTIONS", "crash") {
            crash_table(&backends, rounds).await;
        }
    });
    ours::stop_pgbouncer();
    println!("\n(total {:.0} s)", started.elapsed().as_secs_f64());
}

/// In a crash-recovery run's child process: the peer's worker that gets killed.
#[cfg(feature = "peers")]
async fn crash_child(spec: &str) {
    let (role, url) = spec.split_once(' ').expect("`role url`");
    match role {
        "river" => river::crash_child(url).await,
        "graphile" => graphile::crash_child(url).await,
        "awa" => awa::crash_child(url).await,
        _ => panic!("no crashing worker `{role}` for {url}"),
    }
}

async fn throughput_table(backends: &[Backend], tasks: usize, rounds: usize, finished: usize) {
    println!(
        "\nthroughput, no-op handler (enqueue: one task per call, before the workers start; \
         the contenders alternate within each round)"
    );
    println!(
        "| system | backend | concurrency | completed tasks in the table before | tasks/s | \
         steady tasks/s | enqueue/s |\n| --- | --- | --- | --- | --- | --- | --- |"
    );
    // With a prefilled table: ours on an empty one beside ours on the prefilled one.
    let contenders: Vec<(Contender, usize)> = if finished > 0 {
        vec![(Contender::Ours, 0), (Contender::Ours, finished)]
    } else {
        Contender::all().into_iter().map(|c| (c, 0)).collect()
    };
    // Ours' median tasks/s beside each other row's, for the ratios.
    let mut medians: Vec<(Backend, usize, Contender, usize, f64)> = Vec::new();
    for &backend in backends {
        let contenders: Vec<(Contender, usize)> = contenders
            .iter()
            .copied()
            .filter(|(c, _)| c.runs_on(backend))
            .collect();
        for concurrency in concurrencies() {
            let mut runs: Vec<Vec<Rates>> = vec![Vec::new(); contenders.len()];
            for _ in 0..rounds {
                for (i, &(contender, rows)) in contenders.iter().enumerate() {
                    runs[i].push(
                        contender
                            .throughput(backend, concurrency, tasks, rows)
                            .await,
                    );
                }
            }
            for (&(contender, rows), runs) in contenders.iter().zip(runs) {
                let tasks_s = median(runs.iter().map(|r| r.tasks).collect());
                let capped = runs.iter().filter(|r| r.ran < tasks).count();
                let note = if capped > 0 {
                    let ran = median(runs.iter().map(|r| r.ran as f64).collect());
                    format!(
                        " (stopped at the cap in {capped} of {} runs: median {ran:.0} of {tasks} \
                         ran)",
                        runs.len()
                    )
                } else {
                    String::new()
                };
                println!(
                    "| {} | {:?} | {concurrency} | {rows} | {tasks_s:.0}{note} | {:.0} | {:.0} |",
                    contender.name(),
                    backend,
                    median(runs.iter().map(|r| r.steady).collect()),
                    median(runs.iter().map(|r| r.enqueue).collect())
                );
                medians.push((backend, concurrency, contender, rows, tasks_s));
            }
        }
    }
    print_ratios(&medians);
}

/// Ours' median tasks/s over each other row's at the same backend and concurrency; ours through
/// PgBouncer over ours on PostgreSQL directly; ours on a prefilled table over an empty one.
fn print_ratios(medians: &[(Backend, usize, Contender, usize, f64)]) {
    let ours = |backend: Backend, concurrency: usize| {
        medians
            .iter()
            .find(|m| m.0 == backend && m.1 == concurrency && m.2 == Contender::Ours && m.3 == 0)
            .map(|m| m.4)
    };
    let mut lines: Vec<String> = Vec::new();
    for &(backend, concurrency, contender, rows, tasks_s) in medians {
        let line = match (contender, backend) {
            (Contender::Ours, Backend::PgBouncer) => {
                ours(Backend::Postgres, concurrency).map(|direct| {
                    format!(
                        "| ours through PgBouncer / ours on PostgreSQL directly | {concurrency} | \
                         {:.2} |",
                        tasks_s / direct.max(1e-9)
                    )
                })
            }
            (Contender::Ours, _) if rows > 0 => ours(backend, concurrency).map(|empty| {
                format!(
                    "| ours with {rows} completed tasks / ours on an empty table, {backend:?} | \
                     {concurrency} | {:.2} |",
                    tasks_s / empty.max(1e-9)
                )
            }),
            (Contender::Ours, _) => None,
            _ => ours(backend, concurrency).map(|ours| {
                format!(
                    "| ours / {}, {backend:?} | {concurrency} | {:.2} |",
                    contender.name(),
                    ours / tasks_s.max(1e-9)
                )
            }),
        };
        lines.extend(line);
    }
    if !lines.is_empty() {
        println!(
            "\nratios of the median tasks/s\n| ratio | concurrency | × |\n| --- | --- | --- |\n{}",
            lines.join("\n")
        );
    }
}

async fn latency_table(backends: &[Backend]) {
    println!(
        "\ndue -> pickup latency, idle worker (ours and apalis polling every 100 ms), 200 tasks"
    );
    println!("| system | backend | p50 ms | p99 ms | max ms |\n| --- | --- | --- | --- | --- |");
    for &backend in backends {
        for contender in Contender::all().into_iter().filter(|c| c.runs_on(backend)) {
            let v = contender.latency(backend, 200).await;
            println!(
                "| {} | {:?} | {:.1} | {:.1} | {:.1} |",
                contender.name(),
                backend,
                percentile(&v, 50.0),
                percentile(&v, 99.0),
                *v.last().unwrap() as f64 / 1000.0
            );
        }
    }
}

async fn crash_table(backends: &[Backend], rounds: usize) {
    println!(
        "\ncrash recovery: worker killed holding a task -> another worker starts it \
         (ours: lease 2 s, recoverer every 1 s, retry delay 0; apalis: heartbeat 1 s x 2 \
         missed; the peers: see the bench's doc)"
    );
    println!("| system | backend | median s | runs |\n| --- | --- | --- | --- |");
    for &backend in backends.iter().filter(|&&b| b != Backend::PgBouncer) {
        for contender in Contender::all().into_iter().filter(|c| c.runs_on(backend)) {
            let mut v = Vec::new();
            let mut not_measured = None;
            for _ in 0..rounds {
                match contender.crash_recovery(backend).await {
                    Ok(s) => v.push(s),
                    Err(why) => {
                        not_measured = Some(why);
                        break;
                    }
                }
            }
            match not_measured {
                Some(why) => println!("| {} | {:?} | – | {why} |", contender.crash_name(), backend),
                None => {
                    let runs: Vec<String> = v.iter().map(|s| format!("{s:.2}")).collect();
                    println!(
                        "| {} | {:?} | {:.2} | {} |",
                        contender.crash_name(),
                        backend,
                        median(v.clone()),
                        runs.join(", ")
                    );
                }
            }
        }
    }
}
