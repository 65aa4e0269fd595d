//! The versioned schema (issue 33, item 1) on a database of its own per test, on both
//! backends: what a new database records, `down` and `up`, `.migrate(false)`, a schema newer
//! than this build (refused, unless it only adds), a migration whose text changed, processes
//! that start together, and every earlier layout of this project upgraded in place
//! (`tests/fixtures/schemas/`, dumps made by each layout's own code).

use retry_runtime::BoxError;
use retry_runtime::durable::{
    ArchiveReason, Error, MigrationState, Queue, Schema, Task, TaskState, Worker, latest_version,
    protocol,
};
use retry_tests::both_backends;
use retry_tests::durable_env::{Backend, PgDatabase};

/// A database of the test's own; dropped (PostgreSQL) or deleted (SQLite) by [`Fresh::done`].
struct Fresh {
    url: String,
    /// The same database without PgBouncer, for the statements outside the queue.
    direct: String,
    pg: Option<PgDatabase>,
    _dir: Option<tempfile::TempDir>,
}

impl Fresh {
    async fn new(backend: Backend, test: &str) -> Option<Fresh> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
                Some(Fresh {
                    direct: url.clone(),
                    url,
                    pg: None,
                    _dir: Some(dir),
                })
            }
            Backend::Postgres | Backend::PgBouncer => {
                if matches!(backend, Backend::PgBouncer) {
                    retry_tests::durable_env::pgbouncer_url_or_skip(test)?;
                }
                let pg = PgDatabase::create(&format!("migrations_{test}")).await?;
                let url = match backend {
                    Backend::PgBouncer => pg.through_pgbouncer(test)?,
                    _ => pg.url.clone(),
                };
                Some(Fresh {
                    url,
                    direct: pg.url.clone(),
                    pg: Some(pg),
                    _dir: None,
                })
            }
        }
    }

    /// Runs `sql` (one or more statements) on the database, outside the queue.
    async fn raw(&self, sql: String) {
        if self.url.starts_with("sqlite") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        } else {
            let pool = sqlx::PgPool::connect(&self.direct).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        }
    }

    async fn done(self) {
        if let Some(pg) = self.pg {
            pg.drop_database().await;
        }
    }
}

fn invalid(result: Result<Queue, Error>) -> String {
    match result {
        Err(Error::Invalid(why)) => why,
        Err(e) => panic!("expected Error::Invalid, got {e:?}"),
        Ok(_) => panic!("expected Error::Invalid, the queue opened"),
    }
}

fn every_version() -> Vec<u32> {
    (1..=latest_version()).collect()
}

async fn a_new_database_records_every_version_and_down_then_up_round_trips(backend: Backend) {
    let Some(db) = Fresh::new(backend, "round_trip").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.unwrap();
    q.enqueue(Task::new("email", &1).task_id("a"))
        .await
        .unwrap();
    let status = q.schema().status().await.unwrap();
    assert_eq!(
        (status.version, status.latest),
        (latest_version(), latest_version())
    );
    assert_eq!(status.refused, None);
    assert!(
        status
            .migrations
            .iter()
            .all(|m| m.state == MigrationState::Applied)
    );
    assert!(status.migrations.iter().all(|m| m.applied_at.is_some()));
    assert_eq!(
        status
            .migrations
            .iter()
            .map(|m| m.version)
            .collect::<Vec<_>>(),
        every_version()
    );
    assert_eq!(status.migrations[0].name, "baseline");
    // Connecting again applies nothing.
    assert_eq!(q.schema().up().await.unwrap(), Vec::<u32>::new());
    q.close().await;

    let schema = Schema::connect(&db.url).await.unwrap();
    let mut reverted = every_version();
    reverted.reverse();
    assert_eq!(schema.down(0).await.unwrap(), reverted);
    let status = schema.status().await.unwrap();
    assert_eq!(status.version, 0);
    assert!(
        status
            .migrations
            .iter()
            .all(|m| m.state == MigrationState::Pending)
    );
    assert!(status.refused.unwrap().contains("retry-queue migrate up"));
    // Behind, and told not to migrate: refused, with the way out named.
    let why = invalid(Queue::builder(&db.url).migrate(false).connect().await);
    assert!(why.contains("schema is at version 0"), "{why}");
    assert!(why.contains("retry-queue migrate up"), "{why}");

    assert_eq!(schema.up().await.unwrap(), every_version());
    schema.close().await;
    let q = Queue::builder(&db.url)
        .migrate(false)
        .connect()
        .await
        .unwrap();
    // down 0 removed the tasks with their table.
    assert_eq!(q.inspector().get("a").await.unwrap(), None);
    q.enqueue(Task::new("email", &2).task_id("b"))
        .await
        .unwrap();
    assert_eq!(q.inspector().count(TaskState::Pending).await.unwrap(), 1);
    q.close().await;
    db.done().await;
}

async fn a_schema_newer_than_this_build_is_refused_unless_it_only_adds(backend: Backend) {
    let Some(db) = Fresh::new(backend, "newer").await else {
        return;
    };
    Queue::connect(&db.url).await.unwrap().close().await;
    let latest = latest_version();
    let next = latest + 1;
    // A version a newer build applied, which older code cannot live with.
    db.raw(format!(
        "INSERT INTO retry_migrations (version, name, checksum, oldest_reader, applied_ms) \
         VALUES ({next}, 'future', 'abc', {next}, 0)"
    ))
    .await;
    let why = invalid(Queue::connect(&db.url).await);
    assert!(
        why.contains(&format!("schema is at version {next} (future)")),
        "{why}"
    );
    assert!(why.contains(&format!("knows (version {latest})")), "{why}");
    assert!(
        why.contains(&format!("migrate down --to {latest}")),
        "{why}"
    );
    let schema = Schema::connect(&db.url).await.unwrap();
    let status = schema.status().await.unwrap();
    assert_eq!(status.version, next);
    let newest = status.migrations.last().unwrap();
    assert_eq!(
        (newest.version, newest.name.as_str(), newest.state),
        (next, "future", MigrationState::Newer { usable: false })
    );
    assert!(status.refused.is_some());
    // Only the build that applied it knows how to revert it.
    let Err(Error::Invalid(why)) = schema.down(0).await else {
        panic!("down over a newer version must be refused");
    };
    assert!(why.contains("applied by a newer build"), "{why}");

    // The same version marked as one that only adds: this build runs on, as during a rolling
    // upgrade.
    db.raw(format!(
        "UPDATE retry_migrations SET oldest_reader = {latest} WHERE version = {next}"
    ))
    .await;
    let q = Queue::connect(&db.url).await.unwrap();
    q.enqueue(Task::new("email", &1)).await.unwrap();
    let status = q.schema().status().await.unwrap();
    assert_eq!(status.refused, None);
    assert_eq!(
        status.migrations.last().unwrap().state,
        MigrationState::Newer { usable: true }
    );
    q.close().await;
    schema.close().await;
    db.done().await;
}

async fn a_migration_applied_from_another_text_is_refused(backend: Backend) {
    let Some(db) = Fresh::new(backend, "changed").await else {
        return;
    };
    Queue::connect(&db.url).await.unwrap().close().await;
    db.raw("UPDATE retry_migrations SET checksum = 'edited' WHERE version = 1".into())
        .await;
    let why = invalid(Queue::connect(&db.url).await);
    assert!(why.contains("migration 1 (baseline)"), "{why}");
    assert!(why.contains("checksum edited"), "{why}");
    let schema = Schema::connect(&db.url).await.unwrap();
    let status = schema.status().await.unwrap();
    assert_eq!(status.migrations[0].state, MigrationState::Changed);
    assert!(status.refused.is_some());
    schema.close().await;
    db.done().await;
}

async fn processes_starting_together_migrate_once(backend: Backend) {
    let Some(db) = Fresh::new(backend, "together").await else {
        return;
    };
    // The database exists first (opened, its schema untouched): on SQLite, eight connections
    // creating a new file at once can meet SQLITE_BUSY while one of them switches it to WAL
    // (2 of 30 rounds), a race of the file's creation that is not the migration's. With the file
    // there, 60 rounds of eight concurrent connects migrated once each, without an error.
    Schema::connect(&db.url).await.unwrap().close().await;
    let mut connects = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let url = db.url.clone();
        connects.spawn(async move { Queue::connect(&url).await });
    }
    while let Some(q) = connects.join_next().await {
        q.unwrap().unwrap().close().await;
    }
    let schema = Schema::connect(&db.url).await.unwrap();
    let status = schema.status().await.unwrap();
    assert_eq!(status.version, latest_version());
    assert_eq!(status.migrations.len(), every_version().len());
    schema.close().await;
    db.done().await;
}

/// The fixtures of `backend`, oldest layout first: `(file name, SQL)`.
fn fixtures(backend: Backend) -> Vec<(String, String)> {
    let dir = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres | Backend::PgBouncer => "postgres",
    };
    let dir = format!("{}/fixtures/schemas/{dir}", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .filter(|(name, _)| name.ends_with(".sql"))
        .collect();
    files.sort();
    files
}

/// The schema as the catalog describes it, one line per column, index, trigger, function and
/// constraint, whitespace collapsed: two databases with the same lines have the same layout.
async fn catalog(url: &str) -> Vec<String> {
    const SQLITE: &str = "SELECT m.name || '.' || p.name || ' ' || p.type || ' ' || p.\"notnull\" \
         || ' ' || COALESCE(p.dflt_value, '') || ' ' || p.pk \
         FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p WHERE m.type = 'table' \
         UNION ALL SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master \
         WHERE type IN ('index', 'trigger') AND sql IS NOT NULL";
    const POSTGRES: &str = "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' \
         || is_nullable || ' ' || COALESCE(column_default, '') || ' ' || is_identity \
         FROM information_schema.columns WHERE table_schema = current_schema() \
         UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() \
         UNION ALL SELECT 'trigger ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal \
         UNION ALL SELECT 'function ' || proname || ' ' || prosrc FROM pg_proc \
         WHERE pronamespace = current_schema()::regnamespace \
         UNION ALL SELECT 'constraint ' || conrelid::regclass || ' ' || pg_get_constraintdef(oid) \
         FROM pg_constraint WHERE connamespace = current_schema()::regnamespace";
    let mut lines: Vec<String> = if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query_scalar(SQLITE).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query_scalar(POSTGRES).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    };
    for line in &mut lines {
        *line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    lines.sort();
    lines
}

/// Loads a dump on a connection of its own (a PostgreSQL dump empties the connection's
/// `search_path`).
async fn load(url: &str, sql: &str) {
    use sqlx::Connection as _;
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    if url.starts_with("sqlite") {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let mut conn = sqlx::SqliteConnection::connect_with(&options.create_if_missing(true))
            .await
            .unwrap();
        sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
}

/// Every task as `(queue, id, state, kind, payload, retried, created_ms)`, in key order.
async fn tasks(url: &str) -> Vec<(String, String, String, String, String, i64, i64)> {
    const TASKS: &str = "SELECT queue, id, state, kind, payload, retried, created_ms \
         FROM retry_tasks ORDER BY queue, id";
    if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query_as(TASKS).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query_as(TASKS).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    }
}

/// Every earlier layout, loaded from its dump, upgrades in place when a queue connects: the
/// catalog is then the same as a new database's, every task is kept, the counts are the
/// tasks', and the queue works (a task enqueued, claimed and completed).
async fn every_earlier_layout_upgrades_in_place(backend: Backend) {
    let Some(new) = Fresh::new(backend, "layout_new").await else {
        return;
    };
    Queue::connect(&new.url).await.unwrap().close().await;
    let expected = catalog(&new.direct).await;
    new.done().await;
    let fixtures = fixtures(backend);
    assert!(fixtures.len() >= 14, "{} fixtures", fixtures.len());
    for (name, sql) in fixtures {
        let Some(db) = Fresh::new(backend, "layout").await else {
            return;
        };
        load(&db.direct, &sql).await;
        let before = tasks(&db.direct).await;
        assert!(!before.is_empty(), "{name}: the fixture has tasks");
        let q = Queue::connect(&db.url)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let layout = catalog(&db.direct).await;
        let missing: Vec<&String> = expected.iter().filter(|l| !layout.contains(l)).collect();
        let extra: Vec<&String> = layout.iter().filter(|l| !expected.contains(l)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: the layout after the upgrade lacks {missing:#?} and has besides {extra:#?}"
        );
        assert_eq!(
            tasks(&db.direct).await,
            before,
            "{name}: the tasks after the upgrade"
        );
        let mut queues: Vec<&str> = before.iter().map(|t| t.0.as_str()).collect();
        queues.dedup();
        for queue in queues {
            let q = q.clone().named(queue);
            for state in TaskState::ALL {
                let stored = before
                    .iter()
                    .filter(|t| t.0 == queue && t.2 == state.to_string())
                    .count();
                assert_eq!(
                    q.inspector().count(state).await.unwrap(),
                    stored as u64,
                    "{name}: {queue} {state}"
                );
            }
        }
        // The fixtures' archived task, "card declined by the fixture", ends with its reason in
        // words from the second layout on.
        let archived = q.inspector().get("fx-2-charge-archived").await.unwrap();
        let expected = match name.starts_with("01_") {
            true => ArchiveReason::Unknown,
            false => ArchiveReason::Exhausted,
        };
        assert_eq!(
            archived.map(|t| t.archive_reason),
            Some(Some(expected)),
            "{name}"
        );
        let q = q.named("after-upgrade");
        q.enqueue(Task::new("email", &1).task_id("new"))
            .await
            .unwrap();
        let claimed = protocol::claim(&q, 5, std::time::Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1, "{name}");
        assert!(protocol::complete(&q, &claimed[0]).await.unwrap(), "{name}");
        assert_eq!(
            q.inspector().count(TaskState::Completed).await.unwrap(),
            1,
            "{name}"
        );
        q.close().await;
        db.done().await;
    }
}

both_backends!(
    every_earlier_layout_upgrades_in_place,
    a_new_database_records_every_version_and_down_then_up_round_trips,
    a_schema_newer_than_this_build_is_refused_unless_it_only_adds,
    a_migration_applied_from_another_text_is_refused,
    processes_starting_together_migrate_once,
    migration_5_stores_the_archive_reason_and_down_drops_it,
    migration_6_adds_the_reported_probe_and_down_drops_it,
);

/// The count rows' stripes of the pending tasks, after `tasks` tasks inserted on one
/// connection, each in a transaction of its own.
async fn pending_stripes_after_inserts(direct: &str, tasks: usize, prefix: &str) -> i64 {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(direct).await.unwrap();
    for n in 0..tasks {
        let insert = format!(
            "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
             timeout_ms, created_ms, next_process_ms) \
             VALUES ('{prefix}', '{prefix}-{n}', 'noop', '0', 'pending', 0, 25, 1000, 1, 1)"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(insert))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let (stripes, counted): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(DISTINCT stripe), SUM(tasks)::bigint FROM retry_counts \
         WHERE queue = $1 AND state = 'pending'",
    )
    .bind(prefix)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        counted,
        i64::try_from(tasks).unwrap(),
        "the stripes sum to the tasks"
    );
    conn.close().await.unwrap();
    stripes
}

/// Migration 7 (PostgreSQL): a count row's stripe follows the transaction, so two pooled
/// connections that shared a stripe no longer meet in every statement (issue 45: the claims
/// of a worker of 1 000 slots waited on its completions' row locks). 40 transactions on one
/// connection write several stripes; down to 6, one (the connection's); the counts sum alike
/// either way, and up again restores the spread.
#[tokio::test]
async fn postgres_migration_7_stripes_the_counts_by_transaction_and_down_by_connection() {
    let Some(db) = Fresh::new(Backend::Postgres, "stripes").await else {
        return;
    };
    Queue::connect(&db.url).await.unwrap().close().await;
    assert!(pending_stripes_after_inserts(&db.direct, 40, "by-transaction").await > 1);
    let schema = Schema::connect(&db.url).await.unwrap();
    assert_eq!(schema.down(6).await.unwrap(), [7]);
    assert_eq!(
        pending_stripes_after_inserts(&db.direct, 40, "by-connection").await,
        1
    );
    assert_eq!(schema.up().await.unwrap(), [7]);
    assert!(pending_stripes_after_inserts(&db.direct, 40, "again").await > 1);
    let status = schema.status().await.unwrap();
    let newest = status.migrations.last().unwrap();
    assert_eq!((newest.version, newest.name.as_str()), (7, "stripes"));
    schema.close().await;
    db.done().await;
}

/// Every task's stored `archive_reason` as `(id, reason)`, in id order.
async fn stored_reasons(url: &str) -> Vec<(String, Option<String>)> {
    const REASONS: &str = "SELECT id, archive_reason FROM retry_tasks ORDER BY id";
    if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query_as(REASONS).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query_as(REASONS).fetch_all(&pool).await.unwrap();
        pool.close().await;
        rows
    }
}

fn reasons(rows: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    rows.iter()
        .map(|(id, reason)| ((*id).to_owned(), reason.map(str::to_owned)))
        .collect()
}

/// Migration 5 adds `archive_reason`, which every archive writes; down to 4 drops it and keeps
/// the tasks (their `last_err` still ends with the reason in words); up again leaves the old
/// rows NULL, read from their `last_err` (`Unknown` when it names none), and the next archive
/// stores its reason.
async fn migration_5_stores_the_archive_reason_and_down_drops_it(backend: Backend) {
    let Some(db) = Fresh::new(backend, "reasons").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.unwrap();
    q.enqueue(Task::new("charge", &1).task_id("spent").max_retry(0))
        .await
        .unwrap();
    q.enqueue(Task::new("email", &2).task_id("by-hand"))
        .await
        .unwrap();
    let w = Worker::new(q.clone()).handle("charge", |_task| async {
        Err::<(), BoxError>("card declined".into())
    });
    assert_eq!(w.run_due().await.unwrap(), 1);
    q.inspector().archive_task("by-hand").await.unwrap();
    assert_eq!(
        stored_reasons(&db.direct).await,
        reasons(&[("by-hand", Some("operator")), ("spent", Some("exhausted"))])
    );
    q.close().await;

    let schema = Schema::connect(&db.url).await.unwrap();
    // Down to 4 reverts migrations 7 and 6 (issues 45 and 44) first.
    assert_eq!(schema.down(4).await.unwrap(), [7, 6, 5]);
    let layout = catalog(&db.direct).await;
    assert!(
        !layout.iter().any(|line| line.contains("archive_reason")),
        "{layout:#?}"
    );
    assert_eq!(tasks(&db.direct).await.len(), 2, "down 4 keeps the tasks");
    assert_eq!(schema.up().await.unwrap(), [5, 6, 7]);
    schema.close().await;
    assert_eq!(
        stored_reasons(&db.direct).await,
        reasons(&[("by-hand", None), ("spent", None)])
    );
    let q = Queue::connect(&db.url).await.unwrap();
    let read = |id: &'static str| {
        let q = q.clone();
        async move { q.inspector().get(id).await.unwrap().unwrap().archive_reason }
    };
    // Read as the builds before the column wrote them: "card declined (retries exhausted: 0 of
    // 0)"; an operator's archive left no words.
    assert_eq!(read("spent").await, Some(ArchiveReason::Exhausted));
    assert_eq!(read("by-hand").await, Some(ArchiveReason::Unknown));
    q.inspector().run_task("by-hand").await.unwrap();
    q.inspector().archive_task("by-hand").await.unwrap();
    assert_eq!(read("by-hand").await, Some(ArchiveReason::Operator));
    // Out of the archive, the stored reason is cleared (by one task's run and by a whole
    // state's): a build of version 4 archiving the task again leaves NULL, read from its
    // `last_err`, not the reason of the earlier archive.
    let by_hand = |reason: Option<&str>| reasons(&[("by-hand", reason), ("spent", None)]);
    assert_eq!(stored_reasons(&db.direct).await, by_hand(Some("operator")));
    q.inspector().run_task("by-hand").await.unwrap();
    assert_eq!(stored_reasons(&db.direct).await, by_hand(None));
    q.inspector().archive_task("by-hand").await.unwrap();
    assert_eq!(stored_reasons(&db.direct).await, by_hand(Some("operator")));
    q.inspector().run_all(TaskState::Archived).await.unwrap();
    assert_eq!(stored_reasons(&db.direct).await, by_hand(None));
    q.close().await;
    db.done().await;
}

/// The columns of `retry_worker_systems` whose name starts with `probe_`, as the catalog lists
/// them.
async fn probe_columns(url: &str) -> Vec<String> {
    let layout = catalog(url).await;
    layout
        .into_iter()
        .filter(|line| line.starts_with("retry_worker_systems.probe_"))
        .map(|line| line.split(' ').next().unwrap_or_default().to_owned())
        .collect()
}

/// Migration 6 adds the last health probe a worker reports of each system (issue 44, item 2),
/// three nullable columns; down to 5 drops them, and a worker of version 5 (which names none
/// of them) writes its report either way.
async fn migration_6_adds_the_reported_probe_and_down_drops_it(backend: Backend) {
    let Some(db) = Fresh::new(backend, "probes").await else {
        return;
    };
    Queue::connect(&db.url).await.unwrap().close().await;
    let columns = [
        "retry_worker_systems.probe_error",
        "retry_worker_systems.probe_ms",
        "retry_worker_systems.probe_passed",
    ];
    assert_eq!(probe_columns(&db.direct).await, columns);
    let v5_report = |worker: &str| {
        format!(
            "INSERT INTO retry_worker_systems (worker, system, queues, held, rate_milli, \
             ramping, breaker, heartbeat_ms, stale_ms) \
             VALUES ('{worker}', 'payments', '[\"default\"]', 0, NULL, 0, 'closed', 1, 2)"
        )
    };
    db.raw(v5_report("beside-6")).await;
    let schema = Schema::connect(&db.url).await.unwrap();
    assert_eq!(schema.down(5).await.unwrap(), [7, 6]);
    assert_eq!(probe_columns(&db.direct).await, Vec::<String>::new());
    db.raw(v5_report("at-5")).await;
    assert_eq!(schema.up().await.unwrap(), [6, 7]);
    assert_eq!(probe_columns(&db.direct).await, columns);
    let status = schema.status().await.unwrap();
    let sixth = &status.migrations[5];
    assert_eq!((sixth.version, sixth.name.as_str()), (6, "probes"));
    schema.close().await;
    db.done().await;
}
