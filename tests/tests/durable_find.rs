//! Finding tasks (issue 23, item 4): `Inspector::find` by kind (paged by key), by a text in the
//! id, payload or last error (within a bounded window that says when it stopped), both at once,
//! and `Inspector::kinds`; and the lease expiry an active task's `TaskInfo` carries (item 9).
//! Run on SQLite and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use std::sync::Arc;

use retry_runtime::BoxError;
use retry_runtime::durable::{
    Error, FoundPage, MAX_SEARCH_BYTES, SEARCH_WINDOW, Task, TaskFilter, TaskState,
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

fn ids(page: &FoundPage) -> Vec<&str> {
    page.tasks.iter().map(|t| t.id.as_str()).collect()
}

/// Every page of `filter` in `state`, `size` tasks each, as comma-joined ids.
async fn walk(env: &Env, state: TaskState, filter: &TaskFilter, size: u32) -> Vec<String> {
    let inspector = env.q.inspector();
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..20 {
        let page = inspector
            .find(state, filter, after.as_deref(), size)
            .await
            .unwrap();
        pages.push(ids(&page).join(","));
        after = page.next;
        if after.is_none() {
            return pages;
        }
    }
    panic!("more than 20 pages: {pages:?}");
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
    let email = TaskFilter::default().kind("email");
    assert_eq!(
        walk(&env, TaskState::Pending, &email, 4).await,
        ["t1,t2,t4,t5", "t7,t8"]
    );
    let sms = TaskFilter::default().kind("sms");
    assert_eq!(walk(&env, TaskState::Pending, &sms, 3).await, ["t0,t3,t6"]);
    assert_eq!(
        walk(&env, TaskState::Scheduled, &email, 2).await,
        ["s1,s2", "s3"]
    );
    let none = TaskFilter::default().kind("fax");
    assert_eq!(walk(&env, TaskState::Pending, &none, 3).await, [""]);
    let page = env
        .q
        .inspector()
        .find(TaskState::Pending, &email, None, 20)
        .await
        .unwrap();
    assert_eq!((page.searched, page.search_limit_reached), (None, false));
    // No filter at all: list_after.
    let all = TaskFilter::default();
    assert_eq!(
        walk(&env, TaskState::Pending, &all, 5).await,
        ["t0,t1,t2,t3,t4", "t5,t6,t7,t8"]
    );
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
    let even = TaskFilter::default().kind("even");
    assert_eq!(
        walk(&env, TaskState::Archived, &even, 2).await,
        ["a4,a2", "a0"]
    );
    let odd_search = TaskFilter::default().kind("odd").search("a");
    assert_eq!(
        walk(&env, TaskState::Archived, &odd_search, 2).await,
        ["a5,a3", "a1"]
    );
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
        let filter = TaskFilter::default().search(text);
        let inspector = inspector.clone();
        async move {
            inspector
                .find(TaskState::Retry, &filter, None, 20)
                .await
                .unwrap()
        }
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
        .find(TaskState::Retry, &TaskFilter::default().search(""), None, 2)
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
    let filter = TaskFilter::default().search("h");
    let first = inspector
        .find(TaskState::Pending, &filter, None, 2)
        .await
        .unwrap();
    assert_eq!(ids(&first), ["h0", "h3"]);
    // Read up to h3, the 4th task.
    assert_eq!(
        (first.searched, first.search_limit_reached),
        (Some(4), false)
    );
    let second = inspector
        .find(TaskState::Pending, &filter, first.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(ids(&second), ["h6", "h9"]);
    assert_eq!(second.searched, Some(6));
    let third = inspector
        .find(TaskState::Pending, &filter, second.next.as_deref(), 2)
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
    let filter = TaskFilter::default().search("needle");
    let first = inspector
        .find(TaskState::Pending, &filter, None, 20)
        .await
        .unwrap();
    assert_eq!(ids(&first), ["t00001"]);
    assert_eq!(
        (first.searched, first.search_limit_reached),
        (Some(u64::from(SEARCH_WINDOW)), true)
    );
    assert!(first.next.is_some(), "the search can go on");
    let rest = inspector
        .find(TaskState::Pending, &filter, first.next.as_deref(), 20)
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
        .find(TaskState::Pending, &filter, first.next.as_deref(), 20)
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
    let found = |filter: TaskFilter| {
        let inspector = inspector.clone();
        async move {
            let page = inspector
                .find(TaskState::Pending, &filter, None, 20)
                .await
                .unwrap();
            page.tasks.into_iter().map(|t| t.id).collect::<Vec<_>>()
        }
    };
    // `%` and `_` match themselves, not any text or any letter.
    assert_eq!(
        found(TaskFilter::default().search("100%")).await,
        ["p1", "p3"]
    );
    assert_eq!(
        found(TaskFilter::default().kind("report").search("100%")).await,
        ["p1"]
    );
    assert_eq!(found(TaskFilter::default().search("a_b")).await, ["p4"]);
    assert_eq!(
        found(TaskFilter::default().kind("email").search("done")).await,
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
    let long = TaskFilter::default().search("x".repeat(MAX_SEARCH_BYTES + 1));
    let err = inspector
        .find(TaskState::Pending, &long, None, 20)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Invalid(why) if why.contains("at most 256 bytes")),
        "{err:?}"
    );
    let search = TaskFilter::default().search("x");
    for filter in [search, TaskFilter::default().kind("job")] {
        let err = inspector
            .find(TaskState::Pending, &filter, Some("page-2"), 20)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        let err = inspector
            .find(TaskState::Pending, &filter, None, 0)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
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
        .find(
            TaskState::Active,
            &TaskFilter::default().kind("hold"),
            None,
            5,
        )
        .await
        .unwrap();
    assert_eq!(listed.tasks, [active]);
    release.notify_one();
    assert_eq!(run.await.unwrap().unwrap(), 1);
    assert_eq!(env.info(&info.id).await.lease_expires_at, None);
}
