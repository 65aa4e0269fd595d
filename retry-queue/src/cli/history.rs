//! `retry-queue history`: a queue's finished and failed attempts per hour or day, the figures
//! the dashboard's chart draws.

use std::io::Write;

use retry_runtime::durable::rfc3339;
use retry_runtime::durable::{HistorySpan, Queue};

use super::failure::{Failure, failure};
use super::output::Output;
use super::table::{Align, Table};
use crate::json;

/// The widest bar of the text chart, in characters.
const BAR_WIDTH: u64 = 40;

/// Prints the queue's history over the last `days` UTC days, or else the last `hours` hours (24
/// without either): one row per bucket with a bar of its attempts (`#` failed, `=` succeeded),
/// or the JSON of the API.
pub(super) async fn print<W: Write>(
    queue: &Queue,
    hours: Option<u32>,
    days: Option<u32>,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let span = match days {
        Some(days) => HistorySpan::Days(days),
        None => HistorySpan::Hours(hours.unwrap_or(24)),
    };
    let buckets = queue
        .inspector()
        .history(span)
        .await
        .map_err(|e| failure(e, queue, None))?;
    output.print(
        || json::history(queue.name(), span, &buckets),
        |out| {
            let most = buckets
                .iter()
                .map(|b| b.processed)
                .max()
                .unwrap_or(0)
                .max(1);
            let mut table = Table::new(&[
                ("START (UTC)", Align::Left),
                ("PROCESSED", Align::Right),
                ("FAILED", Align::Right),
                ("", Align::Left),
            ]);
            for b in &buckets {
                // Rounded up: an hour with any attempt shows at least one mark.
                let bar = (b.processed * BAR_WIDTH).div_ceil(most);
                let failed = (b.failed * BAR_WIDTH).div_ceil(most).min(bar);
                let marks = "#".repeat(failed as usize) + &"=".repeat((bar - failed) as usize);
                table.row(vec![
                    rfc3339(b.start),
                    b.processed.to_string(),
                    b.failed.to_string(),
                    marks,
                ]);
            }
            table.write(out)
        },
    )
}
