//! `systems`: a queue's tasks per external system, and what the live workers report of each
//! (breaker, rate, last health probe).

use std::io::Write;

use retry_runtime::durable::{ProbeInfo, Queue};

use super::failure::{Failure, failure};
use super::output::Output;
use super::table::{Align, Table, age, cell, clean};
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
                ("PROBE", Align::Left),
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
                    s.probe.as_ref().map_or_else(|| "-".to_owned(), probe),
                ]);
            }
            table.write(out)
        },
    )
}

/// The longest probe error the table shows, in characters (`--json` has it whole).
const PROBE_ERROR_SHOWN: usize = 40;

/// `passed 3s ago`, `failed 1m 5s ago: connection refused`, and with several workers probing,
/// how many of them failed: `failed 4s ago (1 of 3): …`.
fn probe(p: &ProbeInfo) -> String {
    let outcome = if p.passed { "passed" } else { "failed" };
    let ago = age(std::time::Duration::from_millis(p.age_ms));
    let mut text = format!("{outcome} {ago} ago");
    if !p.passed && p.workers > 1 {
        text.push_str(&format!(" ({} of {})", p.failed, p.workers));
    }
    if let Some(error) = &p.error {
        text.push_str(": ");
        text.push_str(&cell(error, PROBE_ERROR_SHOWN));
    }
    text
}
