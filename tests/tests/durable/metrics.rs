//! The durable queue's metrics (feature `metrics`), read from the debugging recorder of this test
//! binary (`recorder.rs`): `retry_queue_processed_total{queue, kind, outcome}`,
//! `retry_queue_pickup_delay_seconds{queue}` and `retry_queue_tasks{queue, state}`. Run on
//! SQLite and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`); each test reads only its own queue's
//! series.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::recorder::{self, Value};
use retry_runtime::BoxError;
use retry_runtime::durable::{Snooze, Task, TaskState, Worker, protocol};
use retry_tests::durable_env::{Backend, Env, secs, worker};

retry_tests::both_backends!(
    outcomes_are_counted_per_queue_kind_and_outcome,
    pickup_delay_is_due_to_claim_by_the_queue_clock,
    task_gauges_follow_the_table_on_each_maintenance_tick,
    a_snooze_is_counted_as_its_own_outcome,
);

/// The series of metric `name` whose `queue` label is `queue`, by their other labels
/// (`"kind=charge,outcome=completed"`).
fn series(name: &str, queue: &str) -> BTreeMap<String, Value> {
    recorder::series(name)
        .into_iter()
        .filter(|(labels, _)| labels.get("queue").map(String::as_str) == Some(queue))
        .map(|(labels, value)| {
            let rest = labels
                .iter()
                .filter(|(k, _)| *k != "queue")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            (rest, value)
        })
        .collect()
}

fn counters(queue: &str) -> BTreeMap<String, u64> {
    series("retry_queue_processed_total", queue)
        .into_iter()
        .map(|(labels, value)| match value {
            Value::Counter(n) => (labels, n),
            other => panic!("{labels}: {other:?}"),
        })
        .collect()
}

async fn outcomes_are_counted_per_queue_kind_and_outcome(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "metrics-outcomes").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let count = runs.clone();
    // `charge`: payload "ok" completes; "limited" is no failure (not counted); anything else
    // fails and is retried, or archived when its retries are spent.
    let w = worker(&env)
        .concurrency(8)
        .handle("charge", move |task| {
            count.fetch_add(1, Ordering::SeqCst);
            async move {
                let msg: String = task.payload()?;
                if msg == "ok" {
                    Ok(())
                } else {
                    Err(BoxError::from(msg))
                }
            }
        })
        .handle("email", |_task| async { Ok::<(), BoxError>(()) })
        .is_failure(|e| e.to_string() != "limited");
    for msg in ["ok", "ok", "down", "limited"] {
        env.q.enqueue(Task::new("charge", &msg)).await.unwrap();
    }
    env.q
        .enqueue(Task::new("charge", &"down").max_retry(0))
        .await
        .unwrap();
    env.q.enqueue(Task::new("email", &0)).await.unwrap();
    assert_eq!(w.run_due().await.unwrap(), 6);

    let name = env.q.name();
    let expected: BTreeMap<String, u64> = [
        ("kind=charge,outcome=archived", 1),
        ("kind=charge,outcome=completed", 2),
        ("kind=charge,outcome=deferred", 0),
        ("kind=charge,outcome=not_failure", 1),
        ("kind=charge,outcome=retried", 1),
        ("kind=charge,outcome=snoozed", 0),
        ("kind=charge,outcome=throttled", 0),
        ("kind=email,outcome=archived", 0),
        ("kind=email,outcome=completed", 1),
        ("kind=email,outcome=deferred", 0),
        ("kind=email,outcome=not_failure", 0),
        ("kind=email,outcome=retried", 0),
        ("kind=email,outcome=snoozed", 0),
        ("kind=email,outcome=throttled", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counters(name), expected);

    // A task claimed outside the worker and failed through Worker::fail counts too, and so
    // does one whose lease the recoverer finds expired (a kind this worker has no handler for).
    env.q
        .enqueue(Task::new("report", &0).task_id("r"))
        .await
        .unwrap();
    let claimed = protocol::claim(&env.q, 1, secs(30)).await.unwrap();
    assert!(w.fail(&claimed[0], BoxError::from("boom")).await.unwrap());
    env.q
        .enqueue(Task::new("report", &0).task_id("lost").max_retry(0))
        .await
        .unwrap();
    assert_eq!(
        protocol::claim(&env.q, 1, secs(30)).await.unwrap()[0].id(),
        "lost"
    );
    env.clock.advance(secs(31));
    assert_eq!(w.recover_expired().await.unwrap(), 1);
    let counted = counters(name);
    assert_eq!(counted["kind=report,outcome=retried"], 1);
    assert_eq!(counted["kind=report,outcome=archived"], 1);
    assert_eq!(counted["kind=charge,outcome=completed"], 2, "unchanged");

    // A fenced-off write counts nothing: in a queue of its own, a task whose lease expired
    // and was recovered (one retry counted) is then failed late by its first claimant.
    let fenced = env.q.clone().named(format!("{name}-fenced"));
    let w2 = Worker::new(fenced.clone()).handle("email", |_task| async { Ok::<(), BoxError>(()) });
    fenced.enqueue(Task::new("report", &0)).await.unwrap();
    let first = protocol::claim(&fenced, 1, secs(30)).await.unwrap();
    env.clock.advance(secs(31));
    assert_eq!(w2.recover_expired().await.unwrap(), 1);
    assert!(!w2.fail(&first[0], BoxError::from("late")).await.unwrap());
    // The handler's kind is registered at zero; the recovered kind when counted.
    let expected: BTreeMap<String, u64> = [
        ("kind=email,outcome=archived", 0),
        ("kind=email,outcome=completed", 0),
        ("kind=email,outcome=deferred", 0),
        ("kind=email,outcome=not_failure", 0),
        ("kind=email,outcome=retried", 0),
        ("kind=email,outcome=snoozed", 0),
        ("kind=email,outcome=throttled", 0),
        ("kind=report,outcome=retried", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counters(fenced.name()), expected, "the recovery only");
    assert_eq!(runs.load(Ordering::SeqCst), 5);
}

async fn pickup_delay_is_due_to_claim_by_the_queue_clock(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "metrics-pickup").await else {
        return;
    };
    let w = worker(&env).handle("email", |_task| async { Ok::<(), BoxError>(()) });
    env.q.enqueue(Task::new("email", &1)).await.unwrap(); // due at 0
    env.q
        .enqueue(Task::new("email", &2).process_in(secs(10)))
        .await
        .unwrap(); // due at 10
    env.clock.advance(Duration::from_millis(25_500));
    assert_eq!(w.run_due().await.unwrap(), 2);
    let name = env.q.name();
    let mut delays = match series("retry_queue_pickup_delay_seconds", name).remove("") {
        Some(Value::Histogram(values)) => values,
        other => panic!("{other:?}"),
    };
    delays.sort_by(f64::total_cmp);
    assert_eq!(delays, [15.5, 25.5]);
}

async fn task_gauges_follow_the_table_on_each_maintenance_tick(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "metrics-gauges").await else {
        return;
    };
    let (release, released) = tokio::sync::watch::channel(false);
    // No prefetch: the one slot is the only task active (a prefetched task is active too).
    let w = Worker::new(env.q.clone())
        .concurrency(1)
        .prefetch(0)
        .poll_interval(Duration::from_millis(10))
        .recover_interval(Duration::from_millis(20))
        .handle("slow", move |_task| {
            let mut released = released.clone();
            async move {
                released.wait_for(|r| *r).await.ok();
                Ok::<(), BoxError>(())
            }
        });
    let held = env.q.enqueue(Task::new("slow", &0)).await.unwrap().id;
    env.q.enqueue(Task::new("slow", &1)).await.unwrap();
    env.q
        .enqueue(Task::new("slow", &2).process_in(secs(600)))
        .await
        .unwrap();
    env.q.enqueue(Task::new("other", &3)).await.unwrap();
    env.q.enqueue(Task::new("other", &4)).await.unwrap();
    env.q
        .inspector()
        .archive_task(&env.q.enqueue(Task::new("other", &5)).await.unwrap().id)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(w.run_until(async {
        stopped.await.ok();
    }));
    env.wait_for(&held, TaskState::Active).await;

    let name = env.q.name().to_owned();
    let gauges = || {
        series("retry_queue_tasks", &name)
            .into_iter()
            .map(|(labels, value)| match value {
                Value::Gauge(g) => (labels, g),
                other => panic!("{labels}: {other:?}"),
            })
            .collect::<BTreeMap<String, f64>>()
    };
    let expect = |pending: f64, active: f64, completed: f64| -> BTreeMap<String, f64> {
        [
            ("state=active", active),
            ("state=archived", 1.0),
            ("state=completed", completed),
            ("state=pending", pending),
            ("state=retry", 0.0),
            ("state=scheduled", 1.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    };
    // One slot: one `slow` task active, the other pending with the two `other` tasks.
    let mut seen = BTreeMap::new();
    for _ in 0..500 {
        seen = gauges();
        if seen == expect(3.0, 1.0, 0.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen, expect(3.0, 1.0, 0.0));

    release.send(true).unwrap();
    for _ in 0..500 {
        seen = gauges();
        if seen == expect(2.0, 0.0, 2.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen, expect(2.0, 0.0, 2.0));
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

async fn a_snooze_is_counted_as_its_own_outcome(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "metrics-snooze").await else {
        return;
    };
    let w = worker(&env).handle("settle", |_task| async {
        Err::<(), BoxError>(Snooze::new(secs(60)).into())
    });
    env.q.enqueue(Task::new("settle", &1)).await.unwrap();
    env.q.enqueue(Task::new("settle", &2)).await.unwrap();
    assert_eq!(w.run_due().await.unwrap(), 2);
    let expected: BTreeMap<String, u64> = [
        ("kind=settle,outcome=archived", 0),
        ("kind=settle,outcome=completed", 0),
        ("kind=settle,outcome=deferred", 0),
        ("kind=settle,outcome=not_failure", 0),
        ("kind=settle,outcome=retried", 0),
        ("kind=settle,outcome=snoozed", 2),
        ("kind=settle,outcome=throttled", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counters(env.q.name()), expected);
}
