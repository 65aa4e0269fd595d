//! `retry-queue errors`: the tasks of a state grouped by their last error, most frequent first.

use std::io::Write;

use retry_runtime::durable::rfc3339;
use retry_runtime::durable::{Queue, TaskState};

use super::failure::{Failure, failure};
use super::output::Output;
use super::table::{Align, Table, clean};
use crate::json;

/// Prints the error groups of `state`: a table, or the JSON of the API.
pub(super) async fn print<W: Write>(
    queue: &Queue,
    state: TaskState,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let groups = queue
        .inspector()
        .error_groups(state)
        .await
        .map_err(|e| failure(e, queue, None))?;
    output.print(
        || json::errors(queue.name(), state, &groups),
        |out| {
            let mut table = Table::new(&[
                ("TASKS", Align::Right),
                ("OLDEST FAILURE", Align::Left),
                ("NEWEST FAILURE", Align::Left),
                ("LAST ERR", Align::Left),
            ]);
            for g in &groups {
                table.row(vec![
                    g.count.to_string(),
                    rfc3339(g.oldest),
                    rfc3339(g.newest),
                    clean(&g.last_err),
                ]);
            }
            table.write(out)
        },
    )
}
