//! `retry-queue systems` (issue 31): a queue's tasks per external system they name, as a table
//! and as JSON, on SQLite; what workers report of each system is held by the runtime's tests
//! (`tests/tests/durable/systems.rs`, `durable/breaker.rs`).

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
SYSTEM    DUE  DEFERRED  IN FLIGHT  WAITING  BREAKER  RATE/S  WORKERS
payments    2         0          0        3  -             -        0
smtp        1         0          0        1  -             -        0
"
    );
    let answer: Value = serde_json::from_str(&systems(&url, true)).unwrap();
    assert_eq!(
        answer,
        json!({"queue": "default", "systems": [
            {"system": "payments", "due": 2, "deferred": 0, "in_flight": 0, "waiting": 3,
             "breaker": null, "rate": null, "ramping": false, "workers": 0},
            {"system": "smtp", "due": 1, "deferred": 0, "in_flight": 0, "waiting": 1,
             "breaker": null, "rate": null, "ramping": false, "workers": 0},
        ]})
    );
}
