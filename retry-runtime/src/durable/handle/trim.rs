//! A queue's trims, by the limits its [`Handle`] carries: archived tasks beyond the
//! [archive limits](crate::durable::Queue::archive_limits), completed tasks past their
//! retention, and the hourly history past [`HISTORY_DAYS`](crate::durable::HISTORY_DAYS) days.
//! The worker's janitor (`worker/maintenance/janitor.rs`) runs them on the queues its worker
//! leads, the failure path after an archive, and the inspector on the operator's demand
//! ([`Inspector::trim`](crate::durable::Inspector::trim)): the handle's layer holds them so that
//! neither imports the other.

use std::time::SystemTime;

use crate::durable::clock::{duration_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::state::TaskState;
use crate::durable::store::counts;
use crate::durable::store::trim as statements;

/// The most completed tasks one statement of the janitor deletes.
pub(crate) const TRIM_BATCH: i64 = 10_000;

/// Deletes archived tasks beyond the archive limits, and completed tasks past their retention;
/// returns how many were deleted.
pub(crate) async fn trim(queue: &Handle) -> Result<u64, Error> {
    let archived = trim_archive(queue).await?;
    let now = to_ms(queue.clock.now());
    let (completed, _) = trim_completed(queue, now, TRIM_BATCH).await?;
    counts::trim_history(&queue.store, &queue.name, now).await?;
    Ok(archived + completed)
}

/// Deletes the completed tasks past their retention at `now` (ms), at most `batch` a
/// statement, until a statement finds fewer; returns how many were deleted, in how many
/// statements.
pub(crate) async fn trim_completed(
    queue: &Handle,
    now: i64,
    batch: i64,
) -> Result<(u64, u64), Error> {
    let retention = duration_ms(queue.completed_retention);
    let (mut deleted, mut statements) = (0, 0);
    loop {
        let n =
            statements::trim_completed(&queue.store, &queue.name, retention, now, batch).await?;
        deleted += n;
        statements += 1;
        if i64::try_from(n).unwrap_or(i64::MAX) < batch {
            return Ok((deleted, statements));
        }
    }
}

/// Deletes the archived tasks beyond the queue's archive limits.
pub(crate) async fn trim_archive(queue: &Handle) -> Result<u64, Error> {
    let cutoff = queue
        .clock
        .now()
        .checked_sub(queue.archive_max_age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let keep = i64::try_from(queue.archive_max_tasks).unwrap_or(i64::MAX);
    // The kept count says whether any task is beyond the limit, without a scan.
    let archived = counts::queue_state_counts(&queue.store, &queue.name)
        .await?
        .into_iter()
        .find_map(|(state, n)| (state == TaskState::Archived.as_str()).then_some(n))
        .unwrap_or(0);
    statements::trim_archive(
        &queue.store,
        &queue.name,
        to_ms(cutoff),
        keep,
        archived > keep,
    )
    .await
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_backlog_of_expired_completed_tasks_is_deleted_in_bounded_batches() {
        use std::time::Duration;

        use super::trim_completed;
        use crate::durable::clock::to_ms;
        use crate::durable::store::Store;
        use crate::durable::{Queue, Task, TaskState};

        let hour = Duration::from_secs(3600);
        let q = Queue::connect("sqlite::memory:")
            .await
            .unwrap()
            .completed_retention(hour);
        let tasks = (0..27).map(|n| Task::new("x", &n).task_id(format!("t{n:02}")));
        q.enqueue_many(tasks.chain([Task::new("x", &0).task_id("waiting")]))
            .await
            .unwrap();
        let enqueued = to_ms(q.inspector().get("t00").await.unwrap().unwrap().enqueued_at);
        let Store::Sqlite(pool) = &q.handle.store else {
            unreachable!("a sqlite:// queue")
        };
        // 25 completed an hour and more ago, 2 just now; the last task still waits.
        let complete = "UPDATE retry_tasks SET state = 'completed', finished_ms = $1 \
             WHERE id >= $2 AND id < $3";
        for (finished, from, to) in [
            (enqueued, "t00", "t25"),
            (enqueued + 3_600_000, "t25", "t27"),
        ] {
            sqlx::query(complete)
                .bind(finished)
                .bind(from)
                .bind(to)
                .execute(pool)
                .await
                .unwrap();
        }
        let now = enqueued + 3_600_001;
        assert_eq!(trim_completed(&q.handle, now, 10).await.unwrap(), (25, 3));
        let inspector = q.inspector();
        assert_eq!(inspector.count(TaskState::Completed).await.unwrap(), 2);
        assert_eq!(inspector.count(TaskState::Pending).await.unwrap(), 1);
        assert!(inspector.get("t24").await.unwrap().is_none());
        assert!(inspector.get("t25").await.unwrap().is_some());
        // Nothing left past the retention: one statement finds nothing.
        assert_eq!(trim_completed(&q.handle, now, 10).await.unwrap(), (0, 1));
    }

    /// The janitor's delete walks the two indexes of finished tasks and stops at the first task
    /// not yet expired: no scan of the table, which holds a busy queue's week of completed work.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn the_trim_of_completed_tasks_searches_indexes_and_never_scans_the_table() {
        use crate::durable::Queue;
        use crate::durable::store::{Store, trim};

        let q = Queue::connect("sqlite::memory:").await.unwrap();
        let Store::Sqlite(pool) = &q.handle.store else {
            unreachable!("a sqlite:// queue")
        };
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {}",
            trim::TRIM_COMPLETED
        )))
        .bind("default")
        .bind(1_i64)
        .bind(2_i64)
        .bind(10_i64)
        .fetch_all(pool)
        .await
        .unwrap();
        let steps: Vec<&str> = plan.iter().map(|(_, _, _, step)| step.as_str()).collect();
        assert!(
            steps
                .iter()
                .any(|s| s.contains("USING INDEX retry_tasks_finished")
                    && s.contains("finished_ms<?")),
            "{steps:?}"
        );
        assert!(
            steps
                .iter()
                .any(|s| s.contains("USING INDEX retry_tasks_retained")),
            "{steps:?}"
        );
        assert!(
            !steps.iter().any(|s| s.starts_with("SCAN retry_tasks")),
            "{steps:?}"
        );
    }

    /// A task's own retention is kept whichever is longer, the queue's or its own.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn tasks_with_a_retention_of_their_own_expire_by_it_beside_the_queues() {
        use std::time::Duration;

        use super::trim_completed;
        use crate::durable::store::Store;
        use crate::durable::{Queue, Task};

        let hour = Duration::from_secs(3600);
        let q = Queue::connect("sqlite::memory:")
            .await
            .unwrap()
            .completed_retention(hour);
        let tasks = [
            Task::new("x", &0).task_id("queue-kept"),
            Task::new("x", &1)
                .task_id("own-short")
                .retention(Duration::from_secs(60)),
            Task::new("x", &2).task_id("own-long").retention(3 * hour),
            Task::new("x", &3)
                .task_id("own-expired-later")
                .retention(2 * hour),
        ];
        q.enqueue_many(tasks).await.unwrap();
        let Store::Sqlite(pool) = &q.handle.store else {
            unreachable!("a sqlite:// queue")
        };
        sqlx::query("UPDATE retry_tasks SET state = 'completed', finished_ms = 0")
            .execute(pool)
            .await
            .unwrap();
        let left = || async {
            let mut ids: Vec<String> = sqlx::query_scalar("SELECT id FROM retry_tasks")
                .fetch_all(pool)
                .await
                .unwrap();
            ids.sort();
            ids
        };
        // A minute and a bit: only the task kept for a minute is past its retention.
        assert_eq!(trim_completed(&q.handle, 60_001, 10).await.unwrap().0, 1);
        assert_eq!(
            left().await,
            ["own-expired-later", "own-long", "queue-kept"]
        );
        // An hour and a bit: the queue's retention ends; the tasks kept longer stay.
        assert_eq!(trim_completed(&q.handle, 3_600_001, 10).await.unwrap().0, 1);
        assert_eq!(left().await, ["own-expired-later", "own-long"]);
        assert_eq!(trim_completed(&q.handle, 7_200_001, 10).await.unwrap().0, 1);
        assert_eq!(
            trim_completed(&q.handle, 10_800_001, 10).await.unwrap().0,
            1
        );
        assert!(left().await.is_empty());
    }
}
