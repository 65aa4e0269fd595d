//! `systems`: a queue's tasks per external system, and what the live workers report of each
//! (breaker, rate).

use std::io::Write;

use retry_runtime::durable::Queue;

use super::failure::{Failure, failure};
use super::output::Output;
use super::table::{Align, Table, clean};
use crate::json;

/// `systems --queue NAME`: one row per system.
pub(super) async fn print<W: Write>(queue: &Queue, output: Output<'_, W>) -> Result<(), Failure> {
    let systems = queue
        .inspector()
        .systems()
        .await
        .map_err(|e| failure(e, queue, None))?;
    output.print(
        || json::systems(queue.name(), &systems),
        |out| {
            if systems.is_empty() {
                return writeln!(
                    out,
                    "no task of queue {} names a system",
                    clean(queue.name())
                );
            }
            let mut table = Table::new(&[
                ("SYSTEM", Align::Left),
                ("DUE", Align::Right),
                ("DEFERRED", Align::Right),
                ("IN FLIGHT", Align::Right),
                ("WAITING", Align::Right),
                ("BREAKER", Align::Left),
                ("RATE/S", Align::Right),
                ("WORKERS", Align::Right),
            ]);
            for s in &systems {
                let rate = match (s.workers, s.rate) {
                    (0, _) => "-".to_owned(),
                    (_, None) => "unlimited".to_owned(),
                    (_, Some(r)) if s.ramping => format!("{r:.1} (ramping)"),
                    (_, Some(r)) => format!("{r:.1}"),
                };
                table.row(vec![
                    clean(&s.system),
                    s.due.to_string(),
                    s.deferred.to_string(),
                    s.in_flight.to_string(),
                    s.waiting.to_string(),
                    s.breaker.clone().unwrap_or_else(|| "-".to_owned()),
                    rate,
                    s.workers.to_string(),
                ]);
            }
            table.write(out)
        },
    )
}
