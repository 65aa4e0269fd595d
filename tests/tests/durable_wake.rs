//! Wake-ups instead of polls (issue 22, item 2), on SQLite and PostgreSQL.
//!
//! Every worker here polls once an hour: a task it runs within the bounded wait (20 s) was
//! picked up by a wake-up (an enqueue through the same `Queue`, PostgreSQL's `NOTIFY`, a retry
//! written, an unpause) or by the timer to the next due time, never by a poll. Nothing asserts a
//! wall-clock duration.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use retry_runtime::durable::{BoxError, Queue, Task, TaskState, Worker};
use retry_tests::durable_env::{Backend, Env};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Longer than any test may take: a task picked up by a poll would time the test out.
const POLL: Duration = Duration::from_secs(3600);

retry_tests::both_backends!(
    an_enqueue_through_the_same_queue_wakes_an_idle_worker,
    a_scheduled_task_starts_at_its_due_time_not_at_the_next_poll,
    a_retry_starts_at_its_due_time_not_at_the_next_poll,
    unpausing_wakes_the_worker,
);

/// A worker of `q` that polls once an hour and records, per run, the time by `q`'s clock.
fn sleepy_worker(q: &Queue, runs: &Arc<Mutex<Vec<SystemTime>>>) -> Worker {
    let (runs, clock) = (runs.clone(), q.clone());
    Worker::new(q.clone())
        .poll_interval(POLL)
        .handle("job", move |_task| {
            runs.lock().unwrap().push(clock.now());
            async { Ok::<(), BoxError>(()) }
        })
}

/// Runs `worker` until the returned sender fires.
fn start(worker: Worker) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        worker
            .run_until(async move {
                stopped.await.ok();
            })
            .await
            .unwrap();
    });
    (stop, run)
}

/// Lets a started worker make its first claim (an empty queue: it then waits for a wake-up).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

async fn an_enqueue_through_the_same_queue_wakes_an_idle_worker(backend: Backend) {
    let Some(env) = Env::new(backend, "wake-enqueue").await else {
        return;
    };
    let runs = Arc::new(Mutex::new(Vec::new()));
    let (stop, run) = start(sleepy_worker(&env.q, &runs));
    settle().await;
    let id = env.q.enqueue(Task::new("job", &1)).await.unwrap().id;
    env.wait_for(&id, TaskState::Completed).await;
    assert_eq!(runs.lock().unwrap().len(), 1);
    stop.send(()).unwrap();
    run.await.unwrap();
}

async fn a_scheduled_task_starts_at_its_due_time_not_at_the_next_poll(backend: Backend) {
    let Some(env) = Env::new(backend, "wake-scheduled").await else {
        return;
    };
    // The timer reads real time: this queue is on the system clock.
    let q = env.on_system_clock().await;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let (stop, run) = start(sleepy_worker(&q, &runs));
    settle().await;
    let info = q
        .enqueue(Task::new("job", &1).process_in(Duration::from_millis(400)))
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Scheduled);
    let due = info
        .next_process_at
        .expect("a scheduled task has a due time");
    env.wait_for(&info.id, TaskState::Completed).await;
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert!(
        runs[0] >= due,
        "ran at {:?}, before its due time {due:?}",
        runs[0]
    );
    stop.send(()).unwrap();
    run.await.unwrap();
}

async fn a_retry_starts_at_its_due_time_not_at_the_next_poll(backend: Backend) {
    let Some(env) = Env::new(backend, "wake-retry").await else {
        return;
    };
    let q = env.on_system_clock().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let w = {
        let attempts = attempts.clone();
        Worker::new(q.clone())
            .poll_interval(POLL)
            .retry_delay(|_, _, _| Duration::from_millis(300))
            .handle("job", move |_task| {
                let first = attempts.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    if first {
                        Err(BoxError::from("the first attempt fails"))
                    } else {
                        Ok(())
                    }
                }
            })
    };
    let (stop, run) = start(w);
    settle().await;
    let id = q.enqueue(Task::new("job", &1)).await.unwrap().id;
    let done = env.wait_for(&id, TaskState::Completed).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(done.retried, 1);
    stop.send(()).unwrap();
    run.await.unwrap();
}

async fn unpausing_wakes_the_worker(backend: Backend) {
    let Some(env) = Env::new(backend, "wake-unpause").await else {
        return;
    };
    env.q.inspector().pause().await.unwrap();
    let id = env.q.enqueue(Task::new("job", &1)).await.unwrap().id;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let (stop, run) = start(sleepy_worker(&env.q, &runs));
    settle().await;
    assert_eq!(env.info(&id).await.state, TaskState::Pending);
    // Through another handle on PostgreSQL (the trigger's NOTIFY), the same one on SQLite.
    let operator = match backend {
        Backend::Sqlite => env.q.clone(),
        Backend::Postgres => env.other_process().await,
    };
    operator.inspector().unpause().await.unwrap();
    env.wait_for(&id, TaskState::Completed).await;
    stop.send(()).unwrap();
    run.await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: notifications across processes, and the listener's reconnect

mod postgres_only {
    use super::*;

    /// An enqueue through connections of another process wakes the worker through `NOTIFY`.
    #[tokio::test]
    async fn an_enqueue_from_another_process_wakes_the_worker_through_notify() {
        let Some(env) = Env::new(Backend::Postgres, "wake-notify").await else {
            return;
        };
        let runs = Arc::new(Mutex::new(Vec::new()));
        let (stop, run) = start(sleepy_worker(&env.q, &runs));
        settle().await;
        let other = env.other_process().await;
        let id = other.enqueue(Task::new("job", &1)).await.unwrap().id;
        env.wait_for(&id, TaskState::Completed).await;
        assert_eq!(runs.lock().unwrap().len(), 1);
        stop.send(()).unwrap();
        run.await.unwrap();
    }

    /// The listening connection killed by the server: the listener reconnects (after a pause)
    /// and the next enqueue of another process still wakes the worker.
    #[tokio::test]
    async fn the_listener_reconnects_after_its_connection_is_killed() {
        use sqlx::Connection as _;
        let Some(env) = Env::new(Backend::Postgres, "wake-reconnect").await else {
            return;
        };
        let runs = Arc::new(Mutex::new(Vec::new()));
        let (stop, run) = start(sleepy_worker(&env.q, &runs));
        settle().await;
        let mut admin = sqlx::PgConnection::connect(&env.url).await.unwrap();
        // Every listening connection of this database (other tests' listeners reconnect too).
        let killed: Vec<(bool,)> = sqlx::query_as(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query ILIKE 'LISTEN%' \
             AND pid <> pg_backend_pid()",
        )
        .fetch_all(&mut admin)
        .await
        .unwrap();
        assert!(
            !killed.is_empty(),
            "the worker holds a listening connection"
        );
        settle().await;
        let other = env.other_process().await;
        let id = other.enqueue(Task::new("job", &2)).await.unwrap().id;
        env.wait_for(&id, TaskState::Completed).await;
        assert_eq!(runs.lock().unwrap().len(), 1);
        stop.send(()).unwrap();
        run.await.unwrap();
    }
}
