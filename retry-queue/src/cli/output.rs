//! Where a command writes ([`Output`]: a table or a line, or JSON) and the task table that
//! `task ls` and `find` both print. A bottom-layer file: the commands read it, it reads none.

use std::io::Write;

use retry_runtime::durable::TaskInfo;
use retry_runtime::durable::rfc3339;

use super::failure::Failure;
use super::table::{Align, Table, cell, clean};

/// Longest `last_err` shown in a table; `task show` prints it whole.
pub(super) const LAST_ERR_WIDTH: usize = 60;

/// Where a command writes: a table or line, or JSON.
pub(super) struct Output<'a, W: Write> {
    pub(super) json: bool,
    pub(super) out: &'a mut W,
}

impl<W: Write> Output<'_, W> {
    /// Prints `value` (JSON mode) or runs `text` (table mode).
    pub(super) fn print<T: serde::Serialize>(
        self,
        value: impl FnOnce() -> T,
        text: impl FnOnce(&mut W) -> std::io::Result<()>,
    ) -> Result<(), Failure> {
        if self.json {
            let text = serde_json::to_string(&value()).map_err(std::io::Error::other)?;
            writeln!(self.out, "{text}")?;
        } else {
            text(self.out)?;
        }
        Ok(())
    }
}

/// The table of `task ls`: one row per task.
pub(super) fn task_table(tasks: &[TaskInfo], out: &mut impl Write) -> std::io::Result<()> {
    let mut table = Table::new(&[
        ("ID", Align::Left),
        ("KIND", Align::Left),
        ("RETRIED", Align::Right),
        ("NEXT PROCESS AT", Align::Left),
        ("LAST FAILED AT", Align::Left),
        ("LAST ERR", Align::Left),
    ]);
    let time = |t: Option<std::time::SystemTime>| t.map_or_else(|| "-".to_owned(), rfc3339);
    for t in tasks {
        table.row(vec![
            clean(&t.id),
            clean(&t.kind),
            format!("{}/{}", t.retried, t.max_retry),
            time(t.next_process_at),
            time(t.last_failed_at),
            t.last_err
                .as_deref()
                .map_or_else(|| "-".to_owned(), |e| cell(e, LAST_ERR_WIDTH)),
        ]);
    }
    table.write(out)
}
