//! Who runs on the database (issue 23, items 2–3): every running worker keeps a heartbeat row
//! with the tasks it holds, removed when it stops gracefully and stale after three missed beats;
//! every scheduler keeps a row per entry with its next run and its last enqueue. Run on SQLite
//! and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`, so every stored time is
//! exact; waits are bounded loops, and no wall-clock duration is asserted.
//!
//! On PostgreSQL the tests share one database, so each reads only the rows of its own queue, and
//! they run one at a time ([`serial`]): a beat deletes every row stale by its own clock, and the
//! staleness tests move their clock past the rows of the others.

use std::sync::Arc;
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::{
    Queue, Scheduler, SchedulerEntry, Task, TaskState, Worker, WorkerInfo,
};
use retry_tests::durable_env::{Backend, Env, T0_SECS, secs, start, t0};
use tokio::sync::{Notify, oneshot};

retry_tests::both_backends!(
    a_running_worker_beats_with_the_tasks_it_holds,
    a_worker_three_beats_late_is_ignored_then_deleted,
    a_dropped_worker_leaves_its_row_to_go_stale,
    scheduler_entries_show_next_run_and_last_enqueue,
    scheduler_entries_go_stale_after_three_missed_beats,
    a_scheduler_removes_its_entries_when_it_stops,
);

/// Held by each test while it runs.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// The start of the minute of T0 (22:13:00), in seconds.
const T0_MINUTE_SECS: u64 = 1_699_999_980;

/// The live workers serving the test's queue.
async fn workers_of(env: &Env) -> Vec<WorkerInfo> {
    let all = env.q.inspector().workers().await.expect("workers");
    all.into_iter().filter(|w| w.serves(&env.name)).collect()
}

/// The live scheduler entries of the test's queue.
async fn entries_of(env: &Env) -> Vec<SchedulerEntry> {
    let all = env.q.inspector().schedulers().await.expect("schedulers");
    all.into_iter().filter(|e| e.queue == env.name).collect()
}

/// Waits (bounded: 20 s at most) until `done` holds for the workers of the test's queue.
async fn wait_workers(
    env: &Env,
    what: &str,
    done: impl Fn(&[WorkerInfo]) -> bool,
) -> Vec<WorkerInfo> {
    for _ in 0..2_000 {
        let workers = workers_of(env).await;
        if done(&workers) {
            return workers;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}: {:?}", workers_of(env).await);
}

/// A worker whose `slow` handler waits until `release` is notified. Its lease is an hour, so
/// that it beats every `beat` (a worker beats at least every sixth of its lease).
fn slow_worker(q: &Queue, release: Arc<Notify>, beat: Duration) -> Worker {
    Worker::new(q.clone())
        .concurrency(3)
        .poll_interval(Duration::from_millis(10))
        .heartbeat_interval(beat)
        .lease(secs(3600))
        .handle("slow", move |_task| {
            let release = release.clone();
            async move {
                release.notified().await;
                Ok::<(), BoxError>(())
            }
        })
}

async fn a_running_worker_beats_with_the_tasks_it_holds(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "presence-holds").await else {
        return;
    };
    let release = Arc::new(Notify::new());
    let worker = slow_worker(&env.q, release.clone(), Duration::from_millis(20));
    let (stop, running) = start(worker);
    env.q
        .enqueue(Task::new("slow", &1).task_id("t1"))
        .await
        .unwrap();
    let workers = wait_workers(&env, "the worker holds t1", |w| {
        w.len() == 1 && !w[0].active.is_empty()
    })
    .await;
    let w = &workers[0];
    assert_eq!(w.queues, vec![env.name.clone()]);
    assert_eq!(w.concurrency, 3);
    assert_eq!(w.pid, std::process::id());
    assert!(!w.host.is_empty());
    assert!(
        w.id.starts_with(&format!("{}-{}-", w.host, w.pid)),
        "{}",
        w.id
    );
    // The queue's manual clock stands at T0: every time written is T0 exactly.
    assert_eq!(w.started_at, t0());
    assert_eq!(w.last_heartbeat_at, t0());
    assert_eq!(
        w.active,
        vec![
            retry_tests::with_fields!(w.active.first().cloned().expect("a held task"), {
                queue: env.name.clone(),
                id: "t1".into(),
                kind: "slow".into(),
                started_at: t0(),
            })
        ]
    );
    // Later beats follow the clock; the task is held until its attempt ends.
    env.clock.advance(secs(2));
    wait_workers(&env, "a beat at T0 + 2 s", |w| {
        w.len() == 1 && w[0].last_heartbeat_at == t0() + secs(2)
    })
    .await;
    release.notify_one();
    env.wait_for("t1", TaskState::Completed).await;
    let workers = wait_workers(&env, "t1 no longer held", |w| {
        w.len() == 1 && w[0].active.is_empty()
    })
    .await;
    assert_eq!(workers[0].started_at, t0(), "started stays");
    // A graceful stop deletes the row at once.
    stop.send(()).unwrap();
    running.await.unwrap();
    assert_eq!(workers_of(&env).await, vec![]);
}

async fn a_worker_three_beats_late_is_ignored_then_deleted(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "presence-stale").await else {
        return;
    };
    // Beats every minute of tokio's time: only the first beat, at start, happens in this test.
    let release = Arc::new(Notify::new());
    let (stop_a, running_a) = start(slow_worker(&env.q, release.clone(), secs(60)));
    let first = wait_workers(&env, "worker A beat", |w| w.len() == 1).await;
    let a = first[0].id.clone();
    assert_eq!(first[0].last_heartbeat_at, t0());
    // Three missed beats: stale at T0 + 180 s, not a millisecond before.
    env.clock.advance(Duration::from_millis(179_999));
    assert_eq!(
        workers_of(&env).await.len(),
        1,
        "two beats and a bit missed"
    );
    env.clock.advance(Duration::from_millis(1));
    assert_eq!(workers_of(&env).await, vec![], "three beats missed");
    // The next beat of any worker deletes the stale row: A's leadership lapsed with it, so B
    // leads the queue, and a leader deletes the stale rows.
    let (stop_b, running_b) = start(slow_worker(&env.q, release, secs(60)));
    let second = wait_workers(&env, "worker B beat", |w| w.len() == 1).await;
    let b = second[0].id.clone();
    assert_ne!(a, b);
    assert_eq!(second[0].last_heartbeat_at, t0() + secs(180));
    // Back at T0, A's row would read as live again had it been kept: it is gone (deleted by
    // B's sweep at T0 + 180 s, which follows the beat that made B the leader).
    env.clock.set(t0());
    let ids = wait_workers(&env, "A's row deleted", |w| w.len() == 1).await;
    assert_eq!(ids.into_iter().map(|w| w.id).collect::<Vec<_>>(), vec![b]);
    stop_a.send(()).unwrap();
    stop_b.send(()).unwrap();
    running_a.await.unwrap();
    running_b.await.unwrap();
    assert_eq!(workers_of(&env).await, vec![]);
}

async fn a_dropped_worker_leaves_its_row_to_go_stale(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "presence-dropped").await else {
        return;
    };
    let worker = slow_worker(&env.q, Arc::new(Notify::new()), secs(60));
    let (_stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        stopped.await.ok();
    }));
    wait_workers(&env, "the worker beat", |w| w.len() == 1).await;
    // Dropping `run_until` (a crash, as far as the database can tell) is no graceful stop.
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert_eq!(workers_of(&env).await.len(), 1, "still there");
    env.clock.advance(secs(180));
    assert_eq!(workers_of(&env).await, vec![], "stale");
}

/// The test's scheduler: a report every minute and a sync every 5 minutes.
fn scheduler(q: Queue) -> Scheduler {
    Scheduler::new(q)
        .heartbeat_interval(secs(60))
        .every(secs(60), || Task::new("report", &"minutely"))
        .cron("*/5 * * * *", || Task::new("sync", &()))
}

async fn scheduler_entries_show_next_run_and_last_enqueue(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "presence-sched").await else {
        return;
    };
    let a = scheduler(env.q.clone());
    assert_eq!(a.enqueue_due().await.unwrap(), 2);
    let entries = entries_of(&env).await;
    let report = format!("periodic:report:every:60000ms:{}000", T0_MINUTE_SECS);
    let sync = "periodic:sync:cron:*/5 * * * *:1699999800000";
    let scheduler_a = entries[0].scheduler.clone();
    // By spec: `cron:…` before `every:…`.
    assert_eq!(
        entries,
        vec![
            retry_tests::with_fields!(entries[0].clone(), {
                scheduler: scheduler_a.clone(),
                queue: env.name.clone(),
                kind: Some("sync".into()),
                spec: "cron:*/5 * * * *".into(),
                // 22:15:00 UTC.
                next_run_at: Some(t0() + secs(100)),
                last_enqueued_at: Some(t0()),
                last_task_id: Some(sync.into()),
                last_heartbeat_at: t0(),
            }),
            retry_tests::with_fields!(entries[0].clone(), {
                scheduler: scheduler_a.clone(),
                queue: env.name.clone(),
                kind: Some("report".into()),
                spec: "every:60000ms".into(),
                // 22:14:00 UTC.
                next_run_at: Some(t0() + secs(40)),
                last_enqueued_at: Some(t0()),
                last_task_id: Some(report.clone()),
                last_heartbeat_at: t0(),
            }),
        ]
    );
    // A second instance finds this period's tasks enqueued: its rows say it enqueued nothing.
    let b = scheduler(env.other_process().await);
    assert_eq!(b.enqueue_due().await.unwrap(), 0);
    let entries = entries_of(&env).await;
    assert_eq!(entries.len(), 4);
    let of_b: Vec<&SchedulerEntry> = entries
        .iter()
        .filter(|e| e.scheduler != scheduler_a)
        .collect();
    assert_eq!(of_b.len(), 2);
    for entry in of_b {
        assert_eq!(entry.last_enqueued_at, None);
        assert_eq!(entry.last_task_id, None);
        assert!(
            entry.kind.is_some(),
            "the kind is known once a task was made"
        );
    }
    // The next minute: A enqueues the report again, at T0 + 40 s.
    env.clock.advance(secs(40));
    assert_eq!(a.enqueue_due().await.unwrap(), 1);
    let entries = entries_of(&env).await;
    let every_a = entries
        .iter()
        .find(|e| e.scheduler == scheduler_a && e.spec == "every:60000ms")
        .unwrap();
    assert_eq!(every_a.last_enqueued_at, Some(t0() + secs(40)));
    assert_eq!(
        every_a.last_task_id.as_deref(),
        Some(format!("periodic:report:every:60000ms:{}000", T0_SECS + 40).as_str())
    );
    assert_eq!(every_a.next_run_at, Some(t0() + secs(100)));
    assert_eq!(every_a.last_heartbeat_at, t0() + secs(40));
    assert!(env.q.inspector().get(&report).await.unwrap().is_some());
}

async fn scheduler_entries_go_stale_after_three_missed_beats(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "presence-sched-stale").await else {
        return;
    };
    let a = scheduler(env.q.clone());
    a.enqueue_due().await.unwrap();
    assert_eq!(entries_of(&env).await.len(), 2);
    env.clock.advance(Duration::from_millis(179_999));
    assert_eq!(entries_of(&env).await.len(), 2);
    env.clock.advance(Duration::from_millis(1));
    assert_eq!(entries_of(&env).await, vec![]);
    // Its next beat brings it back, at the new time.
    a.enqueue_due().await.unwrap();
    let entries = entries_of(&env).await;
    assert_eq!(entries.len(), 2);
    assert!(
        entries
            .iter()
            .all(|e| e.last_heartbeat_at == t0() + secs(180))
    );
}

async fn a_scheduler_removes_its_entries_when_it_stops(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "presence-sched-stop").await else {
        return;
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(scheduler(env.q.clone()).run_until(async {
        stopped.await.ok();
    }));
    let mut seen = Vec::new();
    for _ in 0..2_000 {
        seen = entries_of(&env).await;
        if seen.len() == 2 && seen.iter().all(|e| e.last_task_id.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].next_run_at, Some(t0() + secs(40)));
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert_eq!(entries_of(&env).await, vec![]);
}
