//! Worker processes killed (SIGKILL) at chosen points, seen from the outside: a process reports
//! what it is doing on its standard output, one line at a time, and a test kills it once the
//! lines, and the database read through connections of the test's own, say it is where the
//! test wants it:
//!
//! - holding prefetched tasks: [`kill_holding`] (a handler started, N tasks claimed);
//! - mid-batch: the batch's write blocked behind a lock held from another connection
//!   ([`WriteLock`], [`wait_blocked`] on PostgreSQL), then killed while it waits;
//! - mid-migration (or mid-transaction of any kind): on PostgreSQL, `ALTER TABLE` blocked inside
//!   the migration's transaction by a reader of the table ([`TableReader`]), then killed; on
//!   SQLite, killed as soon as another connection finds the database's write lock taken
//!   ([`kill_when_sqlite_locked`]): the process is then inside its write transaction (SQLite
//!   cannot be made to wait inside one by a lock: it takes the write lock when it begins).
//!
//! Every wait is bounded and fails the test with what the process said; dropping a
//! [`Process`] kills it (a test that failed half-way leaves no process behind) and, when the
//! test failed, prints its output.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use sqlx::Connection as _;

/// A child process whose standard output is read line by line as it comes.
pub struct Process {
    name: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Process {
    /// Starts `command` with its standard input piped (closing it is the graceful stop of the
    /// crash tests' workers), its standard output read by a thread, its standard error in
    /// `dir/<name>.stderr`.
    pub fn spawn(name: &str, mut command: Command, dir: &Path) -> Process {
        let stderr = dir.join(format!("{name}.stderr"));
        let file = File::create(&stderr).expect("the process's stderr file");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Process {
            name: name.to_owned(),
            child,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line it printed so far (as read by [`Process::wait_line`]).
    pub fn lines(&self) -> &[String] {
        &self.seen
    }

    /// Waits, at most `within`, for a line that `matches`, and returns it; fails the test with
    /// what the process said otherwise (or when it exits first).
    pub fn wait_line(
        &mut self,
        what: &str,
        within: Duration,
        mut matches: impl FnMut(&str) -> bool,
    ) -> String {
        self.wait_lines(what, 1, within, |l| matches(l)).remove(0)
    }

    /// Waits, at most `within`, until `count` of its lines match, and returns them.
    pub fn wait_lines(
        &mut self,
        what: &str,
        count: usize,
        within: Duration,
        mut matches: impl FnMut(&str) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let found: Vec<String> = self.seen.iter().filter(|l| matches(l)).cloned().collect();
            if found.len() >= count {
                return found;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    let said = self.said();
                    let n = found.len();
                    panic!("{n} of {count} {what} within {within:?}; {said}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().ok();
                    let said = self.said();
                    panic!("exited ({status:?}) before {count} {what}; {said}")
                }
            }
        }
    }

    /// Kills it with SIGKILL (also a stopped process) and reaps it.
    pub fn sigkill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.child.kill().expect("SIGKILL");
        }
        self.child.wait().expect("reap the killed process");
    }

    /// Waits, at most `within`, for it to exit by itself; its status.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let said = self.said();
                panic!("still running after {within:?}; {said}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes its standard input: the crash tests' workers then stop gracefully.
    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    /// What it printed, for a failure's message.
    fn said(&mut self) -> String {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "process {}: stdout: {:?}; stderr (last lines): {:?}",
            self.name,
            self.seen.iter().rev().take(20).rev().collect::<Vec<_>>(),
            tail
        )
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            let said = self.said();
            eprintln!("--- {said}");
        }
    }
}

/// The test binary cargo built at `built` (`env!("CARGO_BIN_EXE_…")`), or its copy in the
/// directory named by `RETRY_TEST_BIN_DIR` when that is set: checkouts that build in one shared
/// target directory replace each other's binaries, also under a running test.
pub fn test_binary(built: &str) -> PathBuf {
    let built = PathBuf::from(built);
    match (std::env::var_os("RETRY_TEST_BIN_DIR"), built.file_name()) {
        (Some(dir), Some(name)) => Path::new(&dir).join(name),
        _ => built,
    }
}

/// The URL `url` with, on PostgreSQL, the server told to check every 20 ms that the client is
/// still there: a killed client's statement that waits on a lock would otherwise go on server
/// side once the lock is released (as the server would notice a crashed host through TCP
/// keepalives, only later). SQLite's URL is returned as it is.
pub fn killable_url(url: &str) -> String {
    if url.starts_with("sqlite:") {
        return url.to_owned();
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20client_connection_check_interval%3D20")
}

/// Runs `sql`, a query of one integer, on a connection of its own.
pub async fn count(url: &str, sql: &str) -> i64 {
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.expect("open");
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.close().await.ok();
        n
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.close().await.ok();
        n
    }
}

/// How many tasks are claimed (`active`), across every queue of the database.
pub async fn active_tasks(url: &str) -> i64 {
    count(
        url,
        "SELECT COUNT(*) FROM retry_tasks WHERE state = 'active'",
    )
    .await
}

/// The point "holding prefetched tasks": waits until `worker` has printed `started` lines
/// `start <id> …` (handlers started) and the database shows `held` tasks claimed, then kills
/// it (SIGKILL). Returns the ids whose handler started. Bounded by `within`.
pub async fn kill_holding(
    worker: &mut Process,
    url: &str,
    started: usize,
    held: i64,
    within: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + within;
    let lines = worker.wait_lines("handler start", started, within, |l| {
        l.starts_with("start ")
    });
    loop {
        let now = active_tasks(url).await;
        if now == held {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} tasks claimed, not {held}, within {within:?}",
            now
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.sigkill();
    lines
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap_or_default().to_owned())
        .collect()
}

/// Holds what a write to `retry_tasks` needs, from a connection of its own, until
/// [`WriteLock::release`]: on SQLite the database's write lock (`BEGIN IMMEDIATE`), on
/// PostgreSQL the table in `SHARE` mode (every `INSERT`, `UPDATE` and `DELETE` of it waits;
/// reads go on).
pub enum WriteLock {
    /// The SQLite connection holding the write lock.
    Sqlite(sqlx::SqliteConnection),
    /// The PostgreSQL connection holding the table lock.
    Postgres(sqlx::PgConnection),
}

impl WriteLock {
    /// Takes the lock.
    pub async fn take(url: &str) -> WriteLock {
        if url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(url).await.expect("open");
            sqlx::raw_sql("BEGIN IMMEDIATE")
                .execute(&mut conn)
                .await
                .expect("the write lock");
            WriteLock::Sqlite(conn)
        } else {
            let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
            sqlx::raw_sql("BEGIN; LOCK TABLE retry_tasks IN SHARE MODE")
                .execute(&mut conn)
                .await
                .expect("the table lock");
            WriteLock::Postgres(conn)
        }
    }

    /// Holds what a write of one task needs: on SQLite the database's write lock (as
    /// [`take`](WriteLock::take)), on PostgreSQL only the row of task `id` (`SELECT … FOR
    /// UPDATE` in an open transaction): the other tasks' writes go on.
    pub async fn on_row(url: &str, id: &str) -> WriteLock {
        if url.starts_with("sqlite:") {
            return WriteLock::take(url).await;
        }
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
        sqlx::raw_sql("BEGIN")
            .execute(&mut conn)
            .await
            .expect("BEGIN");
        sqlx::query("SELECT 1 FROM retry_tasks WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(&mut conn)
            .await
            .expect("the task's row lock");
        WriteLock::Postgres(conn)
    }

    /// Rolls its transaction back: the writes waiting behind it go on.
    pub async fn release(self) {
        match self {
            WriteLock::Sqlite(mut conn) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.ok();
                conn.close().await.ok();
            }
            WriteLock::Postgres(mut conn) => {
                sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.ok();
                conn.close().await.ok();
            }
        }
    }
}

/// A PostgreSQL transaction that has read `table` and stays open: it holds the table's
/// `ACCESS SHARE` lock, so an `ALTER TABLE` of it (a migration) waits inside its own
/// transaction until [`TableReader::release`].
pub struct TableReader(sqlx::PgConnection);

impl TableReader {
    /// Opens the transaction and reads `table`.
    pub async fn take(url: &str, table: &str) -> TableReader {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN; SELECT COUNT(*) FROM {table}"
        )))
        .execute(&mut conn)
        .await
        .expect("the reading transaction");
        TableReader(conn)
    }

    /// Ends the transaction.
    pub async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK").execute(&mut self.0).await.ok();
        self.0.close().await.ok();
    }
}

/// PostgreSQL: waits, at most `within`, until a statement containing `needle` waits for a
/// lock (`pg_stat_activity`): the kill point "in flight, blocked" made deterministic.
pub async fn wait_blocked(url: &str, needle: &str, within: Duration) {
    let sql = format!(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
         AND position('{}' in query) > 0",
        needle.replace('\'', "''")
    );
    let deadline = Instant::now() + within;
    while count(url, &sql).await == 0 {
        assert!(
            Instant::now() < deadline,
            "no statement with {needle:?} waited for a lock within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SQLite: whether another connection holds the database's write lock, asked without waiting
/// (`BEGIN IMMEDIATE` with no busy timeout; rolled back at once when it succeeds).
pub async fn sqlite_write_locked(url: &str) -> bool {
    use std::str::FromStr as _;
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .expect("a SQLite URL")
        .busy_timeout(Duration::ZERO);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .expect("open");
    let locked = match sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut conn).await {
        Ok(_) => {
            sqlx::raw_sql("ROLLBACK").execute(&mut conn).await.ok();
            false
        }
        Err(e) if e.to_string().contains("locked") || e.to_string().contains("busy") => true,
        Err(e) => panic!("BEGIN IMMEDIATE: {e}"),
    };
    conn.close().await.ok();
    locked
}

/// SQLite's point "inside a write transaction": waits, at most `within`, until `process`
/// holds the database's write lock (seen by [`sqlite_write_locked`]), then kills it at once.
/// Returns how long the lock was looked for.
pub async fn kill_when_sqlite_locked(
    process: &mut Process,
    url: &str,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    while !sqlite_write_locked(url).await {
        assert!(
            started.elapsed() < within,
            "the write lock was never taken within {within:?}; {}",
            process.said()
        );
    }
    process.sigkill();
    started.elapsed()
}
