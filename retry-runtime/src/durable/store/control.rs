//! The columns of task control (issue 22, items 5–6), added by their own migration step so
//! that a table made by an earlier version gains them in place: `errors`, the failure history
//! as a JSON array (see [`history`](crate::durable::history)), and `cancel_requested`, set by
//! the inspector on an active task for its worker to stop it.

use super::Store;
use crate::durable::error::Error;

#[cfg(feature = "postgres")]
const POSTGRES_COLUMNS: &str = "ALTER TABLE retry_tasks \
     ADD COLUMN IF NOT EXISTS errors TEXT, \
     ADD COLUMN IF NOT EXISTS cancel_requested BOOLEAN NOT NULL DEFAULT FALSE";

/// SQLite has no `ADD COLUMN IF NOT EXISTS`: each column is added when `pragma_table_info`
/// lacks it.
#[cfg(feature = "sqlite")]
const SQLITE_COLUMNS: [(&str, &str); 2] = [
    ("errors", "ALTER TABLE retry_tasks ADD COLUMN errors TEXT"),
    (
        "cancel_requested",
        "ALTER TABLE retry_tasks ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE",
    ),
];

/// Adds the columns where missing.
pub(crate) async fn migrate(store: &Store) -> Result<(), Error> {
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            const HAS: &str =
                "SELECT COUNT(*) FROM pragma_table_info('retry_tasks') WHERE name = $1";
            let mut result = Ok(());
            for (column, add) in SQLITE_COLUMNS {
                let has: i64 = match sqlx::query_scalar(HAS).bind(column).fetch_one(pool).await {
                    Ok(has) => has,
                    Err(e) => return Err(Error::from_sqlx(e)),
                };
                if has > 0 {
                    continue;
                }
                if let Err(e) = sqlx::query(add).execute(pool).await {
                    // Another process added it in between: that is the outcome wanted.
                    let added: Result<i64, _> =
                        sqlx::query_scalar(HAS).bind(column).fetch_one(pool).await;
                    if !matches!(added, Ok(1)) {
                        result = Err(e);
                        break;
                    }
                }
            }
            result
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => {
            // The same lock as the schema's: processes starting together add the columns once.
            let run = async {
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(super::postgres::MIGRATION_LOCK)
                    .execute(&mut *tx)
                    .await?;
                sqlx::raw_sql(POSTGRES_COLUMNS).execute(&mut *tx).await?;
                tx.commit().await
            };
            run.await
        }
    };
    result.map_err(Error::from_sqlx)
}
