//! Keyset paging of the inspector (`list_after`, the `next` cursor of a `TaskPage`, and
//! `page_number`, which still reads page N and hands over a cursor). Run on SQLite and on
//! PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use retry_runtime::BoxError;
use retry_runtime::durable::{Error, Task, TaskPage, TaskState, Worker};
use retry_tests::durable_env::{Backend, Env, secs};

retry_tests::both_backends!(
    cursors_walk_a_due_state_in_claim_order_to_the_end,
    cursors_walk_finished_tasks_newest_first,
    a_page_number_hands_over_to_cursors,
    a_cursor_survives_the_deletion_of_its_task,
    a_bad_cursor_or_size_is_invalid,
);

fn ids(page: &TaskPage) -> Vec<&str> {
    page.tasks.iter().map(|t| t.id.as_str()).collect()
}

async fn cursors_walk_a_due_state_in_claim_order_to_the_end(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-due").await else {
        return;
    };
    // p0..p6 share one due time: enqueue order decides; scheduled tasks go by due time.
    env.q
        .enqueue_many((0..7).map(|n| Task::new("job", &n).task_id(format!("p{n}"))))
        .await
        .unwrap();
    for (delay, id) in [(30, "s3"), (10, "s1"), (20, "s2")] {
        env.q
            .enqueue(Task::new("job", &0).task_id(id).process_in(secs(delay)))
            .await
            .unwrap();
    }
    let inspector = env.q.inspector();
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..10 {
        let page = inspector
            .list_after(TaskState::Pending, after.as_deref(), 3)
            .await
            .unwrap();
        pages.push(ids(&page).join(","));
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    assert_eq!(pages, ["p0,p1,p2", "p3,p4,p5", "p6"]);

    let first = inspector
        .list_after(TaskState::Scheduled, None, 2)
        .await
        .unwrap();
    assert_eq!(ids(&first), ["s1", "s2"]);
    let rest = inspector
        .list_after(TaskState::Scheduled, first.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(ids(&rest), ["s3"]);
    assert_eq!(rest.next, None);

    // Exactly a page full: no next page to announce.
    let full = inspector
        .list_after(TaskState::Scheduled, None, 3)
        .await
        .unwrap();
    assert_eq!(ids(&full), ["s1", "s2", "s3"]);
    assert_eq!(full.next, None);
    let empty = inspector
        .list_after(TaskState::Retry, None, 3)
        .await
        .unwrap();
    assert!(empty.tasks.is_empty() && empty.next.is_none());
}

async fn cursors_walk_finished_tasks_newest_first(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-finished").await else {
        return;
    };
    let w = Worker::new(env.q.clone())
        .concurrency(1)
        .handle("ok", |_task| async { Ok::<(), BoxError>(()) });
    // c0..c3 completed one second apart; x1 and x2 in the same millisecond as c3.
    for n in 0..4u64 {
        env.clock.set(env.at(secs(n)));
        env.q
            .enqueue(Task::new("ok", &n).task_id(format!("c{n}")))
            .await
            .unwrap();
        assert_eq!(w.run_due().await.unwrap(), 1);
    }
    env.q
        .enqueue_many([
            Task::new("ok", &1).task_id("x1"),
            Task::new("ok", &2).task_id("x2"),
        ])
        .await
        .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(w.run_due().await.unwrap(), 1);

    let inspector = env.q.inspector();
    let one = inspector
        .list_after(TaskState::Completed, None, 2)
        .await
        .unwrap();
    let two = inspector
        .list_after(TaskState::Completed, one.next.as_deref(), 2)
        .await
        .unwrap();
    let three = inspector
        .list_after(TaskState::Completed, two.next.as_deref(), 2)
        .await
        .unwrap();
    // Newest first, then the last enqueued first: what list_page shows.
    assert_eq!(ids(&one), ["x2", "x1"]);
    assert_eq!(ids(&two), ["c3", "c2"]);
    assert_eq!(ids(&three), ["c1", "c0"]);
    assert_eq!(three.next, None);
    let by_number = inspector
        .list_page(TaskState::Completed, 2, 2)
        .await
        .unwrap();
    let by_number: Vec<&str> = by_number.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(by_number, ids(&two));
}

async fn a_page_number_hands_over_to_cursors(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-number").await else {
        return;
    };
    env.q
        .enqueue_many((0..10).map(|n| Task::new("job", &n).task_id(format!("t{n:02}"))))
        .await
        .unwrap();
    let inspector = env.q.inspector();
    let third = inspector
        .page_number(TaskState::Pending, 3, 3)
        .await
        .unwrap();
    assert_eq!(ids(&third), ["t06", "t07", "t08"]);
    let fourth = inspector
        .list_after(TaskState::Pending, third.next.as_deref(), 3)
        .await
        .unwrap();
    assert_eq!(ids(&fourth), ["t09"]);
    assert_eq!(fourth.next, None);
    let past = inspector
        .page_number(TaskState::Pending, 5, 3)
        .await
        .unwrap();
    assert!(past.tasks.is_empty() && past.next.is_none());
}

async fn a_cursor_survives_the_deletion_of_its_task(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-deleted").await else {
        return;
    };
    env.q
        .enqueue_many((0..6).map(|n| Task::new("job", &n).task_id(format!("t{n}"))))
        .await
        .unwrap();
    let inspector = env.q.inspector();
    let first = inspector
        .list_after(TaskState::Pending, None, 2)
        .await
        .unwrap();
    assert_eq!(ids(&first), ["t0", "t1"]);
    // The page's last task and the first of the next go away: the cursor still knows where.
    inspector.delete_task("t1").await.unwrap();
    inspector.delete_task("t2").await.unwrap();
    let next = inspector
        .list_after(TaskState::Pending, first.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(ids(&next), ["t3", "t4"]);
}

async fn a_bad_cursor_or_size_is_invalid(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-bad").await else {
        return;
    };
    let inspector = env.q.inspector();
    for bad in ["", "page-2", "1.2.3", "99999999999999999999.1"] {
        let err = inspector
            .list_after(TaskState::Pending, Some(bad), 10)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{bad:?}: {err:?}");
    }
    let err = inspector
        .list_after(TaskState::Pending, None, 0)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
}
