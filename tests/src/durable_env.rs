//! What the durable queue's test suites share: a queue of its own per test on SQLite (a
//! temporary file) or PostgreSQL ([`postgres_url`], a queue name per test), read
//! through a `ManualClock`, and [`both_backends!`](crate::both_backends) to run one test fn on
//! each.

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use retry_runtime::durable::{
    DelayRng, ManualClock, Queue, TaskInfo, TaskQuery, TaskState, Worker,
};

/// 2023-11-14 22:13:20 UTC: where every test's clock starts, in seconds since the epoch.
pub const T0_SECS: u64 = 1_700_000_000;

/// [`T0_SECS`] as a time.
pub fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(T0_SECS)
}

/// `s` seconds.
pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Where a test's queue lives.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    /// A temporary SQLite file per test.
    Sqlite,
    /// The server of `RETRY_TEST_POSTGRES_URL`, a queue name per test.
    Postgres,
    /// The same server through PgBouncer in transaction pooling mode ([`pgbouncer_url`]), a
    /// queue name per test.
    PgBouncer,
}

/// A queue of its own for one test, and the clock it reads.
pub struct Env {
    /// The test's queue, reading [`Env::clock`].
    pub q: Queue,
    /// The queue's clock, at [`t0`] when the test starts.
    pub clock: ManualClock,
    /// The database's URL.
    pub url: String,
    /// Through PgBouncer: the server's own URL, the queue's `listen_url` (wake-ups bypass
    /// the pooler, as a deployment should run).
    pub listen_url: Option<String>,
    /// The queue's name (unique per test on PostgreSQL).
    pub name: String,
    _dir: Option<tempfile::TempDir>,
}

impl Env {
    /// A fresh queue on `backend`; `None` (said on stderr) when PostgreSQL is not configured.
    pub async fn new(backend: Backend, test: &str) -> Option<Env> {
        let clock = ManualClock::new(t0());
        let listen_url = match backend {
            Backend::PgBouncer => Some(postgres_url_or_skip(test)?),
            _ => None,
        };
        let (url, name, dir) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
                (url, test.to_owned(), Some(dir))
            }
            Backend::Postgres | Backend::PgBouncer => {
                let url = match backend {
                    Backend::PgBouncer => pgbouncer_url_or_skip(test)?,
                    _ => postgres_url_or_skip(test)?,
                };
                let unique = format!(
                    "{test}-{}-{:016x}",
                    std::process::id(),
                    rand::random::<u64>()
                );
                (url, unique, None)
            }
        };
        let q = connect(&url, listen_url.as_deref())
            .await
            .named(name.clone());
        Some(Env {
            q: q.with_clock(clock.clone()),
            clock,
            url,
            listen_url,
            name,
            _dir: dir,
        })
    }

    /// The same queue through connections of its own, as another process would open it, on
    /// the same manual clock.
    pub async fn other_process(&self) -> Queue {
        self.on_system_clock().await.with_clock(self.clock.clone())
    }

    /// The same queue through connections of its own, on the system clock.
    pub async fn on_system_clock(&self) -> Queue {
        connect(&self.url, self.listen_url.as_deref())
            .await
            .named(self.name.clone())
    }

    /// The database's URL without PgBouncer, for statements outside the queue (a test's own
    /// sqlx statements are named prepared statements, which a transaction pooler does not
    /// keep).
    pub fn direct_url(&self) -> &str {
        self.listen_url.as_deref().unwrap_or(&self.url)
    }

    /// The ids of the queue's tasks in `state`, sorted.
    pub async fn ids(&self, state: TaskState) -> Vec<String> {
        let mut ids: Vec<String> = self
            .q
            .inspector()
            .tasks(TaskQuery::new(state))
            .await
            .expect("list")
            .tasks
            .into_iter()
            .map(|info| info.id)
            .collect();
        ids.sort();
        ids
    }

    /// The task, which must exist.
    pub async fn info(&self, id: &str) -> TaskInfo {
        self.q
            .inspector()
            .get(id)
            .await
            .expect("get")
            .expect("the task exists")
    }

    /// `t0 + offset`.
    pub fn at(&self, offset: Duration) -> SystemTime {
        t0() + offset
    }

    /// Waits (bounded: 20 s at most) until the task is in `state`.
    pub async fn wait_for(&self, id: &str, state: TaskState) -> TaskInfo {
        for _ in 0..2_000 {
            let info = self.info(id).await;
            if info.state == state {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "task {id} never reached {state:?}: {:?}",
            self.info(id).await
        );
    }
}

/// The queue at `url`, its workers listening through `listen_url` when given.
///
/// # Panics
/// When the database does not answer.
pub async fn connect(url: &str, listen_url: Option<&str>) -> Queue {
    let builder = Queue::builder(url);
    let builder = match listen_url {
        Some(listen_url) => builder.listen_url(listen_url),
        None => builder,
    };
    builder.connect().await.expect("the test database answers")
}

/// A worker of `env`'s queue with a fixed random term of 7 in the default delay.
pub fn worker(env: &Env) -> Worker {
    Worker::new(env.q.clone())
        .concurrency(4)
        .rng(DelayRng::fixed(7))
}

/// `both_backends!(test_a, test_b)`: a `sqlite`, a `postgres` and a `pgbouncer` module (the
/// same server through PgBouncer in transaction pooling mode) with one `#[tokio::test]` per
/// name, calling `name(Backend)` of the enclosing module.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::durable_env::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::durable_env::Backend::Postgres).await;
                }
            )*
        }
        mod pgbouncer {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::durable_env::Backend::PgBouncer).await;
                }
            )*
        }
    };
}

/// The PostgreSQL server of the durable tests: `RETRY_TEST_POSTGRES_URL` when set; otherwise,
/// when the machine has the server binaries, a throwaway cluster on 127.0.0.1 started once per
/// test process by `scripts/postgres.sh serve-while` (stopped and deleted when the process
/// ends); `None` when there are no binaries.
///
/// # Panics
///
/// When the binaries are there but the cluster does not start: that is a broken machine, not a
/// skip.
pub fn postgres_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("RETRY_TEST_POSTGRES_URL") {
            return Some(url);
        }
        serve_while("postgres.sh", &[], "RETRY_TEST_POSTGRES_URL", "PostgreSQL")
    })
    .clone()
}

/// [`postgres_url`], or `None` after saying on stderr, loudly, that the PostgreSQL test `test`
/// did not run (straight to stderr: the test harness hides what a passing test prints, and a
/// skip must be seen).
pub fn postgres_url_or_skip(test: &str) -> Option<String> {
    let url = postgres_url();
    if url.is_none() {
        say_skipped(&format!(
            "PostgreSQL test `{test}` did NOT run: RETRY_TEST_POSTGRES_URL is not set and this \
             machine has no PostgreSQL server binaries (apt-get install postgresql)"
        ));
    }
    url
}

/// The PgBouncer of the durable tests, in transaction pooling mode in front of the server of
/// [`postgres_url`]: `RETRY_TEST_PGBOUNCER_URL` when set; otherwise, when the machine has
/// `pgbouncer`, one started once per test process by `scripts/pgbouncer.sh serve-while`
/// (stopped when the process ends); `None` without PostgreSQL or without `pgbouncer`.
///
/// # Panics
///
/// When `pgbouncer` is there but does not start.
pub fn pgbouncer_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("RETRY_TEST_PGBOUNCER_URL") {
            return Some(url);
        }
        let server = postgres_url()?;
        serve_while(
            "pgbouncer.sh",
            &[&server],
            "RETRY_TEST_PGBOUNCER_URL",
            "pgbouncer",
        )
    })
    .clone()
}

/// [`pgbouncer_url`], or `None` after saying on stderr, loudly, that the PgBouncer test `test`
/// did not run.
pub fn pgbouncer_url_or_skip(test: &str) -> Option<String> {
    postgres_url_or_skip(test)?;
    let url = pgbouncer_url();
    if url.is_none() {
        say_skipped(&format!(
            "PgBouncer test `{test}` did NOT run: RETRY_TEST_PGBOUNCER_URL is not set and this \
             machine has no pgbouncer (apt-get install pgbouncer)"
        ));
    }
    url
}

/// Runs `scripts/SCRIPT serve-while <this process> ARGS…` and returns the URL it exports as
/// `EXPORT`: a throwaway server stopped when this process ends. `None` when the script exits 3
/// (`WHAT` is not installed: the caller's tests skip).
///
/// # Panics
///
/// When `WHAT` is installed but did not start: a broken machine, not a skip.
fn serve_while(script: &str, args: &[&str], export: &str, what: &str) -> Option<String> {
    let path = format!("{}/../scripts/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("bash")
        .arg(&path)
        .arg("serve-while")
        .arg(std::process::id().to_string())
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("bash runs scripts/{script}: {e}"));
    if output.status.code() == Some(3) {
        return None;
    }
    assert!(
        output.status.success(),
        "scripts/{script} serve-while failed ({}): {what} is installed but did not start",
        output.status
    );
    let exports = String::from_utf8_lossy(&output.stdout);
    let prefix = format!("export {export}=");
    let url = exports
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("scripts/{script} prints {export}"));
    Some(url.to_owned())
}

/// Says on stderr, loudly, that a test skipped and why (straight to stderr: the test harness
/// hides what a passing test prints, and a skip must be seen).
fn say_skipped(why: &str) {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("*** SKIPPED: {why}\n").as_bytes(),
    );
}

/// A PostgreSQL database of a test's own on the server of [`postgres_url`] (`CREATE DATABASE`),
/// for tests whose worker processes need a database to themselves (their own tables, or the
/// whole `retry_tasks`); [`PgDatabase::drop_database`] drops it.
pub struct PgDatabase {
    /// The database's URL.
    pub url: String,
    server: String,
    name: String,
}

impl PgDatabase {
    /// A fresh database named after `test` (and this process, and the time), or `None` after
    /// a loud skip line without PostgreSQL.
    ///
    /// # Panics
    /// When the server does not answer or refuses the `CREATE DATABASE`.
    pub async fn create(test: &str) -> Option<PgDatabase> {
        use sqlx::Connection as _;
        let server = postgres_url_or_skip(test)?;
        let name = format!(
            "{}_{}_{}",
            test.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock after 1970")
                .subsec_nanos()
        );
        let name: String = name.chars().take(63).collect();
        let mut admin = sqlx::PgConnection::connect(&server)
            .await
            .unwrap_or_else(|e| panic!("{server}: cannot connect: {e}"));
        // The name is ours: ASCII letters, digits and `_` only.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .expect("CREATE DATABASE");
        admin.close().await.ok();
        Some(PgDatabase {
            url: with_database(&server, &name),
            server,
            name,
        })
    }

    /// The database's URL through [`pgbouncer_url`], or `None` after a loud skip line without
    /// `pgbouncer` (the database is left for [`PgDatabase::drop_database`]).
    pub fn through_pgbouncer(&self, test: &str) -> Option<String> {
        Some(with_database(&pgbouncer_url_or_skip(test)?, &self.name))
    }

    /// Drops the database (`WITH (FORCE)`: connections left behind by killed processes too).
    pub async fn drop_database(self) {
        use sqlx::Connection as _;
        if let Ok(mut admin) = sqlx::PgConnection::connect(&self.server).await {
            let drop = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
            let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
                .execute(&mut admin)
                .await;
            admin.close().await.ok();
        }
    }
}

/// `postgres://user@host:port/db?params` with its database replaced by `name`.
pub fn with_database(server: &str, name: &str) -> String {
    let (base, query) = match server.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (server, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut url = format!("{}/{name}", &base[..host_end]);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

/// Polls `check` every `every` until it returns `Some`, and returns that; fails the test after
/// `within`, naming `what` it waited for. For the suites that watch real processes, where no
/// clock can be paused: the wait is bounded, and nothing asserts how long it took.
pub async fn poll_until<T, F, Fut>(what: &str, within: Duration, every: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Runs `worker` on a task of its own until the returned sender fires (or is dropped); the
/// handle ends when the worker has stopped gracefully.
///
/// # Panics
/// The handle's task panics when the worker's run fails.
pub fn start(
    worker: Worker,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        worker
            .run_until(async {
                stopped.await.ok();
            })
            .await
            .expect("the worker runs");
    });
    (stop, running)
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn with_database_replaces_only_the_database() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/retry_test", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/db?sslmode=disable", "x"),
            "postgres://u:p@h:1/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
    }
}
