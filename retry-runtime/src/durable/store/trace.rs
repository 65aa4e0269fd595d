//! The trace context a task carries (issue 33): the column `trace_parent` (W3C `traceparent`
//! text, NULL when the task carries none), added by its own migration step so that a table made
//! by an earlier version gains it in place. Nothing reads by it: no index.

use super::Store;
use crate::durable::error::Error;

/// The column, on PostgreSQL.
#[cfg(feature = "postgres")]
const POSTGRES_COLUMN: &str = "ALTER TABLE retry_tasks ADD COLUMN IF NOT EXISTS trace_parent TEXT";

/// The column, on SQLite (added when `pragma_table_info` lacks it: no `ADD COLUMN IF NOT
/// EXISTS` there).
#[cfg(feature = "sqlite")]
const SQLITE_COLUMN: (&str, &str) = (
    "trace_parent",
    "ALTER TABLE retry_tasks ADD COLUMN trace_parent TEXT",
);

/// Adds the column where missing.
pub(crate) async fn migrate(store: &Store) -> Result<(), Error> {
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => super::sqlite::add_missing_columns(pool, &[SQLITE_COLUMN]).await,
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => {
            // Under the schema's lock, and only when missing: `ALTER TABLE` waits for (and
            // stalls) every running worker's claims.
            const HAS: &str = "SELECT COUNT(*) FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = 'retry_tasks' \
                 AND column_name = 'trace_parent'";
            super::postgres::create_missing(pool, HAS, 1, &[POSTGRES_COLUMN]).await
        }
    };
    result.map_err(Error::from_sqlx)
}
