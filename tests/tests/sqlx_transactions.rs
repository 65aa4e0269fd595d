//! `#[retry]` around whole database transactions, against the real PostgreSQL of the durable
//! tests (`RETRY_TEST_POSTGRES_URL`, or a throwaway server): a serialization failure (`40001`)
//! and a deadlock (`40P01`) are retried and the transaction completes; a unique violation
//! (`23505`) is not retried. Each test works in a table of its own.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::{Classify, retry};
use retry_tests::durable_env::{postgres_url, postgres_url_or_skip};
use sqlx::{Connection, Executor, PgConnection, PgPool, Row};
use tokio::sync::oneshot;

/// A pool on the test server and a fresh table name, or `None` (said loudly) without PostgreSQL.
async fn database(test: &str) -> Option<(PgPool, String)> {
    let url = postgres_url_or_skip(test)?;
    let pool = PgPool::connect(&url)
        .await
        .expect("the test server answers");
    let table = format!(
        "{test}_{}_{:08x}",
        std::process::id(),
        rand::random::<u32>()
    );
    Some((pool, table))
}

/// Runs one statement built from our own table name (letters, digits and `_` only).
async fn exec(executor: impl Executor<'_, Database = sqlx::Postgres>, sql: String) {
    executor
        .execute(sqlx::AssertSqlSafe(sql))
        .await
        .expect("setup statement");
}

/// Records `key` in the transaction's key table: `false` when an earlier attempt already applied
/// it (a COMMIT whose reply was lost is not applied twice).
async fn first_time(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    table: &str,
    key: &str,
) -> Result<bool, sqlx::Error> {
    let fresh = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table}_keys (idempotency_key) VALUES ($1) ON CONFLICT (idempotency_key) DO NOTHING"
    )))
    .bind(key)
    .execute(&mut **tx)
    .await?;
    Ok(fresh.rows_affected() == 1)
}

/// Credits account 1 by 10, once per idempotency key, in one SERIALIZABLE transaction. On its
/// first attempt a concurrent transaction commits a credit of 1 to the same row between our read
/// and our write: PostgreSQL refuses our write with 40001, and the whole transaction runs again.
#[retry(write, idempotency_key = key, delay = "10ms")]
async fn credit(
    pool: &PgPool,
    table: &str,
    key: &str,
    interfere: &AtomicBool,
    attempts: &AtomicU32,
) -> Result<(), sqlx::Error> {
    attempts.fetch_add(1, Ordering::SeqCst);
    let mut tx = pool.begin().await?;
    tx.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        .await?;
    if !first_time(&mut tx, table, key).await? {
        return Ok(());
    }
    let balance: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT balance FROM {table} WHERE id = 1"
    )))
    .fetch_one(&mut *tx)
    .await?
    .get(0);
    if interfere.swap(false, Ordering::SeqCst) {
        let mut other = pool.acquire().await?;
        exec(
            &mut *other,
            format!("UPDATE {table} SET balance = balance + 1 WHERE id = 1"),
        )
        .await;
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET balance = $1 WHERE id = 1"
    )))
    .bind(balance + 10)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

#[tokio::test]
async fn a_serialization_failure_reruns_the_whole_transaction() {
    let Some((pool, table)) = database("serialization").await else {
        return;
    };
    exec(
        &pool,
        format!("CREATE TABLE {table} (id INT PRIMARY KEY, balance BIGINT NOT NULL)"),
    )
    .await;
    exec(
        &pool,
        format!("CREATE TABLE {table}_keys (idempotency_key TEXT PRIMARY KEY)"),
    )
    .await;
    exec(&pool, format!("INSERT INTO {table} VALUES (1, 100)")).await;

    let (interfere, attempts) = (AtomicBool::new(true), AtomicU32::new(0));
    credit(&pool, &table, "credit-1", &interfere, &attempts)
        .await
        .expect("the second attempt commits");
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "40001, then success");
    let balance: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT balance FROM {table} WHERE id = 1"
    )))
    .fetch_one(&pool)
    .await
    .unwrap()
    .get(0);
    assert_eq!(balance, 100 + 1 + 10, "both credits, ours once");

    // The same key again: deduplicated by the transaction itself, one attempt.
    credit(&pool, &table, "credit-1", &interfere, &attempts)
        .await
        .unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    exec(&pool, format!("DROP TABLE {table}, {table}_keys")).await;
}

/// Moves 5 from row 1 to row 2, locking row 1 first. On its first attempt another transaction
/// holds row 2 and then waits for row 1: a deadlock, which this transaction (with the shorter
/// `deadlock_timeout`) detects, and is rolled back as its victim (40P01).
#[retry(write, idempotency_key = key, delay = "10ms")]
async fn transfer(
    pool: &PgPool,
    url: &str,
    table: &str,
    key: &str,
    provoke: &AtomicBool,
    attempts: &AtomicU32,
) -> Result<(), sqlx::Error> {
    attempts.fetch_add(1, Ordering::SeqCst);
    let mut tx = pool.begin().await?;
    tx.execute("SET LOCAL deadlock_timeout = '100ms'").await?;
    if !first_time(&mut tx, table, key).await? {
        return Ok(());
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET balance = balance - 5 WHERE id = 1"
    )))
    .execute(&mut *tx)
    .await?;
    let other = if provoke.swap(false, Ordering::SeqCst) {
        let (locked, holds_row_2) = oneshot::channel();
        let (url, table) = (url.to_owned(), table.to_owned());
        let other = tokio::spawn(async move {
            let mut conn = PgConnection::connect(&url).await.expect("connect");
            let mut other = conn.begin().await.expect("begin");
            exec(&mut *other, "SET LOCAL deadlock_timeout = '10s'".to_owned()).await;
            exec(
                &mut *other,
                format!("UPDATE {table} SET balance = balance + 1 WHERE id = 2"),
            )
            .await;
            locked.send(()).expect("the attempt waits");
            // Blocks on row 1 until our victim rolls back.
            exec(
                &mut *other,
                format!("UPDATE {table} SET balance = balance + 1 WHERE id = 1"),
            )
            .await;
            other.commit().await.expect("commit");
        });
        holds_row_2
            .await
            .expect("the other transaction locked row 2");
        Some(other)
    } else {
        None
    };
    let moved = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET balance = balance + 5 WHERE id = 2"
    )))
    .execute(&mut *tx)
    .await;
    if let Err(e) = moved {
        drop(tx); // rolled back: the other transaction goes on
        if let Some(other) = other {
            other.await.expect("the other transaction commits");
        }
        return Err(e);
    }
    tx.commit().await
}

#[tokio::test]
async fn a_deadlock_victim_is_retried() {
    let Some((pool, table)) = database("deadlock").await else {
        return;
    };
    let url = postgres_url().expect("the server of this test");
    exec(
        &pool,
        format!("CREATE TABLE {table} (id INT PRIMARY KEY, balance BIGINT NOT NULL)"),
    )
    .await;
    exec(
        &pool,
        format!("CREATE TABLE {table}_keys (idempotency_key TEXT PRIMARY KEY)"),
    )
    .await;
    exec(
        &pool,
        format!("INSERT INTO {table} VALUES (1, 100), (2, 0)"),
    )
    .await;
    let (provoke, attempts) = (AtomicBool::new(true), AtomicU32::new(0));
    tokio::time::timeout(
        Duration::from_secs(30),
        transfer(&pool, &url, &table, "transfer-1", &provoke, &attempts),
    )
    .await
    .expect("bounded")
    .expect("the second attempt commits");
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "40P01, then success");
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT balance FROM {table} ORDER BY id"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    let balances: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
    assert_eq!(balances, [100 + 1 - 5, 1 + 5]);
    exec(&pool, format!("DROP TABLE {table}, {table}_keys")).await;
}

#[retry(write, idempotency_key = id, delay = "10ms")]
async fn insert(
    pool: &PgPool,
    table: &str,
    id: &str,
    attempts: &AtomicU32,
) -> Result<(), sqlx::Error> {
    attempts.fetch_add(1, Ordering::SeqCst);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} (id) VALUES ($1)"
    )))
    .bind(id)
    .execute(pool)
    .await
    .map(drop)
}

#[tokio::test]
async fn a_unique_violation_is_not_retried() {
    let Some((pool, table)) = database("unique").await else {
        return;
    };
    exec(&pool, format!("CREATE TABLE {table} (id TEXT PRIMARY KEY)")).await;
    let attempts = AtomicU32::new(0);
    insert(&pool, &table, "order-7", &attempts).await.unwrap();
    let error = insert(&pool, &table, "order-7", &attempts)
        .await
        .unwrap_err();
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "one attempt each");
    let code = error
        .as_database_error()
        .and_then(|db| db.code())
        .map(|code| code.into_owned());
    assert_eq!(code.as_deref(), Some("23505"));
    assert!(!error.is_transient());
    exec(&pool, format!("DROP TABLE {table}")).await;
}
