//! `Queue::enqueue_many`: one transaction, all or nothing. Run on SQLite and on PostgreSQL
//! (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use retry_runtime::durable::{Error, Task, TaskQuery, TaskState};
use retry_tests::durable_env::{Backend, Env, secs};

retry_tests::both_backends!(
    enqueue_many_stores_every_task_as_enqueue_would,
    a_taken_id_refuses_the_whole_batch_naming_it,
    an_id_twice_in_the_batch_refuses_it,
    a_held_unique_key_refuses_the_batch_and_an_expired_one_is_released,
    an_invalid_task_refuses_the_batch_before_anything_is_written,
    an_empty_batch_enqueues_nothing,
);

/// Enough tasks to span two statements (10 000 rows each).
const SPAN: usize = 10_500;

async fn pending_count(env: &Env) -> usize {
    env.q
        .inspector()
        .tasks(TaskQuery::new(TaskState::Pending))
        .await
        .unwrap()
        .tasks
        .len()
}

async fn enqueue_many_stores_every_task_as_enqueue_would(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-stores").await else {
        return;
    };
    let batch = (0..SPAN).map(|n| Task::new("mail", &n).task_id(format!("m-{n}")).max_retry(3));
    let later = Task::new("report", &"weekly")
        .task_id("later")
        .process_in(secs(60));
    let n = env
        .q
        .enqueue_many(batch.chain(std::iter::once(later)))
        .await
        .unwrap();
    assert_eq!(n, SPAN as u64 + 1);
    assert_eq!(pending_count(&env).await, SPAN);
    assert_eq!(env.ids(TaskState::Scheduled).await, ["later"]);
    // The counters, kept by triggers, saw every row of both statements.
    let inspector = env.q.inspector();
    assert_eq!(
        inspector.count(TaskState::Pending).await.unwrap(),
        SPAN as u64
    );
    assert_eq!(inspector.count(TaskState::Scheduled).await.unwrap(), 1);
    // Due at the same millisecond, the tasks are listed (and run) in the batch's order.
    let listed: Vec<String> = inspector
        .tasks(TaskQuery::new(TaskState::Pending))
        .await
        .unwrap()
        .tasks
        .into_iter()
        .map(|info| info.id)
        .collect();
    let expected: Vec<String> = (0..SPAN).map(|n| format!("m-{n}")).collect();
    assert!(
        listed == expected,
        "the pending tasks are not in enqueue order"
    );

    let last = env.info("m-10499").await;
    assert_eq!(last.kind, "mail");
    assert_eq!(last.payload, "10499");
    assert_eq!(last.max_retry, 3);
    assert_eq!(last.retried, 0);
    assert_eq!(last.state, TaskState::Pending);
    assert_eq!(last.enqueued_at, env.at(secs(0)));
    let later = env.info("later").await;
    assert_eq!(later.next_process_at, Some(env.at(secs(60))));

    // Tasks without an id get one each.
    let n = env
        .q
        .enqueue_many((0..3).map(|n| Task::new("anon", &n)))
        .await
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(pending_count(&env).await, SPAN + 3);
}

async fn a_taken_id_refuses_the_whole_batch_naming_it(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-taken-id").await else {
        return;
    };
    env.q
        .enqueue(Task::new("mail", &0).task_id("m-10200"))
        .await
        .unwrap();
    // The conflict sits in the second statement: the first one's rows must be rolled back.
    let batch = (0..SPAN).map(|n| Task::new("mail", &n).task_id(format!("m-{n}")));
    match env.q.enqueue_many(batch).await {
        Err(Error::BatchRefused { id, cause }) => {
            assert_eq!(id, "m-10200");
            assert!(matches!(*cause, Error::TaskIdConflict), "{cause:?}");
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    assert_eq!(env.ids(TaskState::Pending).await, ["m-10200"]);
    assert_eq!(env.info("m-10200").await.payload, "0");
    assert_eq!(
        env.q.inspector().count(TaskState::Pending).await.unwrap(),
        1
    );
}

async fn an_id_twice_in_the_batch_refuses_it(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-twice").await else {
        return;
    };
    let batch = [
        Task::new("mail", &1).task_id("a"),
        Task::new("mail", &2).task_id("b"),
        Task::new("mail", &3).task_id("a"),
    ];
    let err = env.q.enqueue_many(batch).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch refused, nothing enqueued: task \"a\": task id conflict: a task with this id \
         already exists in the queue"
    );
    assert_eq!(pending_count(&env).await, 0);
}

async fn a_held_unique_key_refuses_the_batch_and_an_expired_one_is_released(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-unique").await else {
        return;
    };
    let unique = |id: &str| Task::new("mail", &"ada").task_id(id).unique(secs(60));
    env.q.enqueue(unique("u1")).await.unwrap();

    let batch = [Task::new("mail", &"bob").task_id("b1"), unique("u2")];
    match env.q.enqueue_many(batch).await {
        Err(Error::BatchRefused { id, cause }) => {
            assert_eq!(id, "u2");
            assert!(
                matches!(&*cause, Error::DuplicateTask { id } if id == "u1"),
                "{cause:?}"
            );
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    assert_eq!(env.ids(TaskState::Pending).await, ["u1"]);

    // Twice in one batch: the second names the first.
    let err = env
        .q
        .enqueue_many([unique("v1"), unique("v2")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::BatchRefused { id, cause }
            if id == "v2" && matches!(&**cause, Error::DuplicateTask { id } if id == "v1")),
        "{err:?}"
    );

    // Once u1's uniqueness ran out, its key is released inside the batch's transaction.
    env.clock.set(env.at(secs(61)));
    let batch = [Task::new("mail", &"bob").task_id("b1"), unique("u2")];
    assert_eq!(env.q.enqueue_many(batch).await.unwrap(), 2);
    assert_eq!(env.ids(TaskState::Pending).await, ["b1", "u1", "u2"]);
}

async fn an_invalid_task_refuses_the_batch_before_anything_is_written(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-invalid").await else {
        return;
    };
    let batch = [
        Task::new("mail", &1).task_id("ok"),
        Task::new(" ", &2).task_id("blank-kind"),
    ];
    match env.q.enqueue_many(batch).await {
        Err(Error::BatchRefused { id, cause }) => {
            assert_eq!(id, "blank-kind");
            assert!(matches!(*cause, Error::Invalid(_)), "{cause:?}");
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    let big = "x".repeat(retry_runtime::durable::MAX_PAYLOAD_BYTES + 1);
    let err = env
        .q
        .enqueue_many([Task::new("mail", &big).task_id("big")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::BatchRefused { id, cause }
            if id == "big" && matches!(**cause, Error::PayloadTooLarge { .. })),
        "{err:?}"
    );
    assert_eq!(pending_count(&env).await, 0);
}

async fn an_empty_batch_enqueues_nothing(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-empty").await else {
        return;
    };
    assert_eq!(env.q.enqueue_many(Vec::new()).await.unwrap(), 0);
    assert_eq!(pending_count(&env).await, 0);
}
