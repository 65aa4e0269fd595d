//! One leader per queue for maintenance (issue 33, item 3): the workers of a queue elect one
//! leader on their heartbeats (`retry_leaders`), and only it runs the queue's recoverer and
//! janitor. Run on SQLite and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`, or the throwaway
//! server of `scripts/postgres.sh`), with a `ManualClock` for every stored time (beats, leases,
//! retention): a leadership lapses only when the test moves the clock. Waits are bounded
//! loops; no wall-clock duration is asserted.
//!
//! On PostgreSQL the tests share one database, and a leader deletes every presence row stale by
//! its own clock, so they run one at a time ([`serial`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Scheduler, Task, TaskState, Worker, WorkerInfo, protocol};
use retry_tests::durable_env::{Backend, Env, secs, start, t0};

retry_tests::both_backends!(
    one_of_three_workers_leads_and_only_it_recovers,
    a_leader_that_stops_gracefully_hands_over_at_once,
    a_crashed_leaders_lease_lapses_then_the_next_leader_recovers_its_tasks_and_trims,
    a_leader_deletes_the_stale_entries_of_a_scheduler_that_stopped_beating,
);

/// Held by each test while it runs.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// A beat of tokio's time: the workers' heartbeat and recover interval.
const BEAT: Duration = Duration::from_millis(20);

/// The live workers serving the test's queue.
async fn workers_of(env: &Env) -> Vec<WorkerInfo> {
    let all = env.q.inspector().workers().await.expect("workers");
    all.into_iter().filter(|w| w.serves(&env.name)).collect()
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

/// Waits (bounded: 20 s at most) until `done` holds for the task `id`.
async fn wait_task(env: &Env, id: &str, what: &str, done: impl Fn(TaskState, u32) -> bool) {
    for _ in 0..2_000 {
        if let Some(info) = env.q.inspector().get(id).await.expect("get")
            && done(info.state, info.retried)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}: {:?}", env.q.inspector().get(id).await);
}

/// The workers among `workers` that lead the test's queue.
fn leaders<'w>(env: &Env, workers: &'w [WorkerInfo]) -> Vec<&'w WorkerInfo> {
    workers.iter().filter(|w| w.leads(&env.name)).collect()
}

/// A worker beating and recovering every [`BEAT`], tagged by its `concurrency` (which the
/// workers list shows), counting the failed attempts it reports in `failed`. Its `hang`
/// handler hangs on its first run in the whole test (`hung`), and succeeds afterwards.
fn worker(
    q: &Queue,
    concurrency: usize,
    failed: Arc<AtomicUsize>,
    hung: Arc<AtomicBool>,
) -> Worker {
    Worker::new(q.clone())
        .concurrency(concurrency)
        .poll_interval(Duration::from_millis(10))
        .heartbeat_interval(BEAT)
        .recover_interval(BEAT)
        .retry_delay(|_, _, _| Duration::ZERO)
        .on_error(move |_, _| {
            failed.fetch_add(1, Ordering::SeqCst);
        })
        .handle("hang", move |_task| {
            let first = !hung.swap(true, Ordering::SeqCst);
            async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok::<(), BoxError>(())
            }
        })
}

/// Three workers on one queue: exactly one leads it, and only that one recovers an expired
/// lease (each worker counts the failed attempts it reports, recoveries included).
async fn one_of_three_workers_leads_and_only_it_recovers(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "leader-one").await else {
        return;
    };
    let hung = Arc::new(AtomicBool::new(true));
    let failed: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    let mut running = Vec::new();
    for (n, failed) in failed.iter().enumerate() {
        let q = env.other_process().await;
        running.push(start(worker(&q, n + 1, failed.clone(), hung.clone())));
    }
    let workers = wait_workers(&env, "three workers, one leader", |w| {
        w.len() == 3 && leaders(&env, w).len() == 1
    })
    .await;
    let leader = leaders(&env, &workers)[0].clone();
    assert_eq!(leader.leader_of, vec![env.name.clone()]);
    // A task (of a kind no worker here handles) claimed by a worker that died: its lease runs
    // out 10 ms later (the leadership lasts three beats of 20 ms from the last beat, at T0: it
    // does not lapse).
    let id = env.q.enqueue(Task::new("orphan", &1)).await.unwrap().id;
    protocol::claim(&env.q, 1, Duration::from_millis(10))
        .await
        .unwrap();
    env.clock.advance(Duration::from_millis(10));
    wait_task(&env, &id, "the expired lease recovered", |s, r| {
        s == TaskState::Retry && r == 1
    })
    .await;
    let counts: Vec<usize> = failed.iter().map(|f| f.load(Ordering::SeqCst)).collect();
    let mut expected = vec![0; 3];
    expected[leader.concurrency - 1] = 1;
    assert_eq!(counts, expected, "only the leader recovered");
    let after = workers_of(&env).await;
    assert_eq!(
        leaders(&env, &after)
            .iter()
            .map(|w| &w.id)
            .collect::<Vec<_>>(),
        vec![&leader.id],
        "the leadership did not move"
    );
    for (stop, handle) in running {
        stop.send(()).unwrap();
        handle.await.unwrap();
    }
    assert_eq!(workers_of(&env).await, vec![]);
}

/// A leader stopped gracefully gives its queue up: the next beat of another worker takes over,
/// with the clock never moved (the lapsed-lease path cannot be what elected it).
async fn a_leader_that_stops_gracefully_hands_over_at_once(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "leader-graceful").await else {
        return;
    };
    let hung = Arc::new(AtomicBool::new(true));
    let (stop_a, running_a) = start(worker(&env.q, 1, Arc::default(), hung.clone()));
    let first = wait_workers(&env, "A leads", |w| w.len() == 1 && w[0].leads(&env.name)).await;
    let a = first[0].id.clone();
    let q = env.other_process().await;
    let (stop_b, running_b) = start(worker(&q, 2, Arc::default(), hung));
    let both = wait_workers(&env, "B beats beside A", |w| w.len() == 2).await;
    assert_eq!(
        leaders(&env, &both)
            .iter()
            .map(|w| &w.id)
            .collect::<Vec<_>>(),
        vec![&a],
        "A still leads"
    );
    stop_a.send(()).unwrap();
    running_a.await.unwrap();
    let after = wait_workers(&env, "B leads", |w| w.len() == 1 && w[0].leads(&env.name)).await;
    assert_ne!(after[0].id, a);
    assert_eq!(
        after[0].last_heartbeat_at,
        t0(),
        "the clock never moved: no lease lapsed"
    );
    stop_b.send(()).unwrap();
    running_b.await.unwrap();
    assert_eq!(workers_of(&env).await, vec![]);
}

/// A leader killed while it holds a task (its `run_until` dropped: no graceful stop) keeps its
/// leadership until its row lapses, three of its beats after its last; meanwhile the other
/// worker neither recovers an expired lease nor trims a completed task past its retention. Once
/// the row lapses the other takes over and does both at once, and recovers the dead leader's
/// own task when that task's lease runs out.
async fn a_crashed_leaders_lease_lapses_then_the_next_leader_recovers_its_tasks_and_trims(
    backend: Backend,
) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "leader-crash").await else {
        return;
    };
    let retention = Duration::from_millis(50);
    let q = env.q.clone().completed_retention(retention);
    // A completed task, past its retention from T0 + 50 ms.
    let done = q.enqueue(Task::new("other", &0)).await.unwrap().id;
    let claimed = protocol::claim(&q, 1, secs(60)).await.unwrap();
    assert!(protocol::complete(&q, &claimed[0]).await.unwrap());
    // A task of a kind no worker here handles, claimed by a worker that died: its lease runs
    // out at T0 + 10 ms.
    let orphan = q.enqueue(Task::new("orphan", &0)).await.unwrap().id;
    protocol::claim(&q, 1, Duration::from_millis(10))
        .await
        .unwrap();
    // A, with a lease of 120 ms, beats every 20 ms (a sixth): its leadership lasts 60 ms.
    let hung = Arc::new(AtomicBool::new(false));
    let a_failed = Arc::new(AtomicUsize::new(0));
    let a = worker(&q, 1, a_failed.clone(), hung.clone()).lease(Duration::from_millis(120));
    let (_stop_a, running_a) = start(a);
    wait_workers(&env, "A leads", |w| w.len() == 1 && w[0].leads(&env.name)).await;
    let id = q.enqueue(Task::new("hang", &1)).await.unwrap().id;
    wait_workers(&env, "A holds the task", |w| {
        w.len() == 1 && !w[0].active.is_empty()
    })
    .await;
    running_a.abort();
    assert!(running_a.await.unwrap_err().is_cancelled());
    let b_failed = Arc::new(AtomicUsize::new(0));
    let b_queue = env.other_process().await.completed_retention(retention);
    let (stop_b, running_b) = start(worker(&b_queue, 2, b_failed.clone(), hung));
    let both = wait_workers(&env, "B beats beside A's row", |w| w.len() == 2).await;
    assert_eq!(
        leaders(&env, &both)[0].concurrency,
        1,
        "A's row still leads"
    );
    // At T0 + 59 ms the orphan's lease has expired and the completed task is past its
    // retention, but A's leadership has not lapsed: through ten of B's beats and recover
    // intervals, B leads nothing, so it recovers and trims nothing.
    env.clock.advance(Duration::from_millis(59));
    tokio::time::sleep(BEAT * 10).await;
    let still = workers_of(&env).await;
    assert_eq!(
        leaders(&env, &still)[0].concurrency,
        1,
        "not lapsed at 59 ms"
    );
    assert_eq!(env.info(&orphan).await.state, TaskState::Active);
    assert!(env.q.inspector().get(&done).await.unwrap().is_some());
    assert_eq!(b_failed.load(Ordering::SeqCst), 0);
    // A's leadership lapses at T0 + 60 ms: B takes over at its next beat, recovers the orphan
    // and trims the completed task at once. A's own task's lease (renewed at T0 for 120 ms)
    // still runs: B leaves it.
    env.clock.advance(Duration::from_millis(1));
    wait_workers(&env, "B leads", |w| {
        let led = leaders(&env, w);
        led.len() == 1 && led[0].concurrency == 2
    })
    .await;
    wait_task(&env, &orphan, "the orphan recovered by B", |s, r| {
        s == TaskState::Retry && r == 1
    })
    .await;
    for _ in 0..2_000 {
        if env.q.inspector().get(&done).await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        env.q.inspector().get(&done).await.unwrap().is_none(),
        "trimmed"
    );
    assert_eq!(env.info(&id).await.state, TaskState::Active);
    assert_eq!(b_failed.load(Ordering::SeqCst), 1);
    // At T0 + 120 ms A's task's lease runs out: B, the leader, recovers it (a failed attempt)
    // and runs it again.
    env.clock.advance(Duration::from_millis(60));
    wait_task(
        &env,
        &id,
        "A's task recovered by B and run again",
        |s, r| s == TaskState::Completed && r == 1,
    )
    .await;
    assert_eq!(b_failed.load(Ordering::SeqCst), 2);
    assert_eq!(a_failed.load(Ordering::SeqCst), 0);
    stop_b.send(()).unwrap();
    running_b.await.unwrap();
}

/// The scheduler's housekeeping is the leader's: a scheduler's entries three beats stale are
/// deleted by the beat of a queue's leader (schedulers no longer delete each other's).
async fn a_leader_deletes_the_stale_entries_of_a_scheduler_that_stopped_beating(backend: Backend) {
    let _serial = serial().await;
    let Some(env) = Env::new(backend, "leader-sweep").await else {
        return;
    };
    let entries_of = || async {
        let all = env.q.inspector().schedulers().await.expect("schedulers");
        all.into_iter().filter(|e| e.queue == env.name).count()
    };
    // A scheduler beating every minute writes its entry at T0, then stops beating.
    let scheduler = Scheduler::new(env.q.clone())
        .heartbeat_interval(secs(60))
        .every(secs(3600), || Task::new("report", &0));
    scheduler.enqueue_due().await.unwrap();
    assert_eq!(entries_of().await, 1);
    // Three minutes on, the entry is stale; a worker starts and leads the queue.
    env.clock.advance(secs(180));
    let (stop, running) = start(worker(&env.q, 1, Arc::default(), Arc::default()));
    wait_workers(&env, "the worker leads", |w| {
        w.len() == 1 && w[0].leads(&env.name)
    })
    .await;
    // Back at T0 the entry would read as live again had it been kept: the leader's beat (at
    // T0 + 180 s, its sweep runs after its election) deleted it.
    env.clock.set(t0());
    for _ in 0..2_000 {
        if entries_of().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(entries_of().await, 0, "deleted by the leader");
    stop.send(()).unwrap();
    running.await.unwrap();
}
