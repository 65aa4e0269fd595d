//! A durable-queue worker process for the crash tests (`tests/tests/durable/crash.rs`).
//!
//! ```text
//! durable_worker --url URL --name NAME --log FILE --mode MODE
//!                [--concurrency N] [--poll-ms N] [--lease-ms N] [--recover-ms N]
//!                [--retry-delay-ms N] [--stall-ms N] [--fail-percent N] [--global N]
//!                [--prefetch N] [--count N]
//! ```
//!
//! `--prefetch N` sets [`Worker::prefetch`]. Besides its log, the process reports on its standard
//! output, one flushed line each, what a test outside it waits for before it kills it
//! (`retry_tests::faults::kill`): `start <task id> <retried>` when a handler starts, `end <task
//! id> <retried> <outcome>` when it ends.
//!
//! `--global N` limits the system `gw` to N active tasks across every worker of the queue
//! (`SystemLimit::global_concurrency`, `tests/tests/durable/global.rs`). `--breaker N` gives
//! `gw` a breaker that opens after N transient failures in a row, for 60 s, with 1 probe, and
//! makes the worker know `gw` (`tests/tests/durable/shared_breaker.rs`).
//!
//! It handles the kind `job` until its standard input closes (then it drains and exits 0), and
//! appends one line per attempt event to FILE (its own file: one writer, whole lines):
//!
//! ```text
//! start <task id> <retried> <worker name> <micros since the epoch>
//! end <task id> <retried> <worker name> <micros since the epoch> <ok | err | panic>
//! ```
//!
//! Modes: `ok` succeeds at once; `reset` fails with a connection reset (a transient error); `hang` never returns (the test kills the process); `hang-named` never returns for a task whose id starts with `hang` and succeeds at once otherwise; `stall-ok` /
//! `stall-err`, on a task's first attempt, block the process's only thread for `--stall-ms` (no
//! lease renewal can run; the test also stops the process meanwhile), then succeed / fail (later
//! attempts succeed at once); `sleep-ok`, on a task's first attempt, sleeps `--stall-ms` (an
//! async sleep: leases are renewed meanwhile), then succeeds (later attempts succeed at once);
//! `random` sleeps 0–20 ms (one attempt in 25: 1.5
//! leases, so the lease must be renewed) and fails about `--fail-percent` % of its attempts (an
//! error, or now and then a panic), decided by a hash of the task id and `retried`, and never
//! once `retried` ≥ 4.
//!
//! `raw-stall-ok` uses no [`Worker`]: it claims one task with [`protocol::claim`], logs `start`,
//! blocks for `--stall-ms`, calls [`protocol::complete`] and logs `end … ok-applied` or
//! `end … ok-fenced` (the completion was refused: the lease had been taken over), then waits
//! for its standard input to close.
//!
//! `migrate` runs no worker: it opens the database with [`Schema::connect`], prints `migrating`,
//! applies every pending version ([`Schema::up`]), prints `migrated <versions>` and exits.
//! `enqueue-many` runs no worker either: it prints `enqueueing <count>`, enqueues `--count` tasks
//! of kind `job` (ids `batch-0` …) with one [`Queue::enqueue_many`], prints `enqueued <count>`,
//! then waits for its standard input to close.
//!
//! The runtime is tokio's current-thread one: one thread per worker process.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use retry_runtime::durable::{Queue, Schema, SystemLimit, Task, Worker, protocol};
use retry_runtime::{BoxError, Breaker, declare_system, system};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ok,
    Hang,
    HangNamed,
    StallOk,
    StallErr,
    SleepOk,
    Random,
    RawStallOk,
    Reset,
    Migrate,
    EnqueueMany,
}

struct Args {
    url: String,
    name: String,
    log: String,
    mode: Mode,
    concurrency: usize,
    poll: Duration,
    lease: Duration,
    recover: Duration,
    retry_delay: Duration,
    stall: Duration,
    fail_percent: u64,
    global: Option<usize>,
    breaker: Option<u32>,
    prefetch: Option<usize>,
    count: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        url: String::new(),
        name: format!("worker-{}", std::process::id()),
        log: String::new(),
        mode: Mode::Ok,
        concurrency: 1,
        poll: Duration::from_millis(50),
        lease: Duration::from_secs(1),
        recover: Duration::from_millis(200),
        retry_delay: Duration::from_millis(100),
        stall: Duration::from_secs(3),
        fail_percent: 30,
        global: None,
        breaker: None,
        prefetch: None,
        count: 0,
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
            "--name" => args.name = value.clone(),
            "--log" => args.log = value.clone(),
            "--mode" => {
                args.mode = match value.as_str() {
                    "ok" => Mode::Ok,
                    "hang" => Mode::Hang,
                    "hang-named" => Mode::HangNamed,
                    "stall-ok" => Mode::StallOk,
                    "stall-err" => Mode::StallErr,
                    "sleep-ok" => Mode::SleepOk,
                    "random" => Mode::Random,
                    "raw-stall-ok" => Mode::RawStallOk,
                    "reset" => Mode::Reset,
                    "migrate" => Mode::Migrate,
                    "enqueue-many" => Mode::EnqueueMany,
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
            "--stall-ms" => args.stall = millis()?,
            "--fail-percent" => {
                args.fail_percent = value.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "--global" => {
                args.global = Some(value.parse().map_err(|e| format!("{flag}: {e}"))?);
            }
            "--prefetch" => {
                args.prefetch = Some(value.parse().map_err(|e| format!("{flag}: {e}"))?);
            }
            "--count" => args.count = value.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--breaker" => {
                args.breaker = Some(value.parse().map_err(|e| format!("{flag}: {e}"))?);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.url.is_empty() || args.log.is_empty() {
        return Err("--url and --log are required".into());
    }
    Ok(args)
}

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros()
}

/// FNV-1a: a stable hash, the same in every process and run.
fn fnv(text: &str, n: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes().chain(n.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One line per event, flushed at once: the test reads the file while the process runs (or
/// after it was killed).
#[derive(Clone)]
struct Log(Arc<Mutex<File>>);

impl Log {
    fn line(&self, line: &str) {
        let mut file = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(format!("{line}\n").as_bytes())
            .expect("write the attempt log");
        file.flush().expect("flush the attempt log");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("durable_worker: {e}");
            return ExitCode::from(2);
        }
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)
        .expect("open the attempt log");
    let log = Log(Arc::new(Mutex::new(file)));
    if args.mode == Mode::Migrate {
        return migrate(&args).await;
    }

    let queue = match Queue::connect(&args.url).await {
        Ok(q) => q,
        Err(e) => {
            eprintln!("durable_worker {}: connect: {e}", args.name);
            return ExitCode::from(1);
        }
    };

    // Stop (gracefully) when the test closes our standard input.
    let (closed, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(std::io::stdin().read(&mut buf), Ok(n) if n > 0) {}
        let _ = closed.send(());
    });
    let shutdown = async {
        let _ = stdin_closed.await;
    };

    if args.mode == Mode::RawStallOk {
        return raw_stall_ok(&queue, &args, &log, shutdown).await;
    }
    if args.mode == Mode::EnqueueMany {
        return enqueue_many(&queue, &args, shutdown).await;
    }

    let name = args.name.clone();
    let (mode, stall, fail_percent) = (args.mode, args.stall, args.fail_percent);
    let retry_delay = args.retry_delay;
    let long = args.lease * 3 / 2;
    let worker = Worker::new(queue)
        .concurrency(args.concurrency)
        .poll_interval(args.poll)
        .lease(args.lease)
        .recover_interval(args.recover)
        .shutdown_timeout(Duration::from_secs(5))
        .retry_delay(move |n, _err, _task| retry_delay * (n + 1));
    let worker = match args.prefetch {
        Some(n) => worker.prefetch(n),
        None => worker,
    };
    let worker = match args.global {
        Some(n) => worker.limit(
            declare_system("gw"),
            SystemLimit::new().global_concurrency(n),
        ),
        None => worker,
    };
    let worker = match args.breaker {
        Some(n) => {
            let breaker = Breaker::new()
                .consecutive_failures(n)
                .open_for(Duration::from_secs(60))
                .probes(1);
            system("gw").set_breaker(breaker);
            worker.limit(declare_system("gw"), SystemLimit::new())
        }
        None => worker,
    };
    let worker = worker.handle("job", move |task| {
        let log = log.clone();
        let name = name.clone();
        async move {
            let id = task.id().to_string();
            let retried = task.retried();
            log.line(&format!("start {id} {retried} {name} {}", now_micros()));
            say(&format!("start {id} {retried}"));
            let end = |outcome: &str| {
                log.line(&format!(
                    "end {id} {retried} {name} {} {outcome}",
                    now_micros()
                ));
                say(&format!("end {id} {retried} {outcome}"));
            };
            match mode {
                Mode::Ok => {
                    end("ok");
                    Ok(())
                }
                Mode::Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    end("ok");
                    Ok(())
                }
                Mode::HangNamed if !id.starts_with("hang") => {
                    end("ok");
                    Ok(())
                }
                Mode::HangNamed => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    end("ok");
                    Ok(())
                }
                Mode::StallOk | Mode::StallErr | Mode::SleepOk if retried > 0 => {
                    end("ok");
                    Ok(())
                }
                Mode::StallOk => {
                    std::thread::sleep(stall);
                    end("ok");
                    Ok(())
                }
                Mode::SleepOk => {
                    tokio::time::sleep(stall).await;
                    end("ok");
                    Ok(())
                }
                Mode::StallErr => {
                    std::thread::sleep(stall);
                    end("err");
                    Err(BoxError::from("failed late, after a stall"))
                }
                Mode::RawStallOk | Mode::Migrate | Mode::EnqueueMany => {
                    unreachable!("this mode runs no Worker")
                }
                Mode::Reset => {
                    end("err");
                    Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into())
                }
                Mode::Random => {
                    let h = fnv(&id, retried);
                    let pause = if (h >> 24) % 25 == 0 {
                        long
                    } else {
                        Duration::from_millis(h % 21)
                    };
                    tokio::time::sleep(pause).await;
                    let fails = retried < 4 && (h >> 8) % 100 < fail_percent;
                    if fails && (h >> 16) % 6 == 0 {
                        end("panic");
                        panic!("injected panic in {id} (retried {retried})");
                    } else if fails {
                        end("err");
                        Err(BoxError::from(format!(
                            "injected failure (retried {retried})"
                        )))
                    } else {
                        end("ok");
                        Ok(())
                    }
                }
            }
        }
    });
    match worker.run_until(shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("durable_worker {}: {e}", args.name);
            ExitCode::from(1)
        }
    }
}

/// Claims one task by hand, stalls, then tries to complete it: the fencing of [`protocol::complete`]
/// observed directly.
async fn raw_stall_ok(
    queue: &Queue,
    args: &Args,
    log: &Log,
    shutdown: impl Future<Output = ()>,
) -> ExitCode {
    let task = loop {
        match protocol::claim(queue, 1, args.lease).await {
            Ok(mut tasks) if !tasks.is_empty() => break tasks.remove(0),
            Ok(_) => tokio::time::sleep(args.poll).await,
            Err(e) => {
                eprintln!("durable_worker {}: claim: {e}", args.name);
                return ExitCode::from(1);
            }
        }
    };
    let (id, retried, name) = (task.id(), task.retried(), &args.name);
    log.line(&format!("start {id} {retried} {name} {}", now_micros()));
    std::thread::sleep(args.stall);
    let outcome = match protocol::complete(queue, &task).await {
        Ok(true) => "ok-applied",
        Ok(false) => "ok-fenced",
        Err(e) => {
            eprintln!("durable_worker {name}: complete: {e}");
            return ExitCode::from(1);
        }
    };
    log.line(&format!(
        "end {id} {retried} {name} {} {outcome}",
        now_micros()
    ));
    shutdown.await;
    ExitCode::SUCCESS
}

/// One line on standard output, flushed at once: a test outside waits for it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A test that stopped reading (or closed the pipe) does not stop the worker.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Applies every pending version of the schema, reporting before and after.
async fn migrate(args: &Args) -> ExitCode {
    let schema = match Schema::connect(&args.url).await {
        Ok(schema) => schema,
        Err(e) => {
            eprintln!("durable_worker {}: connect: {e}", args.name);
            return ExitCode::from(1);
        }
    };
    say("migrating");
    match schema.up().await {
        Ok(versions) => {
            say(&format!("migrated {versions:?}"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("durable_worker {}: migrate: {e}", args.name);
            ExitCode::from(1)
        }
    }
}

/// Enqueues `--count` tasks in one batch, reporting before and after, then waits for its
/// standard input to close.
async fn enqueue_many(queue: &Queue, args: &Args, shutdown: impl Future<Output = ()>) -> ExitCode {
    let tasks: Vec<Task> = (0..args.count)
        .map(|i| Task::new("job", &i).task_id(format!("batch-{i}")))
        .collect();
    say(&format!("enqueueing {}", args.count));
    match queue.enqueue_many(tasks).await {
        Ok(n) => say(&format!("enqueued {n}")),
        Err(e) => {
            eprintln!("durable_worker {}: enqueue_many: {e}", args.name);
            return ExitCode::from(1);
        }
    }
    shutdown.await;
    ExitCode::SUCCESS
}
