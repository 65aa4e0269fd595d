//! Finding tasks (issue 23, item 4): `Inspector::tasks` with a `TaskQuery` by kind (paged by
//! key), by a text in the
//! id, payload or last error (within a bounded window that says when it stopped), both at once,
//! and `Inspector::kinds`; and the lease expiry an active task's `TaskInfo` carries (item 9).
//! Run on SQLite and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use std::sync::Arc;

use retry_runtime::BoxError;
use retry_runtime::durable::{
    Cursor, Error, MAX_SEARCH_BYTES, SEARCH_WINDOW, Task, TaskPage, TaskQuery, TaskState,
};
use retry_tests::durable_env::{Backend, Env, secs, worker};
use tokio::sync::Notify;

retry_tests::both_backends!(
    a_kind_filter_pages_by_key_in_the_state_order,
    a_kind_filter_reads_finished_tasks_newest_first,
    a_search_matches_id_payload_and_last_err_ignoring_case,
    a_full_page_of_hits_hands_on_its_cursor,
    a_search_stops_at_its_window_and_says_so,
    a_search_within_a_kind_and_literal_wildcards,
    kinds_lists_each_kind_of_a_state_once_sorted,
    bad_search_input_is_invalid,
    an_active_task_carries_its_lease_expiry,
);

fn ids(page: &TaskPage) -> Vec<&str> {
    page.tasks.iter().map(|t| t.id.as_str()).collect()
}

/// Every page of `query`, `size` tasks each, each after the cursor of the one before, as
/// comma-joined ids.
async fn walk(env: &Env, query: TaskQuery, size: u32) -> Vec<String> {
    let inspector = env.q.inspector();
    let mut query = query.size(size);
    let mut pages = Vec::new();
    for _ in 0..20 {
        let page = inspector.tasks(query.clone()).await.unwrap();
        pages.push(ids(&page).join(","));
        match page.next {
            Some(cursor) => query = query.after(cursor),
            None => return pages,
        }
    }
    panic!("more than 20 pages: {pages:?}");
}

/// The query of `state` after `cursor`, if any.
fn after(query: TaskQuery, cursor: Option<Cursor>) -> TaskQuery {
    match cursor {
        Some(cursor) => query.after(cursor),
        None => query,
    }
}

async fn a_kind_filter_pages_by_key_in_the_state_order(backend: Backend) {
    let Some(env) = Env::new(backend, "find-kind").await else {
        return;
    };
    env.q
        .enqueue_many((0..9).map(|n| {
            let kind = if n % 3 == 0 { "sms" } else { "email" };
            Task::new(kind, &n).task_id(format!("t{n}"))
        }))
        .await
        .unwrap();
    // Scheduled by due time, not by enqueue order.
    for (delay, id) in [(30, "s3"), (10, "s1"), (20, "s2")] {
        env.q
            .enqueue(Task::new("email", &0).task_id(id).process_in(secs(delay)))
            .await
            .unwrap();
    }
    let email = |state| TaskQuery::new(state).kind("email");
    assert_eq!(
        walk(&env, email(TaskState::Pending), 4).await,
        ["t1,t2,t4,t5", "t7,t8"]
    );
    let sms = TaskQuery::new(TaskState::Pending).kind("sms");
    assert_eq!(walk(&env, sms, 3).await, ["t0,t3,t6"]);
    assert_eq!(
        walk(&env, email(TaskState::Scheduled), 2).await,
        ["s1,s2", "s3"]
    );
    let none = TaskQuery::new(TaskState::Pending).kind("fax");
    assert_eq!(walk(&env, none, 3).await, [""]);
    let page = env
        .q
        .inspector()
        .tasks(email(TaskState::Pending).size(20))
        .await
        .unwrap();
    assert_eq!((page.searched, page.search_limit_reached), (None, false));
    // No filter at all: the state's own order.
    let all = TaskQuery::new(TaskState::Pending);
    assert_eq!(walk(&env, all, 5).await, ["t0,t1,t2,t3,t4", "t5,t6,t7,t8"]);
}

async fn a_kind_filter_reads_finished_tasks_newest_first(backend: Backend) {
    let Some(env) = Env::new(backend, "find-finished").await else {
        return;
    };
    let inspector = env.q.inspector();
    for n in 0..6u64 {
        let kind = if n % 2 == 0 { "even" } else { "odd" };
        env.q
            .enqueue(Task::new(kind, &n).task_id(format!("a{n}")))
            .await
            .unwrap();
        env.clock.set(env.at(secs(n)));
        inspector.archive_task(&format!("a{n}")).await.unwrap();
    }
    let even = TaskQuery::new(TaskState::Archived).kind("even");
    assert_eq!(walk(&env, even, 2).await, ["a4,a2", "a0"]);
    let odd_search = TaskQuery::new(TaskState::Archived).kind("odd").search("a");
    assert_eq!(walk(&env, odd_search, 2).await, ["a5,a3", "a1"]);
}

async fn a_search_matches_id_payload_and_last_err_ignoring_case(backend: Backend) {
    let Some(env) = Env::new(backend, "find-search").await else {
        return;
    };
    let w = worker(&env).handle("charge", |task| async move {
        let how: String = task.payload()?;
        Err::<(), BoxError>(format!("gateway said {how}").into())
    });
    for (id, payload) in [
        ("order-1", "Plain"),
        ("order-2", "TIMEOUT at gateway"),
        ("Needle-3", "plain"),
        ("order-4", "503 Service Unavailable"),
    ] {
        env.q
            .enqueue(Task::new("charge", &payload).task_id(id))
            .await
            .unwrap();
    }
    assert_eq!(w.run_due().await.unwrap(), 4);
    let inspector = env.q.inspector();
    let find = |text: &str| {
        let query = TaskQuery::new(TaskState::Retry).search(text).size(20);
        let inspector = inspector.clone();
        async move { inspector.tasks(query).await.unwrap() }
    };
    // In the payload and (as "gateway said TIMEOUT…") the last error.
    let page = find("timeout").await;
    assert_eq!(ids(&page), ["order-2"]);
    assert_eq!((page.searched, page.search_limit_reached), (Some(4), false));
    assert_eq!(page.next, None);
    // In the id, whatever the case.
    assert_eq!(ids(&find("NEEDLE").await), ["Needle-3"]);
    // In the last error only: every task failed "gateway said …", in due order.
    let said = find("Gateway Said").await;
    assert_eq!(ids(&said), ["order-1", "order-2", "Needle-3", "order-4"]);
    assert_eq!(
        said.tasks[3].last_err.as_deref(),
        Some("gateway said 503 Service Unavailable")
    );
    assert!(find("nowhere").await.tasks.is_empty());
    assert_eq!(find("nowhere").await.searched, Some(4));
    // An empty search is no search.
    let empty = inspector
        .tasks(TaskQuery::new(TaskState::Retry).search("").size(2))
        .await
        .unwrap();
    assert_eq!(ids(&empty), ["order-1", "order-2"]);
    assert_eq!(empty.searched, None);
}

async fn a_full_page_of_hits_hands_on_its_cursor(backend: Backend) {
    let Some(env) = Env::new(backend, "find-cursor").await else {
        return;
    };
    // Every third task is a hit: h0, h3, h6, h9, h12.
    env.q
        .enqueue_many((0..14).map(|n| {
            let id = if n % 3 == 0 {
                format!("h{n}")
            } else {
                format!("m{n}")
            };
            Task::new("job", &n).task_id(id)
        }))
        .await
        .unwrap();
    let inspector = env.q.inspector();
    let filter = TaskQuery::new(TaskState::Pending).search("h").size(2);
    let first = inspector.tasks(filter.clone()).await.unwrap();
    assert_eq!(ids(&first), ["h0", "h3"]);
    // Read up to h3, the 4th task.
    assert_eq!(
        (first.searched, first.search_limit_reached),
        (Some(4), false)
    );
    let second = inspector
        .tasks(after(filter.clone(), first.next))
        .await
        .unwrap();
    assert_eq!(ids(&second), ["h6", "h9"]);
    assert_eq!(second.searched, Some(6));
    let third = inspector
        .tasks(after(filter.clone(), second.next))
        .await
        .unwrap();
    assert_eq!(ids(&third), ["h12"]);
    // m10, m11, h12, m13: the rest of the state.
    assert_eq!((third.searched, third.next), (Some(4), None));
}

async fn a_search_stops_at_its_window_and_says_so(backend: Backend) {
    let Some(env) = Env::new(backend, "find-window").await else {
        return;
    };
    let n = SEARCH_WINDOW as usize + 5;
    env.q
        .enqueue_many((0..n).map(|i| {
            let payload = if i == 1 || i == n - 2 {
                "needle"
            } else {
                "hay"
            };
            Task::new("job", &payload).task_id(format!("t{i:05}"))
        }))
        .await
        .unwrap();
    let inspector = env.q.inspector();
    let filter = TaskQuery::new(TaskState::Pending).search("needle").size(20);
    let first = inspector.tasks(filter.clone()).await.unwrap();
    assert_eq!(ids(&first), ["t00001"]);
    assert_eq!(
        (first.searched, first.search_limit_reached),
        (Some(u64::from(SEARCH_WINDOW)), true)
    );
    assert!(first.next.is_some(), "the search can go on");
    let rest = inspector
        .tasks(after(filter.clone(), first.next))
        .await
        .unwrap();
    assert_eq!(ids(&rest), [format!("t{:05}", n - 2)]);
    assert_eq!((rest.searched, rest.search_limit_reached), (Some(5), false));
    assert_eq!(rest.next, None);
    // Exactly a window's worth left: the window holds all of it, nothing is left unread.
    inspector
        .delete_task(&format!("t{:05}", n - 1))
        .await
        .unwrap();
    let exact = inspector
        .tasks(after(filter.clone(), first.next))
        .await
        .unwrap();
    assert_eq!(
        (exact.searched, exact.search_limit_reached, exact.next),
        (Some(4), false, None)
    );
}

async fn a_search_within_a_kind_and_literal_wildcards(backend: Backend) {
    let Some(env) = Env::new(backend, "find-wildcards").await else {
        return;
    };
    for (id, kind, payload) in [
        ("p1", "report", "100% done"),
        ("p2", "report", "1000 done"),
        ("p3", "email", "100% sent"),
        ("p4", "report", "a_b"),
        ("p5", "report", "axb"),
    ] {
        env.q
            .enqueue(Task::new(kind, &payload).task_id(id))
            .await
            .unwrap();
    }
    let inspector = env.q.inspector();
    let pending = || TaskQuery::new(TaskState::Pending);
    let found = |query: TaskQuery| {
        let inspector = inspector.clone();
        async move {
            let page = inspector.tasks(query.size(20)).await.unwrap();
            page.tasks.into_iter().map(|t| t.id).collect::<Vec<_>>()
        }
    };
    // `%` and `_` match themselves, not any text or any letter.
    assert_eq!(found(pending().search("100%")).await, ["p1", "p3"]);
    assert_eq!(found(pending().kind("report").search("100%")).await, ["p1"]);
    assert_eq!(found(pending().search("a_b")).await, ["p4"]);
    assert_eq!(
        found(pending().kind("email").search("done")).await,
        Vec::<String>::new()
    );
}

async fn kinds_lists_each_kind_of_a_state_once_sorted(backend: Backend) {
    let Some(env) = Env::new(backend, "find-kinds").await else {
        return;
    };
    env.q
        .enqueue_many((0..30).map(|n| {
            let kind = ["sms", "email", "push"][n % 3];
            Task::new(kind, &n).task_id(format!("t{n}"))
        }))
        .await
        .unwrap();
    let inspector = env.q.inspector();
    inspector.archive_task("t1").await.unwrap();
    assert_eq!(
        inspector.kinds(TaskState::Pending).await.unwrap(),
        ["email", "push", "sms"]
    );
    assert_eq!(
        inspector.kinds(TaskState::Archived).await.unwrap(),
        ["email"]
    );
    assert!(inspector.kinds(TaskState::Retry).await.unwrap().is_empty());
}

async fn bad_search_input_is_invalid(backend: Backend) {
    let Some(env) = Env::new(backend, "find-bad").await else {
        return;
    };
    let inspector = env.q.inspector();
    let long = TaskQuery::new(TaskState::Pending).search("x".repeat(MAX_SEARCH_BYTES + 1));
    let err = inspector.tasks(long.size(20)).await.unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(why) if why.contains("at most 256 bytes")),
        "{err:?}"
    );
    // A NUL would end SQLite's LIKE pattern there (every task matched) and is refused by
    // PostgreSQL: refused here, on both, before any statement.
    env.q.enqueue(Task::new("job", "{}")).await.unwrap();
    let nul = TaskQuery::new(TaskState::Pending).search("x\0y");
    let err = inspector.tasks(nul.size(20)).await.unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(why) if why.contains("no NUL")),
        "{err:?}"
    );
    let err = "page-2".parse::<Cursor>().unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
    let search = TaskQuery::new(TaskState::Pending).search("x");
    for query in [search, TaskQuery::new(TaskState::Pending).kind("job")] {
        let err = inspector.tasks(query.clone().size(0)).await.unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        // A filtered list pages by cursor only.
        let err = inspector.tasks(query.size(20).page(2)).await.unwrap_err();
        assert!(
            matches!(&err, Error::Invalid(why) if why.contains("pages by cursor")),
            "{err:?}"
        );
    }
}

async fn an_active_task_carries_its_lease_expiry(backend: Backend) {
    let Some(env) = Env::new(backend, "find-lease").await else {
        return;
    };
    let release = Arc::new(Notify::new());
    let w = {
        let release = release.clone();
        worker(&env).handle("hold", move |_task| {
            let release = release.clone();
            async move {
                release.notified().await;
                Ok::<(), BoxError>(())
            }
        })
    };
    let info = env.q.enqueue(Task::new("hold", &1)).await.unwrap();
    assert_eq!(info.lease_expires_at, None);
    let run = tokio::spawn(async move { w.run_due().await });
    let active = env.wait_for(&info.id, TaskState::Active).await;
    // The default lease, 30 s, from the claim at t0.
    assert_eq!(active.lease_expires_at, Some(env.at(secs(30))));
    let listed = env
        .q
        .inspector()
        .tasks(TaskQuery::new(TaskState::Active).kind("hold").size(5))
        .await
        .unwrap();
    assert_eq!(listed.tasks, [active]);
    release.notify_one();
    assert_eq!(run.await.unwrap().unwrap(), 1);
    assert_eq!(env.info(&info.id).await.lease_expires_at, None);
}
