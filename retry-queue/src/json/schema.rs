//! The JSON of `retry-queue migrate status` (and of `up`/`down`'s answers): the schema's
//! versions and whether this build can run on the database. The CLI's only: no route of the
//! dashboard serves it, so it is not in the OpenAPI document.

use retry_runtime::durable::{MigrationState, SchemaStatus};
use serde::Serialize;

use super::opt_time;

/// Where the database's schema stands against this build.
#[derive(Debug, Serialize)]
pub(crate) struct SchemaJson {
    /// The highest version applied (0: none, or a database made before versions were recorded).
    pub(crate) version: u32,
    /// The highest version this build knows.
    pub(crate) latest: u32,
    /// Why this build refuses to run on the database as it is, or null.
    pub(crate) refused: Option<String>,
    /// Every version this build knows, then every newer one the database has.
    pub(crate) migrations: Vec<MigrationJson>,
}

/// One version of the schema.
#[derive(Debug, Serialize)]
pub(crate) struct MigrationJson {
    pub(crate) version: u32,
    pub(crate) name: String,
    /// `applied`, `pending`, `changed` (applied from another text), `newer` (applied by a newer
    /// build; this build runs on it), `newer-unusable` (this build cannot run on it).
    pub(crate) state: &'static str,
    pub(crate) applied_at: Option<String>,
}

/// What `migrate up` or `migrate down` changed, and where the schema stands after it.
#[derive(Debug, Serialize)]
pub(crate) struct MigratedJson {
    /// The versions applied (up) or reverted (down), in the order they ran.
    pub(crate) changed: Vec<u32>,
    pub(crate) schema: SchemaJson,
}

/// The name of a state in [`MigrationJson::state`].
pub(crate) fn state_name(state: MigrationState) -> &'static str {
    match state {
        MigrationState::Applied => "applied",
        MigrationState::Pending => "pending",
        MigrationState::Changed => "changed",
        MigrationState::Newer { usable: true } => "newer",
        _ => "newer-unusable",
    }
}

/// The JSON of `status`.
pub(crate) fn schema(status: &SchemaStatus) -> SchemaJson {
    SchemaJson {
        version: status.version,
        latest: status.latest,
        refused: status.refused.clone(),
        migrations: status
            .migrations
            .iter()
            .map(|m| MigrationJson {
                version: m.version,
                name: m.name.clone(),
                state: state_name(m.state),
                applied_at: opt_time(m.applied_at),
            })
            .collect(),
    }
}
