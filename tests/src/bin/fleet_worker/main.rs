//! A durable-queue worker process for the fleet and partition tests
//! (`tests/tests/durable/fleet.rs`, `tests/tests/durable/partition.rs`).
//!
//! ```text
//! fleet_worker --url URL --name NAME --version V --log FILE --mode fleet|gated
//!              [--queue Q] [--concurrency N] [--poll-ms N] [--lease-ms N] [--recover-ms N]
//!              [--retry-delay-ms N] [--periodic-ms N] [--gates DIR]
//! ```
//!
//! It serves the kinds `job` and `tick` (`fleet`) or `gated` (`gated`) until its standard input
//! closes, then stops gracefully (drains, exits 0). Every attempt that gets that far records its
//! side effect as a row of the table `effects (task_id, attempt, worker, pid, version)` in the
//! queue's own database, through a pool of its own, then returns `Ok`. `--version` is this
//! "binary's version": it is logged and written with each side effect, so a test can replace
//! the processes of a fleet one by one with a newer one (a rolling restart) and see who ran
//! what. `--periodic-ms N` also runs a [`Scheduler`] with one entry: a `tick` task every N ms.
//!
//! - `fleet`: the row is written unconditionally (what a handler that calls an external system
//!   does: at least once per attempt that gets there).
//! - `gated`: the row is written only while the attempt still holds its lease (an `INSERT …
//!   WHERE EXISTS` on the task's row and lease token: a fenced side effect), and the test says
//!   when: each attempt waits for the file `DIR/<task id>.<retried>.write`, writes, then waits
//!   for `DIR/<task id>.<retried>.return` before it returns.
//!
//! FILE gets one line per event (its own file: one writer, whole lines, flushed at once):
//!
//! ```text
//! ready <name> <version> <pid>
//! start <task id> <retried> <pid>
//! effect <task id> <retried> <pid>     the side effect's row was written
//! refused <task id> <retried> <pid>    gated: the fenced write found the lease taken over
//! ok <task id> <retried> <pid>         the handler returns Ok
//! dropped <task id> <retried> <pid>    the handler's future was dropped before it ended
//! ```
//!
//! The worker's own log (`tracing`, INFO and above: retries, fenced-off outcomes, lost leases)
//! goes to standard error. One thread per process (tokio's current-thread runtime).

mod effects;
mod handler;

use std::fs::OpenOptions;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::durable::{Queue, Scheduler, Task, Worker};

use crate::effects::Effects;
use crate::handler::{Ctx, Log, Mode, handle};

struct Args {
    url: String,
    queue: Option<String>,
    name: String,
    version: String,
    log: String,
    mode: Mode,
    concurrency: usize,
    poll: Duration,
    lease: Duration,
    recover: Duration,
    retry_delay: Duration,
    periodic: Option<Duration>,
    gates: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        url: String::new(),
        queue: None,
        name: format!("worker-{}", std::process::id()),
        version: "v0".into(),
        log: String::new(),
        mode: Mode::Fleet,
        concurrency: 4,
        poll: Duration::from_millis(100),
        lease: Duration::from_secs(2),
        recover: Duration::from_millis(500),
        retry_delay: Duration::from_millis(50),
        periodic: None,
        gates: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let millis = || {
            value
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--url" => args.url = value.clone(),
            "--queue" => args.queue = Some(value.clone()),
            "--name" => args.name = value.clone(),
            "--version" => args.version = value.clone(),
            "--log" => args.log = value.clone(),
            "--mode" => {
                args.mode = match value.as_str() {
                    "fleet" => Mode::Fleet,
                    "gated" => Mode::Gated,
                    other => return Err(format!("unknown mode {other}")),
                }
            }
            "--concurrency" => {
                args.concurrency = value.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "--poll-ms" => args.poll = millis()?,
            "--lease-ms" => args.lease = millis()?,
            "--recover-ms" => args.recover = millis()?,
            "--retry-delay-ms" => args.retry_delay = millis()?,
            "--periodic-ms" => args.periodic = Some(millis()?),
            "--gates" => args.gates = Some(PathBuf::from(&value)),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.url.is_empty() || args.log.is_empty() {
        return Err("--url and --log are required".into());
    }
    if args.mode == Mode::Gated && args.gates.is_none() {
        return Err("--mode gated needs --gates DIR".into());
    }
    Ok(args)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("fleet_worker: {e}");
            return ExitCode::from(2);
        }
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)
        .expect("open the event log");
    let log = Log(Arc::new(Mutex::new(file)));

    let queue = match Queue::connect(&args.url).await {
        Ok(q) => match &args.queue {
            Some(name) => q.named(name.clone()),
            None => q,
        },
        Err(e) => {
            eprintln!("fleet_worker {}: connect: {e}", args.name);
            return ExitCode::from(1);
        }
    };
    let connections = u32::try_from(args.concurrency).unwrap_or(u32::MAX).max(1);
    let effects = match Effects::open(&args.url, connections).await {
        Ok(effects) => effects,
        Err(e) => {
            eprintln!("fleet_worker {}: the effects pool: {e}", args.name);
            return ExitCode::from(1);
        }
    };

    // Stop (gracefully) when the test closes our standard input.
    let (closed, stdin_closed) = tokio::sync::watch::channel(false);
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
        let _ = closed.send(true);
    });
    let shutdown = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|closed| *closed).await;
    };

    let ctx = Arc::new(Ctx {
        log: log.clone(),
        effects,
        queue: queue.name().to_owned(),
        name: args.name.clone(),
        version: args.version.clone(),
        mode: args.mode,
        gates: args.gates.clone(),
    });
    let retry_delay = args.retry_delay;
    let mut worker = Worker::new(queue.clone())
        .concurrency(args.concurrency)
        .poll_interval(args.poll)
        .lease(args.lease)
        .recover_interval(args.recover)
        .shutdown_timeout(Duration::from_secs(10))
        .retry_delay(move |n, _err, _task| retry_delay * (n + 1));
    let kinds: &[&str] = match args.mode {
        Mode::Fleet => &["job", "tick"],
        Mode::Gated => &["gated"],
    };
    for &kind in kinds {
        let ctx = ctx.clone();
        worker = worker.handle(kind, move |task| handle(ctx.clone(), task));
    }
    let scheduler = args
        .periodic
        .map(|every| Scheduler::new(queue.clone()).every(every, || Task::new("tick", &"periodic")));
    log.line(&format!(
        "ready {} {} {}",
        args.name,
        args.version,
        std::process::id()
    ));
    let scheduled = async {
        match scheduler {
            Some(scheduler) => scheduler.run_until(shutdown(stdin_closed.clone())).await,
            None => Ok(()),
        }
    };
    let (worked, scheduled) =
        tokio::join!(worker.run_until(shutdown(stdin_closed.clone())), scheduled);
    match worked.and(scheduled) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet_worker {}: {e}", args.name);
            ExitCode::from(1)
        }
    }
}
