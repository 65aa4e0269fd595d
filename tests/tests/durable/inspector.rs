//! The inspector of the durable queue, as an operator uses it (through the `retry-queue` CLI and
//! dashboard): pages per state in their order, counts, archiving by hand, acting on a whole
//! state, pausing a queue, failures grouped by error, and the stats of every queue. Run on
//! SQLite and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`: every stored
//! time is exact.

use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::{
    ArchiveReason, DelayRng, Error, Queue, QueueStats, SkipRetry, Task, TaskInfo, TaskQuery,
    TaskState, Worker, protocol,
};
use retry_runtime::http::StatusError;
use retry_tests::durable_env::{Backend, Env, secs, t0};

retry_tests::both_backends!(
    pages_are_one_based_and_ordered_per_state,
    task_info_carries_queue_payload_and_times,
    archive_task_archives_waiting_tasks_and_refuses_active_ones,
    run_all_and_delete_all_act_on_one_state_and_refuse_active,
    a_paused_queue_is_not_claimed_from_but_takes_enqueues,
    error_groups_put_the_most_frequent_error_first,
    stats_cover_every_queue_of_the_database_and_the_utc_day,
    try_named_refuses_what_named_would_panic_on,
    every_archive_reason_is_stored_and_read_back,
);

/// A worker of `q`: kind `ok` completes, kind `fail` fails with its payload (a string) as the
/// error, retried after the default delay with a random term of 7 (22 s before the first retry).
fn worker_for(q: &Queue) -> Worker {
    Worker::new(q.clone())
        .concurrency(16)
        .rng(DelayRng::fixed(7))
        .handle("ok", |_task| async { Ok::<(), BoxError>(()) })
        .handle("fail", |task| async move {
            let msg: String = task.payload()?;
            Err(BoxError::from(msg))
        })
}

fn ids(tasks: &[TaskInfo]) -> Vec<&str> {
    tasks.iter().map(|t| t.id.as_str()).collect()
}

/// Enqueues `task` and runs it once with `w` at the queue's current time.
async fn run_once(env: &Env, w: &Worker, task: Task) -> String {
    let id = env.q.enqueue(task).await.unwrap().id;
    assert_eq!(w.run_due().await.unwrap(), 1, "task {id} ran");
    id
}

/// A task that fails with `msg`, archived at its first failure.
fn doomed(id: &str, msg: &str) -> Task {
    Task::new("fail", &msg).task_id(id).max_retry(0)
}

async fn pages_are_one_based_and_ordered_per_state(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-pages").await else {
        return;
    };
    let w = worker_for(&env.q);

    // Completed and archived, one second apart: newest first.
    for (n, id) in ["c1", "c2", "c3"].into_iter().enumerate() {
        env.clock.set(env.at(secs(n as u64)));
        run_once(&env, &w, Task::new("ok", &n).task_id(id)).await;
    }
    for (n, id) in ["a1", "a2", "a3"].into_iter().enumerate() {
        env.clock.set(env.at(secs(10 + n as u64)));
        run_once(&env, &w, doomed(id, "gone")).await;
    }
    // Retrying: failed at 20 s, 22 s, 21 s, so due at 42 s, 44 s, 43 s: soonest first.
    for (at, id) in [(20, "r1"), (22, "r3"), (21, "r2")] {
        env.clock.set(env.at(secs(at)));
        run_once(&env, &w, Task::new("fail", &"down").task_id(id)).await;
    }
    // Scheduled out of order: soonest first.
    for (delay, id) in [(300, "s3"), (100, "s1"), (200, "s2")] {
        env.q
            .enqueue(Task::new("job", &0).task_id(id).process_in(secs(delay)))
            .await
            .unwrap();
    }
    // Pending (a kind no worker here claims): FIFO.
    for id in ["p1", "p2", "p3"] {
        env.q
            .enqueue(Task::new("job", &0).task_id(id))
            .await
            .unwrap();
        env.clock.advance(Duration::from_millis(1));
    }

    let page = |state, page, size| {
        let q = env.q.clone();
        async move {
            let query = TaskQuery::new(state).size(size).page(page);
            q.inspector().tasks(query).await.unwrap().tasks
        }
    };
    assert_eq!(ids(&page(TaskState::Completed, 1, 2).await), ["c3", "c2"]);
    assert_eq!(ids(&page(TaskState::Completed, 2, 2).await), ["c1"]);
    assert_eq!(
        ids(&page(TaskState::Completed, 3, 2).await),
        Vec::<&str>::new()
    );
    assert_eq!(
        ids(&page(TaskState::Archived, 1, 10).await),
        ["a3", "a2", "a1"]
    );
    assert_eq!(
        ids(&page(TaskState::Retry, 1, 10).await),
        ["r1", "r2", "r3"]
    );
    assert_eq!(ids(&page(TaskState::Retry, 2, 2).await), ["r3"]);
    assert_eq!(
        ids(&page(TaskState::Scheduled, 1, 10).await),
        ["s1", "s2", "s3"]
    );
    assert_eq!(ids(&page(TaskState::Pending, 1, 2).await), ["p1", "p2"]);
    assert_eq!(ids(&page(TaskState::Pending, 2, 2).await), ["p3"]);
    assert_eq!(
        ids(&page(TaskState::Active, 1, 10).await),
        Vec::<&str>::new()
    );

    for state in [TaskState::Completed, TaskState::Archived, TaskState::Retry] {
        assert_eq!(env.q.inspector().count(state).await.unwrap(), 3, "{state}");
    }
    assert_eq!(
        env.q.inspector().count(TaskState::Scheduled).await.unwrap(),
        3
    );
    assert_eq!(
        env.q.inspector().count(TaskState::Pending).await.unwrap(),
        3
    );
    assert_eq!(env.q.inspector().count(TaskState::Active).await.unwrap(), 0);

    // The claim takes the oldest due pending task: the Active tab shows it.
    let claimed = protocol::claim(&env.q, 1, secs(30)).await.unwrap();
    assert_eq!(claimed[0].id(), "p1");
    assert_eq!(ids(&page(TaskState::Active, 1, 10).await), ["p1"]);
    assert_eq!(env.q.inspector().count(TaskState::Active).await.unwrap(), 1);

    for (p, size) in [(0, 10), (1, 0)] {
        match env
            .q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Pending).size(size).page(p))
            .await
        {
            Err(Error::Invalid(why)) => assert_eq!(
                why,
                format!(
                    "pages are numbered from 1 and hold at least one task, got page {p} of size \
                     {size}"
                )
            ),
            other => panic!("page {p} of size {size}: {other:?}"),
        }
    }
    // The last page of a large size, far past the end: empty, not an error.
    assert!(
        page(TaskState::Pending, u32::MAX, u32::MAX)
            .await
            .is_empty()
    );
}

async fn task_info_carries_queue_payload_and_times(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-info").await else {
        return;
    };
    let w = worker_for(&env.q);
    let pending = env
        .q
        .enqueue(Task::new("job", &serde_json::json!({"order": 7})).task_id("p"))
        .await
        .unwrap();
    assert_eq!(pending.queue, env.q.name());
    assert_eq!(pending.payload, r#"{"order":7}"#);
    assert_eq!(pending.enqueued_at, t0());
    assert_eq!(pending.completed_at, None);

    env.clock.set(env.at(secs(5)));
    let done = run_once(&env, &w, Task::new("ok", &1).task_id("done")).await;
    let done = env.info(&done).await;
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.enqueued_at, env.at(secs(5)));
    env.clock.set(env.at(secs(9)));
    assert_eq!(done.completed_at, Some(env.at(secs(5))));

    let dead = run_once(&env, &w, doomed("dead", "no")).await;
    let dead = env.info(&dead).await;
    assert_eq!(
        (dead.state, dead.completed_at, dead.payload.as_str()),
        (TaskState::Archived, None, r#""no""#)
    );
    assert_eq!(dead.last_failed_at, Some(env.at(secs(9))));
    // Re-run, a completed task is no longer completed.
    env.q.inspector().run_task("done").await.unwrap();
    assert_eq!(env.info("done").await.completed_at, None);
}

async fn archive_task_archives_waiting_tasks_and_refuses_active_ones(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-archive").await else {
        return;
    };
    let w = worker_for(&env.q);
    env.q
        .enqueue(Task::new("job", &0).task_id("busy"))
        .await
        .unwrap();
    assert_eq!(
        protocol::claim(&env.q, 1, secs(30)).await.unwrap()[0].id(),
        "busy"
    );
    env.q
        .enqueue(Task::new("job", &0).task_id("waiting"))
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("job", &0).task_id("later").process_in(secs(600)))
        .await
        .unwrap();
    run_once(&env, &w, Task::new("fail", &"down").task_id("failing")).await;
    run_once(&env, &w, Task::new("ok", &0).task_id("done")).await;

    assert!(matches!(
        env.q.inspector().archive_task("busy").await,
        Err(Error::TaskActive)
    ));
    assert!(matches!(
        env.q.inspector().archive_task("nope").await,
        Err(Error::TaskNotFound)
    ));
    match env.q.inspector().archive_task("done").await {
        Err(Error::Invalid(why)) => assert_eq!(
            why,
            "task \"done\" completed: only a pending, scheduled or retry task can be archived"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(env.info("busy").await.state, TaskState::Active);
    assert_eq!(env.info("done").await.state, TaskState::Completed);

    env.clock.set(env.at(secs(3)));
    for id in ["waiting", "later", "failing"] {
        env.q.inspector().archive_task(id).await.unwrap();
        let info = env.info(id).await;
        assert_eq!(
            (info.state, info.next_process_at),
            (TaskState::Archived, None),
            "{id}"
        );
    }
    // History kept.
    let failing = env.info("failing").await;
    assert_eq!(
        (failing.retried, failing.last_err.as_deref()),
        (1, Some("down"))
    );
    assert_eq!(failing.last_failed_at, Some(t0()));
    // Archiving it again changes nothing.
    env.clock.set(env.at(secs(4)));
    env.q.inspector().archive_task("failing").await.unwrap();
    assert_eq!(env.info("failing").await, failing);
    // Archived by hand at 3 s, in archive order, all three at the same millisecond: the last
    // enqueued first.
    assert_eq!(
        ids(&env
            .q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Archived).size(10))
            .await
            .unwrap()
            .tasks),
        ["failing", "later", "waiting"]
    );
    // No worker runs an archived task.
    env.clock.set(env.at(secs(3600)));
    assert_eq!(w.run_due().await.unwrap(), 0);

    // The archive limits hold for archiving by hand too.
    let small = env.q.clone().archive_limits(2, secs(90 * 24 * 3600));
    small
        .enqueue(Task::new("job", &0).task_id("fourth"))
        .await
        .unwrap();
    small.inspector().archive_task("fourth").await.unwrap();
    assert_eq!(
        ids(&env
            .q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Archived).size(10))
            .await
            .unwrap()
            .tasks),
        ["fourth", "failing"]
    );
}

async fn run_all_and_delete_all_act_on_one_state_and_refuse_active(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-bulk").await else {
        return;
    };
    let w = worker_for(&env.q);
    env.q
        .enqueue(Task::new("job", &0).task_id("busy"))
        .await
        .unwrap();
    protocol::claim(&env.q, 1, secs(30)).await.unwrap();
    run_once(&env, &w, doomed("a1", "gone")).await;
    run_once(&env, &w, doomed("a2", "gone")).await;
    run_once(&env, &w, Task::new("fail", &"down").task_id("r1")).await;
    run_once(&env, &w, Task::new("ok", &0).task_id("c1")).await;
    env.q
        .enqueue(Task::new("job", &0).task_id("s1").process_in(secs(600)))
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("job", &0).task_id("p1"))
        .await
        .unwrap();

    for state in [TaskState::Active, TaskState::Pending] {
        match env.q.inspector().run_all(state).await {
            Err(Error::Invalid(why)) => assert_eq!(
                why,
                format!(
                    "cannot run all {state} tasks: only scheduled, retry, archived and \
                     completed tasks can be run"
                )
            ),
            other => panic!("{state}: {other:?}"),
        }
    }
    match env.q.inspector().delete_all(TaskState::Active).await {
        Err(Error::Invalid(why)) => assert_eq!(
            why,
            "cannot delete all active tasks: workers hold them; wait for their attempts to end"
        ),
        other => panic!("{other:?}"),
    }

    env.clock.set(env.at(secs(7)));
    assert_eq!(
        env.q
            .inspector()
            .run_all(TaskState::Archived)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        env.q.inspector().count(TaskState::Archived).await.unwrap(),
        0
    );
    for id in ["a1", "a2"] {
        let info = env.info(id).await;
        assert_eq!(
            (info.state, info.next_process_at, info.last_err.as_deref()),
            (
                TaskState::Pending,
                Some(env.at(secs(7))),
                Some("gone (retries exhausted: 0 of 0)")
            )
        );
    }
    assert_eq!(
        env.q
            .inspector()
            .run_all(TaskState::Archived)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        env.q.inspector().run_all(TaskState::Retry).await.unwrap(),
        1
    );
    assert_eq!(
        env.q
            .inspector()
            .run_all(TaskState::Completed)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        env.q
            .inspector()
            .run_all(TaskState::Scheduled)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        env.q.inspector().count(TaskState::Pending).await.unwrap(),
        6
    );

    assert_eq!(
        env.q
            .inspector()
            .delete_all(TaskState::Pending)
            .await
            .unwrap(),
        6
    );
    assert_eq!(
        env.q
            .inspector()
            .delete_all(TaskState::Pending)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        env.q.inspector().count(TaskState::Active).await.unwrap(),
        1,
        "busy kept"
    );

    run_once(&env, &w, Task::new("ok", &0).task_id("c2")).await;
    assert_eq!(
        env.q
            .inspector()
            .delete_all(TaskState::Retry)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        env.q
            .inspector()
            .delete_all(TaskState::Completed)
            .await
            .unwrap(),
        1
    );
    assert!(env.q.inspector().get("c2").await.unwrap().is_none());
}

async fn a_paused_queue_is_not_claimed_from_but_takes_enqueues(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-pause").await else {
        return;
    };
    let other = env.q.clone().named(format!("{}-other", env.q.name()));
    let w = worker_for(&env.q);
    let w_other = worker_for(&other);
    env.q
        .enqueue(Task::new("ok", &0).task_id("before"))
        .await
        .unwrap();
    other.enqueue(Task::new("ok", &0)).await.unwrap();

    assert!(!env.q.inspector().is_paused().await.unwrap());
    env.q.inspector().pause().await.unwrap();
    env.q.inspector().pause().await.unwrap(); // twice is fine
    assert!(env.q.inspector().is_paused().await.unwrap());
    assert!(!other.inspector().is_paused().await.unwrap());

    env.clock.set(env.at(secs(60)));
    assert_eq!(w.run_due().await.unwrap(), 0, "paused: nothing claimed");
    assert!(
        protocol::claim(&env.q, 10, secs(30))
            .await
            .unwrap()
            .is_empty()
    );
    let during = env
        .q
        .enqueue(Task::new("ok", &0).task_id("during"))
        .await
        .unwrap();
    assert_eq!(during.state, TaskState::Pending);
    assert_eq!(w_other.run_due().await.unwrap(), 1, "other queues run on");

    env.q.inspector().unpause().await.unwrap();
    env.q.inspector().unpause().await.unwrap();
    assert!(!env.q.inspector().is_paused().await.unwrap());
    assert_eq!(w.run_due().await.unwrap(), 2);
    for id in ["before", "during"] {
        assert_eq!(env.info(id).await.state, TaskState::Completed);
    }
}

async fn error_groups_put_the_most_frequent_error_first(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-errors").await else {
        return;
    };
    let w = worker_for(&env.q);
    for (at, msg) in [
        (0, "gateway down"),
        (5, "timeout"),
        (10, "gateway down"),
        (20, "gateway down"),
        (21, "timeout"),
        (2, "refused"),
    ] {
        env.clock.set(env.at(secs(at)));
        run_once(&env, &w, Task::new("fail", &msg)).await;
    }
    // Still at 2 s: no retry is due yet (the first one is at 22 s).
    run_once(&env, &w, doomed("dead", "bad request")).await;
    // A task with no error (never failed) is in no group.
    env.q.enqueue(Task::new("job", &0)).await.unwrap();

    // `ErrorGroup` is `#[non_exhaustive]`: the expected groups are built on one read.
    let retrying = env
        .q
        .inspector()
        .error_groups(TaskState::Retry)
        .await
        .unwrap();
    assert!(!retrying.is_empty());
    assert_eq!(
        retrying,
        [
            retry_tests::with_fields!(retrying[0].clone(), {
                last_err: "gateway down".into(),
                count: 3,
                oldest: t0(),
                newest: env.at(secs(20)),
            }),
            retry_tests::with_fields!(retrying[0].clone(), {
                last_err: "timeout".into(),
                count: 2,
                oldest: env.at(secs(5)),
                newest: env.at(secs(21)),
            }),
            retry_tests::with_fields!(retrying[0].clone(), {
                last_err: "refused".into(),
                count: 1,
                oldest: env.at(secs(2)),
                newest: env.at(secs(2)),
            }),
        ]
    );
    let archived = env
        .q
        .inspector()
        .error_groups(TaskState::Archived)
        .await
        .unwrap();
    assert!(!archived.is_empty());
    assert_eq!(
        archived,
        [retry_tests::with_fields!(archived[0].clone(), {
            last_err: "bad request (retries exhausted: 0 of 0)".into(),
            count: 1,
            oldest: env.at(secs(2)),
            newest: env.at(secs(2)),
        })]
    );
    assert!(
        env.q
            .inspector()
            .error_groups(TaskState::Pending)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn stats_cover_every_queue_of_the_database_and_the_utc_day(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-stats").await else {
        return;
    };
    let name = env.q.name().to_owned();
    let paused = env.q.clone().named(format!("{name}-b"));
    let later = env.q.clone().named(format!("{name}-c"));
    let w = worker_for(&env.q);

    env.q.enqueue(Task::new("job", &0)).await.unwrap();
    env.clock.set(env.at(secs(10)));
    env.q.enqueue(Task::new("job", &0)).await.unwrap();
    run_once(&env, &w, Task::new("ok", &0)).await;
    run_once(&env, &w, doomed("dead", "no")).await;
    run_once(&env, &w, Task::new("fail", &"down")).await;
    paused.inspector().pause().await.unwrap();
    later
        .enqueue(Task::new("job", &0).process_in(secs(3600)))
        .await
        .unwrap();
    env.clock.set(env.at(secs(70)));

    let ours = |all: Vec<QueueStats>| -> Vec<QueueStats> {
        all.into_iter()
            .filter(|s| s.queue.starts_with(&name))
            .collect()
    };
    // `QueueStats` is `#[non_exhaustive]`: the expected rows are built on one read.
    let got = ours(later.inspector().stats().await.unwrap());
    let base = got.first().cloned().expect("our queues");
    let mut expected = vec![
        retry_tests::with_fields!(base.clone(), {
            queue: name.clone(),
            pending: 2,
            scheduled: 0,
            active: 0,
            retry: 1,
            archived: 1,
            completed: 1,
            paused: false,
            // Three attempts finished today (asynq's "processed"), two of them failed.
            processed_today: 3,
            failed_today: 2,
            oldest_pending_age: Some(secs(70)),
        }),
        retry_tests::with_fields!(base.clone(), {
            queue: format!("{name}-b"),
            pending: 0,
            scheduled: 0,
            active: 0,
            retry: 0,
            archived: 0,
            completed: 0,
            paused: true,
            processed_today: 0,
            failed_today: 0,
            oldest_pending_age: None,
        }),
        retry_tests::with_fields!(base.clone(), {
            queue: format!("{name}-c"),
            pending: 0,
            scheduled: 1,
            active: 0,
            retry: 0,
            archived: 0,
            completed: 0,
            paused: false,
            processed_today: 0,
            failed_today: 0,
            oldest_pending_age: None,
        }),
    ];
    // Any handle of the database reads all queues.
    assert_eq!(got, expected);
    assert_eq!(expected[0].count(TaskState::Pending), 2);
    assert_eq!(expected[2].count(TaskState::Scheduled), 1);
    assert_eq!(expected[0].count(TaskState::Archived), 1);

    // t0 is 22:13:20 UTC: the day ends 6400 s later. 1 ms before, it is still today.
    env.clock.set(env.at(secs(6400)) - Duration::from_millis(1));
    assert_eq!(
        ours(env.q.inspector().stats().await.unwrap())[0].processed_today,
        3
    );
    env.clock.set(env.at(secs(6400)));
    expected[0].processed_today = 0;
    expected[0].failed_today = 0;
    expected[0].oldest_pending_age = Some(secs(6400));
    assert_eq!(ours(env.q.inspector().stats().await.unwrap()), expected);

    // Unpaused and empty: no longer listed.
    paused.inspector().unpause().await.unwrap();
    expected.remove(1);
    assert_eq!(ours(env.q.inspector().stats().await.unwrap()), expected);
}

async fn try_named_refuses_what_named_would_panic_on(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-names").await else {
        return;
    };
    let named = env.q.clone().try_named("emails").unwrap();
    assert_eq!(named.name(), "emails");
    for (name, len) in [(String::new(), 0), ("q".repeat(1025), 1025)] {
        match env.q.clone().try_named(name) {
            Err(Error::Invalid(why)) => {
                assert_eq!(
                    why,
                    format!("a queue name is 1 to 1024 bytes, got {len} bytes")
                )
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        env.q
            .clone()
            .try_named("q".repeat(1024))
            .unwrap()
            .name()
            .len(),
        1024
    );
}

#[test]
fn task_states_parse_from_their_names_only() {
    for state in TaskState::ALL {
        assert_eq!(state.as_str().parse::<TaskState>().unwrap(), state);
    }
    for bad in ["Retry", "retrying", "", " retry"] {
        match bad.parse::<TaskState>().map_err(Error::from) {
            Err(Error::Invalid(why)) => assert_eq!(
                why,
                format!(
                    "unknown task state {bad:?}: expected one of pending, scheduled, active, \
                     retry, archived, completed"
                )
            ),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

/// Each way into the archive stores its reason (schema version 5), and the task shows it while
/// archived: the failure path's seven, the operator's archive and cancel. A task out of the
/// archive again shows none.
async fn every_archive_reason_is_stored_and_read_back(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-reasons").await else {
        return;
    };
    let w = worker_for(&env.q)
        .handle("skip", |_task| async {
            Err::<(), BoxError>(SkipRetry::new("card blocked").into())
        })
        .handle("gone", |_task| async {
            Err::<(), BoxError>(StatusError::new(404, None).into())
        })
        .handle("denied", |_task| async {
            let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
            Err::<(), BoxError>(denied.into())
        })
        .handle("count", |task| async move {
            let _: u64 = task.payload()?;
            Ok::<(), BoxError>(())
        });
    // The first retry would come 22 s after the failure (`worker_for`'s delay).
    let late = Task::new("fail", &"down").task_id("late");
    let keyed = Task::new("fail", &"down").task_id("keyed");
    for task in [
        Task::new("skip", &0).task_id("skipped"),
        Task::new("count", &"seven").task_id("undecodable"),
        Task::new("gone", &0).task_id("not-found"),
        Task::new("denied", &0).task_id("denied"),
        doomed("spent", "down"),
        keyed.key_ttl(secs(10)),
        late.deadline(env.at(secs(10))),
        Task::new("fail", &"down").task_id("retrying"),
    ] {
        run_once(&env, &w, task).await;
    }
    for id in ["by-hand", "canceled"] {
        env.q
            .enqueue(Task::new("job", &0).task_id(id))
            .await
            .unwrap();
    }
    env.q.inspector().archive_task("by-hand").await.unwrap();
    env.q.inspector().cancel_task("canceled").await.unwrap();

    let expected = [
        ("skipped", ArchiveReason::SkipRetry),
        ("undecodable", ArchiveReason::BadTask),
        ("not-found", ArchiveReason::ClientError),
        ("denied", ArchiveReason::Permanent),
        ("spent", ArchiveReason::Exhausted),
        ("keyed", ArchiveReason::KeyExpired),
        ("late", ArchiveReason::Deadline),
        ("by-hand", ArchiveReason::Operator),
        ("canceled", ArchiveReason::Canceled),
    ];
    for (id, reason) in expected {
        let info = env.info(id).await;
        assert_eq!(
            (info.state, info.archive_reason),
            (TaskState::Archived, Some(reason)),
            "{id}: {:?}",
            info.last_err
        );
    }
    let stored: std::collections::BTreeSet<_> = expected.iter().map(|(_, r)| *r).collect();
    assert_eq!(
        stored.len(),
        ArchiveReason::STORED.len(),
        "every stored reason once"
    );
    // Not archived: no reason. Out of the archive again: none either.
    assert_eq!(env.info("retrying").await.state, TaskState::Retry);
    assert_eq!(env.info("retrying").await.archive_reason, None);
    env.q.inspector().run_task("spent").await.unwrap();
    let spent = env.info("spent").await;
    assert_eq!(
        (spent.state, spent.archive_reason),
        (TaskState::Pending, None)
    );
    // The page of archived tasks carries the reasons too.
    let page = env
        .q
        .inspector()
        .tasks(TaskQuery::new(TaskState::Archived).size(20))
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), expected.len() - 1);
    assert!(page.tasks.iter().all(|t| t.archive_reason.is_some()));
}
