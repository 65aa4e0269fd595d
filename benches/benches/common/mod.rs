//! The fresh database each durable benchmark measures on: a SQLite file in a temp dir, or a
//! database of its own on the server of `RETRY_TEST_POSTGRES_URL`, dropped at the end.
//! Included by the durable bench targets (`mod common;`); not a target itself (a folder without
//! `main.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::Connection as _;

static DB_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh database for one measurement; dropped (PostgreSQL) or deleted (SQLite) at the end.
pub(crate) struct Db {
    /// For our queue: `sqlite://…/tasks.db` or `postgres://…/db`.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    /// The server's URL and the database's name, to drop it.
    postgres: Option<(String, String)>,
}

impl Db {
    /// A fresh database on PostgreSQL (`postgres`: the server of `RETRY_TEST_POSTGRES_URL`,
    /// which the caller checked is set) or SQLite; `prefix` names it (ASCII letters, `_`).
    pub(crate) async fn new(postgres: bool, prefix: &str) -> Db {
        if !postgres {
            let dir = tempfile::Builder::new()
                .prefix(&format!("retry-{prefix}-bench-"))
                .tempdir()
                .expect("temp dir");
            let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
            return Db {
                url,
                _dir: Some(dir),
                postgres: None,
            };
        }
        let server = std::env::var("RETRY_TEST_POSTGRES_URL").expect("checked before");
        let name = format!(
            "{prefix}_{}_{}",
            std::process::id(),
            DB_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let mut admin = sqlx::PgConnection::connect(&server)
            .await
            .expect("connect to RETRY_TEST_POSTGRES_URL");
        // The name is ours: ASCII letters, digits and `_`.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("CREATE DATABASE");
        admin.close().await.ok();
        let base = server.rsplit_once('/').map_or(server.as_str(), |(b, _)| b);
        Db {
            url: format!("{base}/{name}"),
            _dir: None,
            postgres: Some((server, name)),
        }
    }

    /// The database's URL through `proxy` (a `postgres://` URL of a pooler in front of the same
    /// server, e.g. PgBouncer): its host and port, this database.
    #[allow(dead_code)]
    pub(crate) fn url_through(&self, proxy: &str) -> String {
        let (_, name) = self.postgres.as_ref().expect("a PostgreSQL database");
        let base = proxy.rsplit_once('/').map_or(proxy, |(b, _)| b);
        format!("{base}/{name}")
    }

    /// Whether it is a PostgreSQL database.
    #[allow(dead_code)]
    pub(crate) fn is_postgres(&self) -> bool {
        self.postgres.is_some()
    }

    /// Drops the PostgreSQL database (the SQLite file goes with the temp dir).
    pub(crate) async fn drop_db(self) {
        if let Some((server, name)) = &self.postgres
            && let Ok(mut admin) = sqlx::PgConnection::connect(server).await
        {
            let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
                .execute(&mut admin)
                .await;
            admin.close().await.ok();
        }
    }
}
