//! `retry-queue systems` (issue 31): a queue's tasks per external system they name, as a table
//! and as JSON, on SQLite; what workers report of each system is held by the runtime's tests
//! (`tests/tests/durable/systems.rs`, `durable/breaker.rs`, `durable/probes.rs`); here, rows
//! of reports written as a worker's heartbeat writes them, with its last health probes (issue
//! 44, item 2), shown in the PROBE column and as `probe`.

use retry_runtime::declare_system;
use std::process::Command;
use std::time::Duration;

use retry_runtime::durable::{Queue, Task};
use serde_json::{Value, json};

fn systems(url: &str, json: bool) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_retry-queue"));
    command
        .env_remove("RETRY_QUEUE_DB")
        .env_remove("RETRY_QUEUE_TOKEN")
        .args(["--db", url, "systems"]);
    if json {
        command.arg("--json");
    }
    let out = command.output().expect("the binary runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[tokio::test]
async fn systems_counts_each_systems_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    // The system clock, as the binary reads it.
    let q = Queue::connect(&url).await.unwrap();
    assert_eq!(
        systems(&url, false),
        "no task of queue default names a system\n"
    );
    q.enqueue_many([
        Task::new("charge", &1).system(declare_system("payments")),
        Task::new("charge", &2).system(declare_system("payments")),
        Task::new("charge", &3)
            .system(declare_system("payments"))
            .process_in(Duration::from_secs(3600)),
        Task::new("email", &4).system(declare_system("smtp")),
        Task::new("report", &5),
    ])
    .await
    .unwrap();
    assert_eq!(
        systems(&url, false),
        "\
SYSTEM    DUE  DEFERRED  IN FLIGHT  WAITING  BREAKER  RATE/S  WORKERS  PROBE
payments    2         0          0        3  -             -        0  -
smtp        1         0          0        1  -             -        0  -
"
    );
    let answer: Value = serde_json::from_str(&systems(&url, true)).unwrap();
    assert_eq!(
        answer,
        json!({"queue": "default", "systems": [
            {"system": "payments", "due": 2, "deferred": 0, "in_flight": 0, "waiting": 3,
             "breaker": null, "rate": null, "ramping": false, "workers": 0, "probe": null},
            {"system": "smtp", "due": 1, "deferred": 0, "in_flight": 0, "waiting": 1,
             "breaker": null, "rate": null, "ramping": false, "workers": 0, "probe": null},
        ]})
    );
}

/// Milliseconds since the Unix epoch now (the binary reads the system clock).
fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(since.unwrap().as_millis()).unwrap()
}

/// One worker's report of one system, live for an hour, with its probe (passed, error, how
/// long ago it ended): the row a heartbeat writes (`store/reports.rs`).
fn report(worker: &str, system: &str, breaker: &str, probe: Option<(bool, &str, i64)>) -> String {
    let now = now_ms();
    let (passed, error, at) = match probe {
        None => ("NULL".to_owned(), "NULL".to_owned(), "NULL".to_owned()),
        Some((passed, error, ago_ms)) => (
            i64::from(passed).to_string(),
            if error.is_empty() {
                "NULL".to_owned()
            } else {
                format!("'{}'", error.replace('\'', "''"))
            },
            (now - ago_ms).to_string(),
        ),
    };
    format!(
        "INSERT INTO retry_worker_systems (worker, system, queues, held, rate_milli, ramping, \
         breaker, heartbeat_ms, stale_ms, probe_passed, probe_error, probe_ms) VALUES \
         ('{worker}', '{system}', '[\"default\"]', 0, NULL, 0, '{breaker}', {now}, {}, \
         {passed}, {error}, {at});",
        now + 3_600_000
    )
}

#[tokio::test]
async fn systems_shows_the_workers_last_probes_worst_first() {
    const HOUR: i64 = 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.unwrap();
    q.enqueue_many([
        Task::new("charge", &1).system(declare_system("payments")),
        Task::new("email", &2).system(declare_system("smtp")),
        Task::new("fax", &3).system(declare_system("fax")),
    ])
    .await
    .unwrap();
    // payments: one worker's probe failed 2 h ago (its error has an escape sequence and is
    // longer than the table's 40 characters), another's passed 1 h ago: failed wins. smtp: two
    // passes, the fresher shown. fax: a worker without a probe (or of version 5).
    let error = "connection refused by 10.0.0.7:443 \u{1b}[31m after the TLS handshake";
    let rows = [
        report("w1", "payments", "open", Some((false, error, 2 * HOUR))),
        report("w2", "payments", "closed", Some((true, "", HOUR))),
        report("w1", "smtp", "closed", Some((true, "", 3 * HOUR))),
        report("w2", "smtp", "closed", Some((true, "", 2 * HOUR))),
        report("w1", "fax", "closed", None),
    ];
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(rows.concat()))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    q.close().await;
    assert_eq!(
        systems(&url, false),
        "\
SYSTEM    DUE  DEFERRED  IN FLIGHT  WAITING  BREAKER     RATE/S  WORKERS  PROBE
fax         1         0          0        1  closed   unlimited        1  -
payments    1         0          0        1  open     unlimited        2  failed 2h 0m ago (1 of 2): connection refused by 10.0.0.7:443 \\u{1…
smtp        1         0          0        1  closed   unlimited        2  passed 2h 0m ago
"
    );
    let answer: Value = serde_json::from_str(&systems(&url, true)).unwrap();
    let probes: Vec<Value> = answer["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut probe = s["probe"].clone();
            // The age, to the minute: the binary ran after the rows were written.
            if let Some(age) = probe.get_mut("age_ms") {
                *age = json!(age.as_i64().unwrap() / 60_000);
            }
            probe
        })
        .collect();
    assert_eq!(
        probes,
        [
            Value::Null,
            json!({"passed": false, "error": error, "age_ms": 120, "workers": 2, "failed": 1}),
            json!({"passed": true, "error": null, "age_ms": 120, "workers": 2, "failed": 0}),
        ]
    );
}
