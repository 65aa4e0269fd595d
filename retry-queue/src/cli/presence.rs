//! `workers` and `schedulers`: who runs on the database, by the heartbeats of the workers and
//! schedulers.

use std::io::Write;

use retry_runtime::durable::Queue;
use retry_runtime::durable::rfc3339;

use super::failure::{Failure, failure};
use super::output::Output;
use super::table::{Align, Table, clean};
use crate::json;

/// `workers`: one row per live worker (with the queues it leads: runs the maintenance of),
/// then one per task they run.
pub(super) async fn workers<W: Write>(base: &Queue, output: Output<'_, W>) -> Result<(), Failure> {
    let workers = base
        .inspector()
        .workers()
        .await
        .map_err(|e| failure(e, base, None))?;
    output.print(
        || json::workers(&workers),
        |out| {
            if workers.is_empty() {
                return writeln!(out, "no worker is running");
            }
            let mut table = Table::new(&[
                ("WORKER", Align::Left),
                ("HOST", Align::Left),
                ("PID", Align::Right),
                ("QUEUES", Align::Left),
                ("LEADER OF", Align::Left),
                ("BUSY", Align::Right),
                ("STARTED", Align::Left),
                ("LAST HEARTBEAT", Align::Left),
            ]);
            for w in &workers {
                table.row(vec![
                    clean(&w.id),
                    clean(&w.host),
                    w.pid.to_string(),
                    clean(&w.queues.join(",")),
                    if w.leader_of.is_empty() {
                        "-".to_owned()
                    } else {
                        clean(&w.leader_of.join(","))
                    },
                    format!("{}/{}", w.active.len(), w.concurrency),
                    rfc3339(w.started_at),
                    rfc3339(w.last_heartbeat_at),
                ]);
            }
            table.write(out)?;
            if workers.iter().all(|w| w.active.is_empty()) {
                return Ok(());
            }
            writeln!(out)?;
            let mut active = Table::new(&[
                ("WORKER", Align::Left),
                ("QUEUE", Align::Left),
                ("TASK", Align::Left),
                ("KIND", Align::Left),
                ("STARTED", Align::Left),
            ]);
            for w in &workers {
                for t in &w.active {
                    active.row(vec![
                        clean(&w.id),
                        clean(&t.queue),
                        clean(&t.id),
                        clean(&t.kind),
                        rfc3339(t.started_at),
                    ]);
                }
            }
            active.write(out)
        },
    )
}

/// `schedulers`: one row per entry of the live schedulers.
pub(super) async fn schedulers<W: Write>(
    base: &Queue,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let entries = base
        .inspector()
        .schedulers()
        .await
        .map_err(|e| failure(e, base, None))?;
    output.print(
        || json::schedulers(&entries),
        |out| {
            if entries.is_empty() {
                return writeln!(out, "no scheduler is running");
            }
            let mut table = Table::new(&[
                ("QUEUE", Align::Left),
                ("KIND", Align::Left),
                ("SPEC", Align::Left),
                ("NEXT RUN", Align::Left),
                ("LAST ENQUEUED", Align::Left),
                ("LAST TASK", Align::Left),
                ("SCHEDULER", Align::Left),
            ]);
            let time = |t: Option<std::time::SystemTime>| t.map_or_else(|| "-".to_owned(), rfc3339);
            let text = |t: Option<&str>| t.map_or_else(|| "-".to_owned(), clean);
            for e in &entries {
                table.row(vec![
                    clean(&e.queue),
                    text(e.kind.as_deref()),
                    clean(&e.spec),
                    time(e.next_run_at),
                    time(e.last_enqueued_at),
                    text(e.last_task_id.as_deref()),
                    clean(&e.scheduler),
                ]);
            }
            table.write(out)
        },
    )
}
