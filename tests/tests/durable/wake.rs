//! Wake-ups instead of polls (issue 22, item 2), on SQLite and PostgreSQL.
//!
//! Every worker here polls once an hour: a task it runs within the bounded wait (20 s) was
//! picked up by a wake-up (an enqueue through the same `Queue`, PostgreSQL's `NOTIFY`, a retry
//! written, an unpause) or by the timer to the next due time, never by a poll. Nothing asserts a
//! wall-clock duration.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, TaskState, Worker};
use retry_tests::durable_env::{Backend, Env, start};

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
        Backend::Postgres | Backend::PgBouncer => env.other_process().await,
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

    /// The workers of one `Queue` (two queues of the database, clones of one handle) share one
    /// listening connection, open while either runs and closed when both have stopped.
    #[tokio::test]
    async fn workers_of_one_queue_share_one_listening_connection() {
        use sqlx::Connection as _;
        let Some(env) = Env::new(Backend::Postgres, "wake-shared").await else {
            return;
        };
        // A database of its own: other tests' listeners are not counted.
        let mut admin = sqlx::PgConnection::connect(&env.url).await.unwrap();
        let db = format!("retry_wake_shared_{}", std::process::id());
        for statement in [
            format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
            format!("CREATE DATABASE {db}"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        let (base, _) = env.url.rsplit_once('/').unwrap();
        let url = format!("{base}/{db}");
        let q = Queue::connect(&url).await.unwrap();
        let listening = || async {
            let mut probe = sqlx::PgConnection::connect(&url).await.unwrap();
            let (n,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
            )
            .fetch_one(&mut probe)
            .await
            .unwrap();
            probe.close().await.ok();
            n
        };
        let runs = Arc::new(Mutex::new(Vec::new()));
        let (stop_a, run_a) = start(sleepy_worker(&q.clone().named("a"), &runs));
        let (stop_b, run_b) = start(sleepy_worker(&q.clone().named("b"), &runs));
        settle().await;
        assert_eq!(listening().await, 1, "one listener for both workers");
        // Both are woken through it by an enqueue from another process.
        let other = Queue::connect(&url).await.unwrap();
        for name in ["a", "b"] {
            other
                .clone()
                .named(name)
                .enqueue(Task::new("job", &0))
                .await
                .unwrap();
        }
        for _ in 0..200 {
            if runs.lock().unwrap().len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(runs.lock().unwrap().len(), 2);
        // One worker stops: the other still listens.
        stop_a.send(()).unwrap();
        run_a.await.unwrap();
        settle().await;
        assert_eq!(
            listening().await,
            1,
            "the listener outlives the first worker"
        );
        stop_b.send(()).unwrap();
        run_b.await.unwrap();
        let mut closed = false;
        for _ in 0..100 {
            if listening().await == 0 {
                closed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(closed, "no listener once both workers stopped");
        q.close().await;
        other.close().await;
        let drop = format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)");
        sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&mut admin)
            .await
            .ok();
    }
}
