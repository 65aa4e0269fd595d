//! The figures the store keeps as tasks change (issue 22, item 1): the tasks per state, which
//! `stats`, `count` and `count_by_state` read without scanning the table, and the hourly
//! history of attempts, which `history` and the daily figures read. Each is checked against the
//! tasks themselves after every kind of change. Run on SQLite and on PostgreSQL
//! (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use retry_runtime::BoxError;
use retry_runtime::durable::{
    Error, HistoryBucket, HistorySpan, Queue, Snooze, Task, TaskState, Worker,
};
use retry_tests::durable_env::{Backend, Env, secs, worker};

retry_tests::both_backends!(
    counts_follow_every_change_of_state,
    history_counts_attempts_in_their_hour_and_day,
    history_is_kept_ninety_days,
    concurrent_workers_keep_the_counts_exact,
    a_table_made_before_the_counters_is_counted_on_connect,
);

/// The counts the store keeps must equal the tasks listed per state.
async fn assert_counts_match(env: &Env, step: &str) {
    let kept = env.q.inspector().count_by_state().await.unwrap();
    for (state, n) in kept {
        let listed = env.ids(state).await.len() as u64;
        assert_eq!(
            n, listed,
            "after {step}: {state:?} counted {n}, listed {listed}"
        );
        assert_eq!(env.q.inspector().count(state).await.unwrap(), listed);
    }
    let stats = env.q.inspector().stats().await.unwrap();
    let ours = stats.iter().find(|s| s.queue == env.name);
    for (state, n) in kept {
        assert_eq!(ours.map_or(0, |s| s.count(state)), n, "after {step}: stats");
    }
}

fn mixed_worker(env: &Env) -> Worker {
    worker(env)
        .handle("ok", |_task| async { Ok::<(), BoxError>(()) })
        .handle("fail", |_task| async {
            Err::<(), BoxError>(BoxError::from("gateway down"))
        })
        .handle("snooze", |_task| async {
            Err::<(), BoxError>(Box::new(Snooze::new(secs(60))))
        })
}

async fn counts_follow_every_change_of_state(backend: Backend) {
    let Some(env) = Env::new(backend, "counts-every-change").await else {
        return;
    };
    let w = mixed_worker(&env);
    assert_counts_match(&env, "nothing").await;
    env.q
        .enqueue_many((0..6).map(|n| Task::new("ok", &n).task_id(format!("ok{n}"))))
        .await
        .unwrap();
    env.q
        .enqueue_many((0..4).map(|n| Task::new("fail", &n).task_id(format!("f{n}"))))
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("fail", &0).task_id("doomed").max_retry(0))
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("snooze", &0).task_id("sleepy"))
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("ok", &0).task_id("later").process_in(secs(3600)))
        .await
        .unwrap();
    assert_counts_match(&env, "enqueues").await;

    let mut ran = 0;
    while let n @ 1.. = w.run_due().await.unwrap() {
        ran += n;
    }
    assert_eq!(ran, 12);
    assert_counts_match(&env, "a run: completed, retry, archived, snoozed").await;

    let inspector = env.q.inspector();
    inspector.archive_task("f0").await.unwrap();
    assert_counts_match(&env, "archive by hand").await;
    inspector.run_task("doomed").await.unwrap();
    assert_counts_match(&env, "run by hand").await;
    inspector.delete_task("ok0").await.unwrap();
    assert_counts_match(&env, "delete").await;
    inspector.cancel_task("later").await.unwrap();
    assert_counts_match(&env, "cancel").await;
    assert_eq!(inspector.run_all(TaskState::Retry).await.unwrap(), 3);
    assert_counts_match(&env, "run all").await;
    assert_eq!(inspector.delete_all(TaskState::Archived).await.unwrap(), 2);
    assert_counts_match(&env, "delete all").await;

    // Past the completed retention: the janitor's trim is counted too.
    env.clock.set(env.at(secs(8 * 24 * 3600)));
    assert!(inspector.trim().await.unwrap() >= 5);
    assert_counts_match(&env, "trim").await;
    assert_eq!(inspector.count(TaskState::Completed).await.unwrap(), 0);
}

/// A bucket as `(start, processed, failed)`: `HistoryBucket` is `#[non_exhaustive]`.
fn bucket(at: SystemTime, processed: u64, failed: u64) -> (SystemTime, u64, u64) {
    (at, processed, failed)
}

fn buckets(history: Vec<HistoryBucket>) -> Vec<(SystemTime, u64, u64)> {
    history
        .iter()
        .map(|b| bucket(b.start, b.processed, b.failed))
        .collect()
}

async fn history_counts_attempts_in_their_hour_and_day(backend: Backend) {
    let Some(env) = Env::new(backend, "counts-history").await else {
        return;
    };
    let w = mixed_worker(&env);
    let hour = |h: u64| UNIX_EPOCH + secs(1_699_999_200 + h * 3600); // 22:00 of t0's day, +h
    // 22:13:20: one success, one failure (retry), one snooze (no attempt finished).
    env.q.enqueue(Task::new("ok", &0)).await.unwrap();
    env.q
        .enqueue(Task::new("fail", &0).task_id("f").max_retry(1))
        .await
        .unwrap();
    env.q.enqueue(Task::new("snooze", &0)).await.unwrap();
    assert_eq!(w.run_due().await.unwrap(), 3);
    // 23:30: the retry fails again and is archived; a waiting task canceled finishes nothing.
    env.clock.set(hour(1) + secs(1800));
    env.q
        .enqueue(Task::new("ok", &0).task_id("c").process_in(secs(60)))
        .await
        .unwrap();
    env.q.inspector().cancel_task("c").await.unwrap();
    env.q.inspector().run_task("f").await.unwrap();
    assert!(w.run_due().await.unwrap() >= 1);
    assert_eq!(env.info("f").await.state, TaskState::Archived);

    let inspector = env.q.inspector();
    assert_eq!(
        buckets(inspector.history(HistorySpan::Hours(3)).await.unwrap()),
        [
            bucket(hour(0) - secs(3600), 0, 0),
            bucket(hour(0), 2, 1),
            bucket(hour(1), 1, 1)
        ]
    );
    let today = UNIX_EPOCH + secs(1_699_920_000); // 00:00 UTC of t0's day
    assert_eq!(
        buckets(inspector.history(HistorySpan::Days(2)).await.unwrap()),
        [bucket(today - secs(86_400), 0, 0), bucket(today, 3, 2)]
    );
    let stats = inspector.stats().await.unwrap();
    let ours = stats.iter().find(|s| s.queue == env.name).unwrap();
    assert_eq!((ours.processed_today, ours.failed_today), (3, 2));
    assert_eq!(
        inspector
            .history(HistorySpan::Hours(168))
            .await
            .unwrap()
            .len(),
        168
    );
    assert_eq!(
        inspector
            .history(HistorySpan::Days(90))
            .await
            .unwrap()
            .len(),
        90
    );
    for refused in [
        HistorySpan::Hours(0),
        HistorySpan::Hours(169),
        HistorySpan::Days(0),
        HistorySpan::Days(91),
    ] {
        assert!(
            matches!(inspector.history(refused).await, Err(Error::Invalid(_))),
            "{refused:?}"
        );
    }

    // Tomorrow (00:10): today's figures start again from zero; yesterday's stay in history.
    env.clock.set(today + secs(86_400 + 600));
    let stats = inspector.stats().await.unwrap();
    let ours = stats.iter().find(|s| s.queue == env.name).unwrap();
    assert_eq!((ours.processed_today, ours.failed_today), (0, 0));
    assert_eq!(
        buckets(inspector.history(HistorySpan::Days(2)).await.unwrap())[0],
        bucket(today, 3, 2)
    );
}

async fn history_is_kept_ninety_days(backend: Backend) {
    let Some(env) = Env::new(backend, "counts-history-kept").await else {
        return;
    };
    let w = mixed_worker(&env);
    env.q.enqueue(Task::new("ok", &0)).await.unwrap();
    w.run_due().await.unwrap();
    let inspector = env.q.inspector();
    let day = |d: u64| env.at(secs(d * 86_400));
    env.clock.set(day(89));
    inspector.trim().await.unwrap();
    let kept = inspector.history(HistorySpan::Days(90)).await.unwrap();
    assert_eq!(
        kept[0].processed, 1,
        "89 days later the first day is still there"
    );
    env.clock.set(day(91));
    inspector.trim().await.unwrap();
    // Moved back, the clock shows the day again: it is gone, not merely out of the span.
    env.clock.set(day(89));
    let kept = inspector.history(HistorySpan::Days(90)).await.unwrap();
    assert_eq!(kept.iter().map(|b| b.processed).sum::<u64>(), 0);
}

async fn concurrent_workers_keep_the_counts_exact(backend: Backend) {
    let Some(env) = Env::new(backend, "counts-concurrent").await else {
        return;
    };
    let attempts = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let make = |q: Queue| {
        let (attempts, failures) = (attempts.clone(), failures.clone());
        Worker::new(q)
            .concurrency(8)
            .handle("job", move |task| {
                let (attempts, failures) = (attempts.clone(), failures.clone());
                async move {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    let n: u64 = task.payload()?;
                    if n % 3 == 0 && task.retried() == 0 {
                        failures.fetch_add(1, Ordering::Relaxed);
                        return Err(BoxError::from("first try fails"));
                    }
                    Ok(())
                }
            })
            .retry_delay(|_, _, _| Duration::ZERO)
    };
    env.q
        .enqueue_many((0..600u64).map(|n| Task::new("job", &n)))
        .await
        .unwrap();
    // Four workers, each on a connection pool of its own, drain the queue side by side.
    let [w0, w1, w2, w3] = [
        make(env.other_process().await),
        make(env.other_process().await),
        make(env.other_process().await),
        make(env.other_process().await),
    ];
    for _ in 0..100 {
        let ran = tokio::join!(w0.run_due(), w1.run_due(), w2.run_due(), w3.run_due());
        let ran = ran.0.unwrap() + ran.1.unwrap() + ran.2.unwrap() + ran.3.unwrap();
        if ran == 0 && env.q.inspector().count(TaskState::Completed).await.unwrap() == 600 {
            break;
        }
    }
    assert_counts_match(&env, "four workers drained 600 tasks").await;
    assert_eq!(
        env.q.inspector().count(TaskState::Completed).await.unwrap(),
        600
    );
    let total: (u64, u64) = env
        .q
        .inspector()
        .history(HistorySpan::Hours(1))
        .await
        .unwrap()
        .iter()
        .fold((0, 0), |(p, f), b| (p + b.processed, f + b.failed));
    assert_eq!(
        total,
        (
            attempts.load(Ordering::Relaxed),
            failures.load(Ordering::Relaxed)
        )
    );
    assert_eq!(total, (800, 200));
}

/// Drops what the counters are made of, the record of versions and the columns of later
/// versions (4 and 6), as a database made before the counters would lack them (all but
/// migration 5's column, which the open queue's statements still read: [`drop_archive_reason`]).
async fn drop_counters(url: &str) {
    const DROP: &str = "DROP TRIGGER IF EXISTS retry_tasks_counted_insert{on}; \
         DROP TRIGGER IF EXISTS retry_tasks_counted_update{on}; \
         DROP TRIGGER IF EXISTS retry_tasks_counted_delete{on}; \
         DROP TABLE retry_counts; DROP TABLE retry_history; DROP TABLE retry_migrations; \
         ALTER TABLE retry_tasks DROP COLUMN prefetched_token; \
         ALTER TABLE retry_tasks DROP COLUMN given_back; \
         ALTER TABLE retry_worker_systems DROP COLUMN probe_passed; \
         ALTER TABLE retry_worker_systems DROP COLUMN probe_error; \
         ALTER TABLE retry_worker_systems DROP COLUMN probe_ms;";
    run_sql(url, DROP).await;
}

/// Drops migration 5's column (issue 42), once no queue reads it.
async fn drop_archive_reason(url: &str) {
    run_sql(url, "ALTER TABLE retry_tasks DROP COLUMN archive_reason;").await;
}

/// Runs `sql` on the database at `url`, `{on}` read as `ON retry_tasks` on PostgreSQL.
async fn run_sql(url: &str, sql: &str) {
    if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.replace("{on}", "")))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let drop = sql.replace("{on}", " ON retry_tasks");
        sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
}

async fn a_table_made_before_the_counters_is_counted_on_connect(backend: Backend) {
    let Some(env) = Env::new(backend, "counts-migrate").await else {
        return;
    };
    // PostgreSQL: a database of its own, since the triggers are the whole table's.
    let url = match backend {
        Backend::Sqlite => env.url.clone(),
        Backend::Postgres | Backend::PgBouncer => {
            // Created on the server itself (through PgBouncer too: CREATE DATABASE is no
            // queue statement), reached through `env.url`'s pooler or server.
            let server = retry_tests::durable_env::postgres_url().unwrap();
            let admin = sqlx::PgPool::connect(&server).await.unwrap();
            let db =
                format!("retry_counts_migrate_{backend:?}_{}", std::process::id()).to_lowercase();
            for statement in [
                format!("DROP DATABASE IF EXISTS {db}"),
                format!("CREATE DATABASE {db}"),
            ] {
                sqlx::query(sqlx::AssertSqlSafe(statement))
                    .execute(&admin)
                    .await
                    .unwrap();
            }
            admin.close().await;
            let (base, _) = env.url.rsplit_once('/').unwrap();
            format!("{base}/{db}")
        }
    };
    let q = Queue::connect(&url).await.unwrap().named(env.name.clone());
    q.enqueue_many((0..5).map(|n| Task::new("job", &n)))
        .await
        .unwrap();
    drop_counters(&url).await;
    q.enqueue(Task::new("job", &9).process_in(secs(60)))
        .await
        .unwrap();
    q.close().await;
    drop_archive_reason(&url).await;

    let q = Queue::connect(&url).await.unwrap().named(env.name.clone());
    let counts = q.inspector().count_by_state().await.unwrap();
    assert_eq!(counts[0], (TaskState::Pending, 5));
    assert_eq!(counts[1], (TaskState::Scheduled, 1));
    // From here on the triggers count.
    q.enqueue(Task::new("job", &10)).await.unwrap();
    assert_eq!(q.inspector().count(TaskState::Pending).await.unwrap(), 6);
    q.close().await;
}
