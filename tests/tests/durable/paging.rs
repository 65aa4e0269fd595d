//! Paging with the inspector's one list method, `Inspector::tasks(TaskQuery)`: the `next`
//! cursor of a `TaskPage` (keyset paging), page numbers (an `OFFSET`, which hands over a cursor
//! too), and every task once whichever way a state is walked. Run on SQLite and on PostgreSQL
//! (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use retry_runtime::BoxError;
use retry_runtime::durable::{
    Cursor, Error, Inspector, Task, TaskPage, TaskQuery, TaskState, Worker,
};
use retry_tests::durable_env::{Backend, Env, secs};

retry_tests::both_backends!(
    cursors_walk_a_due_state_in_claim_order_to_the_end,
    cursors_walk_finished_tasks_newest_first,
    a_page_number_hands_over_to_cursors,
    a_cursor_survives_the_deletion_of_its_task,
    a_bad_cursor_or_size_is_invalid,
    every_walk_of_a_state_returns_each_task_once_in_its_order,
    filtered_walks_return_the_matching_tasks_once_in_order,
);

fn ids(page: &TaskPage) -> Vec<&str> {
    page.tasks.iter().map(|t| t.id.as_str()).collect()
}

/// Every page of `query`, each read after the cursor of the one before.
async fn walk(inspector: &Inspector, mut query: TaskQuery) -> Vec<TaskPage> {
    let mut pages = Vec::new();
    for _ in 0..100 {
        let page = inspector.tasks(query.clone()).await.unwrap();
        let next = page.next;
        pages.push(page);
        match next {
            Some(cursor) => query = query.after(cursor),
            None => return pages,
        }
    }
    panic!("more than 100 pages of {query:?}");
}

/// The ids of every page, in order.
fn all_ids(pages: &[TaskPage]) -> Vec<&str> {
    pages.iter().flat_map(ids).collect()
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
    let pages = walk(&inspector, TaskQuery::new(TaskState::Pending).size(3)).await;
    let pages: Vec<Vec<&str>> = pages.iter().map(ids).collect();
    assert_eq!(
        pages,
        [vec!["p0", "p1", "p2"], vec!["p3", "p4", "p5"], vec!["p6"]]
    );

    let first = inspector
        .tasks(TaskQuery::new(TaskState::Scheduled).size(2))
        .await
        .unwrap();
    assert_eq!(ids(&first), ["s1", "s2"]);
    let rest = inspector
        .tasks(
            TaskQuery::new(TaskState::Scheduled)
                .size(2)
                .after(first.next.unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(ids(&rest), ["s3"]);
    assert_eq!(rest.next, None);

    // Exactly a page full: no next page to announce.
    let full = inspector
        .tasks(TaskQuery::new(TaskState::Scheduled).size(3))
        .await
        .unwrap();
    assert_eq!(ids(&full), ["s1", "s2", "s3"]);
    assert_eq!(full.next, None);
    let empty = inspector
        .tasks(TaskQuery::new(TaskState::Retry).size(3))
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
        .tasks(TaskQuery::new(TaskState::Completed).size(2))
        .await
        .unwrap();
    let two = inspector
        .tasks(
            TaskQuery::new(TaskState::Completed)
                .size(2)
                .after(one.next.unwrap()),
        )
        .await
        .unwrap();
    let three = inspector
        .tasks(
            TaskQuery::new(TaskState::Completed)
                .size(2)
                .after(two.next.unwrap()),
        )
        .await
        .unwrap();
    // Newest first, then the last enqueued first: what a page number shows.
    assert_eq!(ids(&one), ["x2", "x1"]);
    assert_eq!(ids(&two), ["c3", "c2"]);
    assert_eq!(ids(&three), ["c1", "c0"]);
    assert_eq!(three.next, None);
    let by_number = inspector
        .tasks(TaskQuery::new(TaskState::Completed).size(2).page(2))
        .await
        .unwrap();
    assert_eq!(ids(&by_number), ids(&two));
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
        .tasks(TaskQuery::new(TaskState::Pending).size(3).page(3))
        .await
        .unwrap();
    assert_eq!(ids(&third), ["t06", "t07", "t08"]);
    let fourth = inspector
        .tasks(
            TaskQuery::new(TaskState::Pending)
                .size(3)
                .after(third.next.unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(ids(&fourth), ["t09"]);
    assert_eq!(fourth.next, None);
    let past = inspector
        .tasks(TaskQuery::new(TaskState::Pending).size(3).page(5))
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
        .tasks(TaskQuery::new(TaskState::Pending).size(2))
        .await
        .unwrap();
    assert_eq!(ids(&first), ["t0", "t1"]);
    // The page's last task and the first of the next go away: the cursor still knows where.
    inspector.delete_task("t1").await.unwrap();
    inspector.delete_task("t2").await.unwrap();
    let next = inspector
        .tasks(
            TaskQuery::new(TaskState::Pending)
                .size(2)
                .after(first.next.unwrap()),
        )
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
        let err = bad.parse::<Cursor>().unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{bad:?}: {err:?}");
    }
    let err = inspector
        .tasks(TaskQuery::new(TaskState::Pending).size(0))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
}

async fn every_walk_of_a_state_returns_each_task_once_in_its_order(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-every").await else {
        return;
    };
    // 17 pending tasks, 1 ms apart: due order is enqueue order.
    for n in 0..17 {
        env.q
            .enqueue(Task::new("job", &n).task_id(format!("p{n:02}")))
            .await
            .unwrap();
        env.clock.advance(std::time::Duration::from_millis(1));
    }
    // 11 archived a second apart in a shuffled order: newest first is that order reversed.
    let archive_order = [7, 2, 9, 0, 4, 10, 1, 8, 3, 6, 5];
    env.q
        .enqueue_many((0..11).map(|n| Task::new("job", &n).task_id(format!("x{n:02}"))))
        .await
        .unwrap();
    let inspector = env.q.inspector();
    for (i, n) in archive_order.iter().enumerate() {
        env.clock.set(env.at(secs(10 + i as u64)));
        inspector.archive_task(&format!("x{n:02}")).await.unwrap();
    }
    let pending: Vec<String> = (0..17).map(|n| format!("p{n:02}")).collect();
    let archived: Vec<String> = archive_order
        .iter()
        .rev()
        .map(|n| format!("x{n:02}"))
        .collect();
    for (state, expected) in [
        (TaskState::Pending, pending),
        (TaskState::Archived, archived),
    ] {
        let every = inspector.tasks(TaskQuery::new(state)).await.unwrap();
        assert_eq!(ids(&every), expected, "{state}: no size, every task");
        assert_eq!(every.next, None);
        for size in [1, 2, 5, 16, 17, 50] {
            let pages = walk(&inspector, TaskQuery::new(state).size(size)).await;
            assert_eq!(all_ids(&pages), expected, "{state}, size {size}");
            let full = pages[..pages.len() - 1]
                .iter()
                .all(|p| p.tasks.len() == size as usize);
            assert!(
                full,
                "{state}, size {size}: every page but the last is full"
            );
            // Page n by number is page n of the walk, down to the cursor it hands over.
            for (n, by_cursor) in pages.iter().enumerate() {
                let number = n as u32 + 1;
                let query = TaskQuery::new(state).size(size).page(number);
                let by_number = inspector.tasks(query).await.unwrap();
                assert_eq!(&by_number, by_cursor, "{state}, size {size}, page {number}");
            }
            let past = TaskQuery::new(state)
                .size(size)
                .page(pages.len() as u32 + 1);
            let past = inspector.tasks(past).await.unwrap();
            assert!(
                past.tasks.is_empty() && past.next.is_none(),
                "{state}, size {size}"
            );
        }
    }
    // A cursor replaces a page number given before it, and the other way round.
    let second = TaskQuery::new(TaskState::Pending).size(5).page(3);
    let first = inspector
        .tasks(TaskQuery::new(TaskState::Pending).size(5))
        .await
        .unwrap();
    let after_first = inspector
        .tasks(second.clone().after(first.next.unwrap()))
        .await
        .unwrap();
    assert_eq!(ids(&after_first), ["p05", "p06", "p07", "p08", "p09"]);
    let third = inspector
        .tasks(second.after(first.next.unwrap()).page(3))
        .await
        .unwrap();
    assert_eq!(ids(&third), ["p10", "p11", "p12", "p13", "p14"]);
    // A page number needs a page size.
    let err = inspector
        .tasks(TaskQuery::new(TaskState::Pending).page(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(why) if why.contains("needs a page size")),
        "{err:?}"
    );
}

async fn filtered_walks_return_the_matching_tasks_once_in_order(backend: Backend) {
    let Some(env) = Env::new(backend, "paging-filtered").await else {
        return;
    };
    const KINDS: [&str; 3] = ["a", "b", "c"];
    // Every fourth payload holds the needle; kinds take turns.
    for n in 0..30usize {
        let payload = if n % 4 == 1 {
            format!("needle {n}")
        } else {
            format!("hay {n}")
        };
        env.q
            .enqueue(Task::new(KINDS[n % 3], &payload).task_id(format!("t{n:02}")))
            .await
            .unwrap();
        env.clock.advance(std::time::Duration::from_millis(1));
    }
    let expected = |kind: Option<&str>, needle: bool| -> Vec<String> {
        (0..30usize)
            .filter(|n| kind.is_none_or(|k| KINDS[n % 3] == k) && (!needle || n % 4 == 1))
            .map(|n| format!("t{n:02}"))
            .collect()
    };
    let inspector = env.q.inspector();
    for size in [1, 3, 7, 40] {
        for kind in [None, Some("a"), Some("c")] {
            for needle in [false, true] {
                let mut query = TaskQuery::new(TaskState::Pending).size(size);
                if let Some(kind) = kind {
                    query = query.kind(kind);
                }
                if needle {
                    query = query.search("NEEDLE");
                }
                let pages = walk(&inspector, query).await;
                let why = format!("size {size}, kind {kind:?}, needle {needle}");
                assert_eq!(all_ids(&pages), expected(kind, needle), "{why}");
                assert!(
                    pages.iter().all(|p| p.searched.is_some() == needle),
                    "{why}"
                );
                assert!(pages.iter().all(|p| !p.search_limit_reached), "{why}");
            }
        }
    }
    // Without a size, a filter returns every match at once.
    let every = TaskQuery::new(TaskState::Pending)
        .kind("c")
        .search("needle");
    let every = inspector.tasks(every).await.unwrap();
    assert_eq!(ids(&every), expected(Some("c"), true));
    assert_eq!((every.next, every.searched), (None, Some(10)));
    // An empty kind or search is no filter.
    let empty = TaskQuery::new(TaskState::Pending)
        .kind("")
        .search("")
        .size(4);
    let empty = inspector.tasks(empty).await.unwrap();
    assert_eq!(ids(&empty), ["t00", "t01", "t02", "t03"]);
    assert_eq!(empty.searched, None);
}
