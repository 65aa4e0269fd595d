//! The queue handle: connecting, enqueueing, and the hand-over from `#[retry]`. The operator's
//! methods are on its [`Inspector`], the claim protocol in [`protocol`](crate::durable::protocol).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::durable::client::prepare::Prepared;
use crate::durable::client::task::{MAX_NAME_BYTES, Task};
use crate::durable::clock::SystemClock;
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::handle::wake::Wake;
use crate::durable::inspector::Inspector;
use crate::durable::schema::Schema;
use crate::durable::store::file_identity::WatchedFile;
use crate::durable::store::{NewTask, Store, enqueue, migrator, tasks};
use crate::durable::types::defaults::{
    DEFAULT_ARCHIVE_MAX_AGE, DEFAULT_ARCHIVE_MAX_TASKS, DEFAULT_COMPLETED_RETENTION, DEFAULT_QUEUE,
};
use crate::durable::types::task::TaskInfo;

/// A handle on one named queue of a task database: cheap to clone, shared by the clients that
/// enqueue, the workers that run the tasks ([`Worker::new`](crate::durable::Worker::new)) and the
/// operator's [`inspector`](Queue::inspector).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use retry_runtime::durable::{Queue, Task, TaskState};
/// # let dir = std::env::temp_dir().join(format!("retry-doc-queue-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
/// let q = Queue::connect(&url).await?; // "sqlite://tasks.db" creates the file
/// let info = q.enqueue(Task::new("email", &("ada@example.com", 42)).task_id("welcome-42")).await?;
/// assert_eq!(info.state, TaskState::Pending);
/// assert_eq!(q.inspector().get("welcome-42").await?.unwrap().kind, "email");
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Queue {
    pub(crate) handle: Handle,
}

impl Queue {
    /// Opens the queue [`"default"`](DEFAULT_QUEUE) of the database at `url`, creating the
    /// table (and, for SQLite, the file) if missing.
    ///
    /// - `sqlite://PATH` (feature `sqlite`): `sqlite://tasks.db` is relative to the working
    ///   directory, `sqlite:///var/lib/app/tasks.db` absolute. WAL mode, `synchronous = NORMAL`
    ///   (a commit survives a crash of the process), a 10 s busy timeout for other processes.
    /// - `postgres://user:password@host:port/database` (feature `postgres`): no TLS.
    ///
    /// A database that cannot be reached gives [`Error::Unreachable`].
    ///
    /// The schema's pending migrations are applied first ([`Schema`](crate::durable::Schema));
    /// a schema newer than this build can use is refused. [`Queue::builder`] has the options.
    pub async fn connect(url: &str) -> Result<Queue, Error> {
        Queue::builder(url).connect().await
    }

    /// The schema of this queue's database, on the same connections.
    pub fn schema(&self) -> Schema {
        Schema {
            store: self.handle.store.clone(),
        }
    }

    /// Opens the queue on a pool the application already has (WAL mode is up to the pool's
    /// options); applies the schema's pending migrations, as [`Queue::connect`] does.
    #[cfg(feature = "sqlite")]
    pub async fn from_sqlite_pool(pool: sqlx::SqlitePool) -> Result<Queue, Error> {
        let store = Store::Sqlite(pool);
        migrator::prepare(&store, true).await?;
        Ok(Queue::from_store(store))
    }

    /// Opens the queue on a pool the application already has; applies the schema's pending
    /// migrations, as [`Queue::connect`] does. The pool keeps its own options: unlike the pool
    /// of [`Queue::connect`], it does not close the connections opened before a failover's
    /// error ([`Error::Unreachable`] of a read-only server) when they are acquired, so after a
    /// failover to an address that moved it may go on reaching the former primary.
    ///
    /// The pool is used as a direct session: its statements are prepared once per connection
    /// (sqlx's statement cache) and the workers `LISTEN` on one of its connections. Behind a
    /// pooler in transaction mode (PgBouncer's `pool_mode = transaction`) that breaks: connect
    /// with [`Queue::builder`] instead, `.transaction_pooler(true)` (or let it detect the
    /// pooler) and `.listen_url(direct_url)`, which run each statement in a transaction of
    /// its own without named prepared statements.
    #[cfg(feature = "postgres")]
    pub async fn from_pg_pool(pool: sqlx::PgPool) -> Result<Queue, Error> {
        let store = Store::Postgres(pool);
        migrator::prepare(&store, true).await?;
        Ok(Queue::from_store(store))
    }

    pub(crate) fn from_store(store: Store) -> Queue {
        let handle = Handle {
            name: Arc::from(DEFAULT_QUEUE),
            clock: Arc::new(SystemClock),
            archive_max_tasks: DEFAULT_ARCHIVE_MAX_TASKS,
            archive_max_age: DEFAULT_ARCHIVE_MAX_AGE,
            completed_retention: DEFAULT_COMPLETED_RETENTION,
            wake: Wake::new(),
            file: WatchedFile::of(&store).map(Arc::new),
            store,
        };
        Queue { handle }
    }

    /// The queue `name` of the same database, sharing the connections. Queues are independent:
    /// ids are unique per queue, and a worker claims from its own queue only. Give each pool of
    /// workers with its own set of handlers its own queue.
    ///
    /// # Panics
    /// If `name` is empty or longer than 1 KiB.
    pub fn named(self, name: impl Into<String>) -> Self {
        match self.try_named(name) {
            Ok(queue) => queue,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`named`](Queue::named) for a name from outside (a URL path, a command line): a name
    /// that is empty or longer than 1 KiB is [`Error::Invalid`] instead of a panic.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), retry_runtime::durable::Error> {
    /// use retry_runtime::durable::{Error, Queue};
    /// # let dir = std::env::temp_dir().join(format!("retry-doc-try-named-{}", std::process::id()));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let url = format!("sqlite://{}/tasks.db", dir.display());
    /// let q = Queue::connect(&url).await?;
    /// assert_eq!(q.clone().try_named("emails")?.name(), "emails");
    /// assert!(matches!(q.try_named(""), Err(Error::Invalid(_))));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn try_named(mut self, name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(Error::Invalid(format!(
                "a queue name is 1 to {MAX_NAME_BYTES} bytes, got {} bytes",
                name.len()
            )));
        }
        self.handle.name = Arc::from(name);
        Ok(self)
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// Reads time from `clock` instead of the system's: every time the queue stores (due times,
    /// leases, failures, key expiries, archive ages) follows it. Workers made from this handle
    /// share it. A knob for tests (feature `test-util`).
    #[cfg(any(test, feature = "test-util"))]
    pub fn with_clock(mut self, clock: impl crate::durable::clock::Clock) -> Self {
        self.handle.clock = Arc::new(clock);
        self
    }

    /// Caps the archive (default: the newest [`DEFAULT_ARCHIVE_MAX_TASKS`] tasks, archived within
    /// [`DEFAULT_ARCHIVE_MAX_AGE`]). The oldest archived tasks beyond either bound are deleted as
    /// tasks are archived.
    pub fn archive_limits(mut self, max_tasks: u64, max_age: Duration) -> Self {
        self.handle.archive_max_tasks = max_tasks;
        self.handle.archive_max_age = max_age;
        self
    }

    /// How long completed tasks are kept (default [`DEFAULT_COMPLETED_RETENTION`]): while kept,
    /// their ids still conflict, so a late duplicate enqueue is refused. Workers delete older
    /// ones as they go.
    pub fn completed_retention(mut self, retention: Duration) -> Self {
        self.handle.completed_retention = retention;
        self
    }

    /// The current time, by the queue's clock.
    pub fn now(&self) -> SystemTime {
        self.handle.clock.now()
    }

    /// Adds `task` to the queue: [`TaskState::Pending`](crate::durable::TaskState::Pending), or [`TaskState::Scheduled`](crate::durable::TaskState::Scheduled) when it has
    /// a [`process_at`](Task::process_at) in the future.
    ///
    /// With the `opentelemetry` feature, records the current `tracing` span's trace context on
    /// the task (unless it has a [`trace_parent`](Task::trace_parent) of its own).
    ///
    /// Fails with [`Error::TaskIdConflict`] when the queue already holds a task with its id,
    /// [`Error::PayloadTooLarge`] above [`MAX_PAYLOAD_BYTES`](crate::durable::MAX_PAYLOAD_BYTES), [`Error::Encode`],
    /// [`Error::Invalid`] for an empty kind or id or a malformed
    /// [`trace_parent`](Task::trace_parent), and [`Error::Unreachable`] /
    /// [`Error::Database`] when nothing could be written.
    pub async fn enqueue(&self, task: Task) -> Result<TaskInfo, Error> {
        let current = crate::durable::traceparent::current();
        let prepared = Prepared::new(task, self.handle.clock.now(), current.as_deref())?;
        let new = prepared.row();
        let (id, now_ms) = (new.id, new.created_ms);
        if let Some(row) = tasks::insert(&self.handle.store, &self.handle.name, &new).await? {
            self.handle.wake.ring();
            return Ok(row.into_info());
        }
        if tasks::exists(&self.handle.store, &self.handle.name, id).await? {
            return Err(Error::TaskIdConflict);
        }
        let Some(unique_key) = new.unique_key else {
            // The conflicting row went away in between (deleted or trimmed): one more try.
            return self.insert_again(&new).await;
        };
        // A unique task holds the key. Once its ttl has run out, the key is free: release it
        // (one statement, so of two enqueues racing here only one wins) and insert again.
        if tasks::release_unique(&self.handle.store, &self.handle.name, unique_key, now_ms).await? {
            return self.insert_again(&new).await;
        }
        match tasks::unique_holder(&self.handle.store, &self.handle.name, unique_key).await? {
            Some((holder, _)) => Err(Error::DuplicateTask { id: holder }),
            None => self.insert_again(&new).await,
        }
    }

    /// Adds every task of `tasks` in one transaction, all or nothing; returns how many were
    /// enqueued. Each is checked and stored as [`enqueue`](Queue::enqueue) would, with one
    /// statement per 10 000 tasks (PostgreSQL: one array per column, `unnest`ed; SQLite: one
    /// JSON array of rows) and one commit for the batch.
    ///
    /// A task that [`enqueue`](Queue::enqueue) would refuse refuses the whole batch, nothing
    /// written: [`Error::BatchRefused`] names its id, and its `cause` says why (an id taken in
    /// the queue or twice in the batch: [`Error::TaskIdConflict`]; a unique task still held:
    /// [`Error::DuplicateTask`]; an invalid task). An empty batch enqueues nothing and gives 0.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), retry_runtime::durable::Error> {
    /// use retry_runtime::durable::{Error, Queue, Task};
    /// # let dir = std::env::temp_dir().join(format!("retry-doc-many-{}", std::process::id()));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let url = format!("sqlite://{}/tasks.db", dir.display());
    /// let q = Queue::connect(&url).await?;
    /// let batch = (0..3).map(|n| Task::new("email", &n).task_id(format!("mail-{n}")));
    /// assert_eq!(q.enqueue_many(batch).await?, 3);
    ///
    /// let again = [Task::new("email", &9).task_id("mail-9"), Task::new("email", &1).task_id("mail-1")];
    /// match q.enqueue_many(again).await {
    ///     Err(Error::BatchRefused { id, .. }) => assert_eq!(id, "mail-1"),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(q.inspector().get("mail-9").await?.is_none()); // all or nothing
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enqueue_many(&self, tasks: impl IntoIterator<Item = Task>) -> Result<u64, Error> {
        let now = self.handle.clock.now();
        let refuse = |id: &str, cause: Error| Error::BatchRefused {
            id: id.to_owned(),
            cause: Box::new(cause),
        };
        let current = crate::durable::traceparent::current();
        let mut prepared = Vec::new();
        for task in tasks {
            let id = task.id.clone().unwrap_or_default();
            let task = Prepared::new(task, now, current.as_deref());
            prepared.push(task.map_err(|e| refuse(&id, e))?);
        }
        // Conflicts inside the batch are found here: the database would only skip the row.
        let mut ids = std::collections::HashSet::with_capacity(prepared.len());
        let mut keys = std::collections::HashMap::new();
        for task in &prepared {
            if !ids.insert(task.id.as_str()) {
                return Err(refuse(&task.id, Error::TaskIdConflict));
            }
            if let Some(key) = task.unique_key.as_deref() {
                if let Some(holder) = keys.insert(key, task.id.as_str()) {
                    let holder = holder.to_owned();
                    return Err(refuse(&task.id, Error::DuplicateTask { id: holder }));
                }
            }
        }
        let rows: Vec<NewTask<'_>> = prepared.iter().map(Prepared::row).collect();
        let now_ms = crate::durable::clock::to_ms(now);
        match enqueue::insert_many(&self.handle.store, &self.handle.name, &rows, now_ms).await? {
            Ok(n) => {
                // PostgreSQL's statement trigger notifies other processes; this wakes ours.
                self.handle.wake.ring();
                Ok(n)
            }
            Err((index, cause)) => Err(refuse(rows[index].id, cause)),
        }
    }

    /// The last try of an insert whose conflict went away: a conflict now is reported as such.
    async fn insert_again(&self, new: &NewTask<'_>) -> Result<TaskInfo, Error> {
        if let Some(row) = tasks::insert(&self.handle.store, &self.handle.name, new).await? {
            self.handle.wake.ring();
            return Ok(row.into_info());
        }
        if tasks::exists(&self.handle.store, &self.handle.name, new.id).await? {
            return Err(Error::TaskIdConflict);
        }
        let holder = match new.unique_key {
            Some(key) => tasks::unique_holder(&self.handle.store, &self.handle.name, key).await?,
            None => None,
        };
        Err(Error::DuplicateTask {
            id: holder.map(|(id, _)| id).unwrap_or_default(),
        })
    }

    /// The operator's handle on this queue (asynq's `Inspector`): look at tasks and queues,
    /// re-run, archive or delete tasks, pause the queue, group failures by their error.
    pub fn inspector(&self) -> Inspector {
        Inspector::new(self.handle.clone())
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), Error> {
        tasks::ping(&self.handle.store).await
    }

    /// Closes the connections (after which every call fails with [`Error::Unreachable`]).
    pub async fn close(&self) {
        self.handle.store.close().await;
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.handle.fmt(f)
    }
}
