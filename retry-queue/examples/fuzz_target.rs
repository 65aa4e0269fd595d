//! The dashboard schemathesis fuzzes (`scripts/schemathesis.sh`): a fresh SQLite queue seeded
//! with tasks in every state, two queues (one paused, one named `..`), served on
//! `127.0.0.1:PORT` with the token of `RETRY_QUEUE_TOKEN`.
//!
//! ```text
//! RETRY_QUEUE_TOKEN=… cargo run -p retry-queue --example fuzz_target -- DIR PORT
//! ```

use std::time::Duration;

use retry_queue::dashboard::{self, DashOptions};
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, Worker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(port)) = (args.next(), args.next()) else {
        return Err("usage: fuzz_target DIR PORT".into());
    };
    let url = format!("sqlite://{dir}/tasks.db");
    let q = Queue::connect(&url).await?.named("default");
    let worker = Worker::new(q.clone())
        .handle("charge", |task| async move {
            let msg: String = task.payload()?;
            Err(BoxError::from(msg))
        })
        .handle("ok", |_task| async { Ok::<(), BoxError>(()) });
    for (i, task) in [
        Task::new("charge", &"gateway down: 503").task_id("r1"),
        Task::new("charge", &"<script>alert(1)</script>\u{202E}").task_id("r2"),
        Task::new("charge", &"card expired")
            .task_id("a1")
            .max_retry(0),
        Task::new("ok", &1).task_id("c1"),
    ]
    .into_iter()
    .enumerate()
    {
        q.enqueue(task).await?;
        assert_eq!(worker.run_due().await?, 1, "task {i}");
    }
    q.enqueue(Task::new("report", &serde_json::json!({"day": 1})).task_id("p1"))
        .await?;
    q.enqueue(
        Task::new("report", &2)
            .task_id("..")
            .process_in(Duration::from_secs(3600)),
    )
    .await?;
    let dots = q.clone().named("..");
    dots.enqueue(Task::new("report", &3).task_id("d1")).await?;
    let paused = q.clone().named("paused");
    paused
        .enqueue(Task::new("report", &4).task_id("x1"))
        .await?;
    paused.inspector().pause().await?;
    let token = std::env::var(dashboard::TOKEN_ENV).ok();
    let options = DashOptions {
        listen: format!("127.0.0.1:{port}").parse()?,
        token,
        ..DashOptions::default()
    };
    println!("ready on http://127.0.0.1:{port}");
    dashboard::serve(q, options).await?;
    Ok(())
}
