//! The claim behind a backlog, on PostgreSQL: its statements run on generic plans
//! (`plan_cache_mode = force_generic_plan`), which do not know the claim's `LIMIT`. A claim that
//! joined the due rows back to the table was planned as a hash join over the whole table: behind
//! a million pending tasks every claim read all of them (10 tasks/s). The test counts the
//! table's sequential scans (`pg_stat_user_tables`), exactly, around one claim behind 100 000
//! pending tasks.

use std::time::Duration;

use retry_runtime::durable::{Queue, Task, protocol};
use retry_tests::durable_env::{PgDatabase, poll_until};

const BACKLOG: usize = 100_000;

/// `seq_scan` of `retry_tasks`, read once every other connection to the database has ended
/// (a backend reports its counts when it exits). `admin` holds one connection.
async fn seq_scans(admin: &sqlx::PgPool) -> i64 {
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
    sqlx::query_scalar("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'retry_tasks'")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_claim_behind_a_backlog_reads_no_more_than_it_claims() {
    let Some(db) = PgDatabase::create("backlog_claim").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.unwrap();
    for batch in 0..BACKLOG / 10_000 {
        let tasks = (0..10_000).map(|n| Task::new("noop", &(batch * 10_000 + n)));
        q.enqueue_many(tasks).await.unwrap();
    }
    q.close().await;
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.url)
        .await
        .unwrap();
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
