//! What the worker's statements read on PostgreSQL, where they run on generic plans
//! (`plan_cache_mode = force_generic_plan`), planned once per connection without the values.
//!
//! - The claim behind a backlog: the plan does not know the claim's `LIMIT`. A claim that joined
//!   the due rows back to the table was planned as a hash join over the whole table: behind a
//!   million pending tasks every claim read all of them (10 tasks/s). The test counts the
//!   table's sequential scans (`pg_stat_user_tables`), exactly, around one claim behind 100 000
//!   pending tasks.
//! - A change of a claimed task beside many other active ones: fenced by (queue, id) and the
//!   lease bound, the plan walked the small partial index of the active tasks by queue and read
//!   every active task for each one it changed. The test counts the index entries read
//!   (`pg_stat_user_indexes`) around a batch of completions, a renewal and a single completion.

use std::time::Duration;

use retry_runtime::durable::{Queue, Task, protocol};
use retry_tests::durable_env::{PgDatabase, poll_until};

const BACKLOG: usize = 100_000;

/// `seq_scan` of `retry_tasks`, read once every other connection to the database has ended.
async fn seq_scans(admin: &sqlx::PgPool) -> i64 {
    table_stat(
        admin,
        "SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'retry_tasks'",
    )
    .await
}

/// The index entries read on `retry_tasks`, over all its indexes.
async fn index_entries_read(admin: &sqlx::PgPool) -> i64 {
    table_stat(
        admin,
        "SELECT SUM(idx_tup_read)::bigint FROM pg_stat_user_indexes WHERE relname = 'retry_tasks'",
    )
    .await
}

/// One statistic (`query`), read once every other connection to the database has ended (a
/// backend reports its counts when it exits). `admin` holds one connection.
async fn table_stat(admin: &sqlx::PgPool, query: &'static str) -> i64 {
    poll_until(
        "the queue's connections to end",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let others: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(admin)
            .await
            .unwrap();
            (others == 0).then_some(())
        },
    )
    .await;
    let mut conn = admin.acquire().await.unwrap();
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query_scalar(query)
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

/// `count` no-op tasks (a multiple of 10 000), 10 000 per batch.
async fn enqueue_noops(q: &Queue, count: usize) {
    for batch in 0..count / 10_000 {
        let tasks = (0..10_000).map(|n| Task::new("noop", &(batch * 10_000 + n)));
        q.enqueue_many(tasks).await.unwrap();
    }
}

/// One connection to `db` that reads the statistics.
async fn admin(db: &PgDatabase) -> sqlx::PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_claim_behind_a_backlog_reads_no_more_than_it_claims() {
    let Some(db) = PgDatabase::create("backlog_claim").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.unwrap();
    enqueue_noops(&q, BACKLOG).await;
    q.close().await;
    let admin = admin(&db).await;
    // The planner's view of the backlog, as autovacuum would give it sooner or later.
    sqlx::query("ANALYZE retry_tasks")
        .execute(&admin)
        .await
        .unwrap();
    let before = seq_scans(&admin).await;

    let q = Queue::connect(&db.url).await.unwrap();
    let claimed = protocol::claim(&q, 32, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 32);
    q.close().await;

    assert_eq!(
        seq_scans(&admin).await,
        before,
        "the claim scanned the whole table"
    );
    admin.close().await;
    db.drop_database().await;
}

/// Active tasks beside those the test changes (before the fix each change read them all),
/// among more that wait.
const ACTIVE: usize = 300;
const COMPLETED: usize = 100;
const WAITING: usize = 20_000;

#[tokio::test]
async fn a_change_of_a_claimed_task_reads_its_own_row_only() {
    let Some(db) = PgDatabase::create("fenced_row").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.unwrap();
    enqueue_noops(&q, WAITING).await;
    // The planner's view after a burst of enqueues, as autovacuum gives it: no task active.
    // With it, the batch statements were planned as a hash join over every active task, read
    // by the partial index of the active tasks (beside 20 000 active tasks, a batch of 500
    // completions spent 8 of its 10 ms reading them).
    let admin = admin(&db).await;
    sqlx::query("ANALYZE retry_tasks")
        .execute(&admin)
        .await
        .unwrap();
    let mut claimed = protocol::claim(&q, ACTIVE, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.len(), ACTIVE);
    q.close().await;
    let before = index_entries_read(&admin).await;

    // A fresh connection: its statements are planned now, beside the active tasks.
    let q = Queue::connect(&db.url).await.unwrap();
    let batch: Vec<_> = claimed.drain(..COMPLETED).collect();
    let written = protocol::complete_all(&q, &batch).await.unwrap();
    assert!(
        written.iter().all(|&w| w),
        "every completion of the batch is written"
    );
    let renewed = &mut claimed[0];
    assert!(
        protocol::extend_lease(&q, renewed, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(protocol::complete(&q, &claimed[1]).await.unwrap());
    q.close().await;

    // The primary key's entries of each row changed: two at most, one per version of the row
    // (enqueued, claimed) until the older one is found dead. Before, `ACTIVE` per row changed.
    let read = index_entries_read(&admin).await - before;
    let changed = i64::try_from(COMPLETED + 2).unwrap();
    assert!(
        read <= 2 * changed,
        "{COMPLETED} completions, a renewal and a completion beside {ACTIVE} active tasks read {read} index entries"
    );
    admin.close().await;
    db.drop_database().await;
}
