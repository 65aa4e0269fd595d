//! Issue 44, item 2: a worker reports its last health probe of each system it knows on its
//! heartbeat (`retry_worker_systems`, migration 6), and the operator's systems view shows it
//! (`Inspector::systems`, `SystemInfo::probe`): worst-of across the workers, the error bounded,
//! none for a system without a probe, and none for a row a build of version 5 wrote. And a
//! worker whose process has a fresh failing probe of a system does not take the queue's shared
//! probe of it (`retry_breakers` past its open time): no user task is the probe while the
//! health probe says the system is down. SQLite, PostgreSQL and PgBouncer; the queue on a
//! `ManualClock`, waits bounded by `poll_until`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use retry_runtime::durable::{SystemInfo, SystemLimit, Task, TaskState};
use retry_runtime::health;
use retry_runtime::{Breaker, BreakerState, declare_system};
use retry_tests::durable_env::{Backend, Env, poll_until, secs, start, worker};

retry_tests::both_backends!(
    a_worker_reports_its_last_probe_of_each_system_on_its_heartbeat,
    a_failing_probe_keeps_the_worker_from_taking_the_queues_shared_probe,
);

/// Runs `sql` on the test's database, outside the queue (a build of version 5's statement).
async fn raw(env: &Env, sql: &str) {
    if env.url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&env.url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(env.direct_url()).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
}

async fn view(env: &Env, system: &str) -> Option<SystemInfo> {
    let systems = env.q.inspector().systems().await.unwrap();
    systems.into_iter().find(|s| s.system == system)
}

async fn a_worker_reports_its_last_probe_of_each_system_on_its_heartbeat(backend: Backend) {
    // The probes are per process: one system per backend, the test binary runs them at once.
    let (probed, plain) = match backend {
        Backend::Sqlite => ("probed-sqlite", "plain-sqlite"),
        Backend::Postgres => ("probed-postgres", "plain-postgres"),
        Backend::PgBouncer => ("probed-pgbouncer", "plain-pgbouncer"),
    };
    let Some(env) = Env::new(backend, "probes-reported").await else {
        return;
    };
    let up = Arc::new(AtomicBool::new(false));
    let seen = up.clone();
    // 300 characters, the last ones multi-byte: the report keeps 200, the last one `…`.
    let long_error = format!("partner refused: {}", "é".repeat(283));
    let error = long_error.clone();
    let probe = health::probe(
        declare_system(probed),
        Duration::from_millis(20),
        move || {
            let (up, error) = (seen.load(Ordering::SeqCst), error.clone());
            async move { if up { Ok(()) } else { Err(error) } }
        },
    )
    .unwrap();
    let w = worker(&env)
        .handle("charge", |_task| async {
            Ok::<(), retry_runtime::BoxError>(())
        })
        .limit(declare_system(probed), SystemLimit::new())
        .limit(declare_system(plain), SystemLimit::new())
        .heartbeat_interval(Duration::from_millis(30));
    let (stop, running) = start(w);

    let within = Duration::from_secs(30);
    let every = Duration::from_millis(10);
    let failed = poll_until("the failed probe reported", within, every, || async {
        view(&env, probed).await?.probe.filter(|p| !p.passed)
    })
    .await;
    let error = failed.error.clone().expect("a failed probe's error");
    assert_eq!(error.chars().count(), 200, "{error}");
    assert!(error.starts_with("partner refused: éé"), "{error}");
    assert!(error.ends_with('…'), "{error}");
    assert_eq!((failed.workers, failed.failed), (1, 1));
    // Its age is the probe's on the runtime's clock when the beat wrote it: a few intervals.
    println!("reported age of the failed probe: {} ms", failed.age_ms);
    assert!(failed.age_ms < 10_000, "{failed:?}");
    // A system the worker knows without a probe: reported, its probe none.
    let plain_view = poll_until("the plain system reported", within, every, || async {
        view(&env, plain).await.filter(|s| s.workers == 1)
    })
    .await;
    assert_eq!(plain_view.probe, None);
    assert_eq!(plain_view.breaker.as_deref(), Some("closed"));

    // The partner is back: the next beats report the pass, without an error.
    up.store(true, Ordering::SeqCst);
    let passed = poll_until("the passing probe reported", within, every, || async {
        view(&env, probed).await?.probe.filter(|p| p.passed)
    })
    .await;
    assert_eq!((passed.error, passed.workers, passed.failed), (None, 1, 0));

    // A row of a build of version 5 (no probe columns in its statement) beside it: counted as a
    // worker, without a probe; the probe of the worker that has one still shows.
    // The queue's clock stands at the start: the test never advances it.
    let now_ms = env
        .at(secs(0))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let queues = serde_json::to_string(&[&env.name]).unwrap();
    let queues = queues.replace('\'', "''");
    // Named after the queue: on PostgreSQL the tests share one database, and the manual clock
    // never makes the row stale; the test deletes it at the end.
    let v5_worker = format!("v5-{}", env.name).replace('\'', "''");
    raw(
        &env,
        &format!(
            "INSERT INTO retry_worker_systems (worker, system, queues, held, rate_milli, \
             ramping, breaker, heartbeat_ms, stale_ms) \
             VALUES ('{v5_worker}', '{probed}', '{queues}', 0, NULL, 0, 'closed', {now_ms}, {})",
            now_ms + secs(3600).as_millis() as i64
        ),
    )
    .await;
    let both = poll_until("two workers reporting", within, every, || async {
        view(&env, probed).await.filter(|s| s.workers == 2)
    })
    .await;
    let probe_info = both.probe.expect("the probing worker's report");
    assert_eq!(
        (probe_info.passed, probe_info.workers, probe_info.failed),
        (true, 1, 0)
    );

    stop.send(()).unwrap();
    running.await.unwrap();
    probe.stop();
    let delete = format!("DELETE FROM retry_worker_systems WHERE worker = '{v5_worker}'");
    raw(&env, &delete).await;
}

async fn a_failing_probe_keeps_the_worker_from_taking_the_queues_shared_probe(backend: Backend) {
    let name = match backend {
        Backend::Sqlite => "shared-probed-sqlite",
        Backend::Postgres => "shared-probed-postgres",
        Backend::PgBouncer => "shared-probed-pgbouncer",
    };
    let Some(env) = Env::new(backend, "probes-shared").await else {
        return;
    };
    let system = declare_system(name);
    // This process's breaker is closed (it saw no failure): the queue's shared one is open
    // because of other workers' attempts, its open time past: half-open, its probe free.
    system.set_breaker(Breaker::new());
    let up = Arc::new(AtomicBool::new(false));
    let flag = up.clone();
    let probe = health::probe(system, Duration::from_millis(200), move || {
        let up = flag.load(Ordering::SeqCst);
        async move { if up { Ok(()) } else { Err("partner down") } }
    })
    .unwrap();
    let tasks = (0..3).map(|n| {
        Task::new("charge", &n)
            .system(system)
            .task_id(format!("c{n}"))
    });
    env.q.enqueue_many(tasks).await.unwrap();
    let t0_ms = env
        .at(secs(0))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let open_until = t0_ms - 1_000;
    raw(
        &env,
        &format!(
            "INSERT INTO retry_breakers (queue, system, failures, open_until_ms, probe_until_ms) \
             VALUES ('{}', '{name}', 5, {open_until}, NULL)",
            env.name.replace('\'', "''")
        ),
    )
    .await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    // The worker knows the system (a limit): its claims look at the shared row.
    let w = worker(&env)
        .limit(system, SystemLimit::new())
        .handle("charge", move |_task| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), retry_runtime::BoxError>(()) }
        });

    // The probe failed (and is fresh): no task is claimed, the shared probe stays free.
    poll_until(
        "the first failed probe",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async { health::last_probe(system).filter(|p| !p.passed) },
    )
    .await;
    assert_eq!(system.breaker_state(), Some(BreakerState::Closed));
    assert_eq!(w.run_due().await.unwrap(), 0, "no user task is the probe");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(env.ids(TaskState::Pending).await.len(), 3);

    // The probe passes: this worker takes the queue's probe, one task, which closes the row.
    up.store(true, Ordering::SeqCst);
    poll_until(
        "a passing probe",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async { health::last_probe(system).filter(|p| p.passed) },
    )
    .await;
    assert_eq!(w.run_due().await.unwrap(), 1, "the queue's probe");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    probe.stop();
}
