//! `migrate status|up|down --to N`: the schema's versions. The only commands that change the
//! schema: the others open the database without migrating it, and refuse one whose schema is
//! missing or behind ([`connect`](super::open::connect)).

use std::io::Write;

use retry_runtime::durable::{Schema, SchemaStatus};

use super::MigrateCommand;
use super::failure::Failure;
use super::open::existing;
use super::output::Output;
use super::table::{Align, Table, clean};
use crate::json::{self, MigratedJson};

/// Runs `command` on the database at `url`.
pub(super) async fn run<W: Write>(
    url: &str,
    command: MigrateCommand,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    existing(url)?;
    let schema = Schema::connect(url).await?;
    let changed = match command {
        MigrateCommand::Status => None,
        MigrateCommand::Up => Some(("applied", schema.up().await?)),
        MigrateCommand::Down { to } => Some(("reverted", schema.down(to).await?)),
    };
    let status = schema.status().await?;
    schema.close().await;
    let Some((verb, changed)) = changed else {
        return output.print(|| json::schema(&status), |out| table(&status, out));
    };
    output.print(
        || MigratedJson {
            changed: changed.clone(),
            schema: json::schema(&status),
        },
        |out| {
            let versions: Vec<String> = changed.iter().map(u32::to_string).collect();
            match versions.is_empty() {
                true => writeln!(out, "nothing to do")?,
                false => writeln!(out, "{verb} {}", versions.join(", "))?,
            }
            table(&status, out)
        },
    )
}

fn table(status: &SchemaStatus, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "schema version {} (this build: {})",
        status.version, status.latest
    )?;
    let mut table = Table::new(&[
        ("VERSION", Align::Right),
        ("NAME", Align::Left),
        ("STATE", Align::Left),
        ("APPLIED AT", Align::Left),
    ]);
    for m in &status.migrations {
        table.row(vec![
            m.version.to_string(),
            clean(&m.name),
            json::state_name(m.state).to_owned(),
            m.applied_at
                .map_or_else(|| "-".to_owned(), retry_runtime::durable::rfc3339),
        ]);
    }
    table.write(out)?;
    match &status.refused {
        Some(why) => writeln!(out, "this build refuses it: {}", clean(why)),
        None => writeln!(out, "this build runs on it"),
    }
}
