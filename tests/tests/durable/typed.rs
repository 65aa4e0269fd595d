//! Typed tasks: a payload type names its kind once (`TaskKind`), `Task::of` and
//! `Queue::hand_over_of` enqueue under it, and `Worker::handle_typed` hands the handler the
//! decoded payload; a payload that does not decode is archived at once, never retried. Run on
//! SQLite and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`.

use std::sync::{Arc, Mutex};

use retry_runtime::durable::{SystemLimit, Task, TaskKind, TaskState};
use retry_runtime::{BoxError, declare_system};
use retry_tests::durable_env::{Backend, Env, worker};

retry_tests::both_backends!(
    a_typed_handler_receives_the_decoded_payload_of_its_kind,
    a_payload_that_does_not_decode_is_archived_after_one_run,
    hand_over_of_enqueues_under_the_types_kind_and_key,
    typed_tasks_carry_their_kinds_system_and_its_limit_applies,
    handle_typed_maps_the_kind_to_its_system,
);

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Charge {
    order: u64,
    cents: u64,
}

impl TaskKind for Charge {
    const KIND: &'static str = "charge";
}

/// A worker whose typed handler of `Charge` records what it received.
fn recording(env: &Env, seen: &Arc<Mutex<Vec<Charge>>>) -> retry_runtime::durable::Worker {
    let seen = seen.clone();
    worker(env).handle_typed(move |charge: Charge, _task| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(charge);
            Ok::<(), BoxError>(())
        }
    })
}

async fn a_typed_handler_receives_the_decoded_payload_of_its_kind(backend: Backend) {
    let Some(env) = Env::new(backend, "typed-ok").await else {
        return;
    };
    let charge = Charge {
        order: 7,
        cents: 1250,
    };
    let info = env.q.enqueue(Task::of(&charge)).await.unwrap();
    assert_eq!(info.kind, "charge");

    let seen = Arc::new(Mutex::new(Vec::new()));
    let ran = recording(&env, &seen).run_due().await.unwrap();

    assert_eq!(ran, 1);
    assert_eq!(*seen.lock().unwrap(), vec![charge]);
    assert_eq!(env.info(&info.id).await.state, TaskState::Completed);
}

async fn a_payload_that_does_not_decode_is_archived_after_one_run(backend: Backend) {
    let Some(env) = Env::new(backend, "typed-bad").await else {
        return;
    };
    // The right kind, written by hand with a payload of another shape.
    let info = env
        .q
        .enqueue(Task::new("charge", &"not a charge"))
        .await
        .unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    recording(&env, &seen).run_due().await.unwrap();

    assert!(seen.lock().unwrap().is_empty());
    let after = env.info(&info.id).await;
    assert_eq!(after.state, TaskState::Archived);
    assert_eq!(after.retried, 0);
    let last_err = after.last_err.unwrap();
    assert!(
        last_err.starts_with("the payload of this \"charge\" task does not decode as "),
        "{last_err}"
    );
    assert!(last_err.contains("Charge"), "{last_err}");
}

async fn hand_over_of_enqueues_under_the_types_kind_and_key(backend: Backend) {
    let Some(env) = Env::new(backend, "typed-hand-over").await else {
        return;
    };
    let charge = Charge {
        order: 8,
        cents: 990,
    };
    let key = "order-8-charge".to_owned();
    let info = env.q.hand_over_of(&charge, &key).await.unwrap();
    assert_eq!(info.kind, "charge");
    // The same key again: the queue refuses the duplicate.
    assert!(env.q.hand_over_of(&charge, &key).await.is_err());

    let seen = Arc::new(Mutex::new(Vec::new()));
    recording(&env, &seen).run_due().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![charge]);
}

/// A kind whose tasks call the system "partner" (issue 40, item 6).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct PartnerCall {
    n: u64,
}

impl TaskKind for PartnerCall {
    const KIND: &'static str = "partner-call";
    const SYSTEM: Option<&'static str> = Some("partner");
}

/// `Task::of` and `hand_over_of` store the kind's system; a worker limiting "partner" to one
/// task at a time then claims one of them per round, though it has four slots and handles the
/// kind untyped (so only the stored system can tell).
async fn typed_tasks_carry_their_kinds_system_and_its_limit_applies(backend: Backend) {
    let Some(env) = Env::new(backend, "typed-system").await else {
        return;
    };
    let of = env
        .q
        .enqueue(Task::of(&PartnerCall { n: 1 }))
        .await
        .unwrap();
    let key = "partner-call-2".to_owned();
    let handed = env
        .q
        .hand_over_of(&PartnerCall { n: 2 }, &key)
        .await
        .unwrap();
    assert_eq!(of.system.as_deref(), Some("partner"));
    assert_eq!(handed.system.as_deref(), Some("partner"));

    let w = worker(&env)
        .limit(declare_system("partner"), SystemLimit::new().concurrency(1))
        .handle(PartnerCall::KIND, |_task| async { Ok::<(), BoxError>(()) });
    assert_eq!(w.run_due().await.unwrap(), 1, "the limit of one applies");
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(w.run_due().await.unwrap(), 0);
    assert_eq!(env.ids(TaskState::Completed).await.len(), 2);
}

/// `handle_typed` maps the kind to its system: a task of the kind enqueued by name, without a
/// system, is held to the system's limit too.
async fn handle_typed_maps_the_kind_to_its_system(backend: Backend) {
    let Some(env) = Env::new(backend, "typed-system-of").await else {
        return;
    };
    for n in 0..2 {
        let task = Task::new(PartnerCall::KIND, &PartnerCall { n });
        assert_eq!(env.q.enqueue(task).await.unwrap().system, None);
    }
    let w = worker(&env)
        .limit(declare_system("partner"), SystemLimit::new().concurrency(1))
        .handle_typed(|_call: PartnerCall, _task| async { Ok::<(), BoxError>(()) });
    assert_eq!(w.run_due().await.unwrap(), 1, "the limit of one applies");
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.ids(TaskState::Completed).await.len(), 2);
}
