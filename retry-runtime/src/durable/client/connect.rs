//! Opening a queue with options: [`Queue::builder`](super::queue::Queue::builder).

use crate::durable::client::queue::Queue;
use crate::durable::error::Error;
use crate::durable::store::{Store, migrator};

/// The options of [`Queue::builder`]: `.migrate(false)`, then `.connect().await`.
#[derive(Clone, Debug)]
#[must_use = "a Connect does nothing until .connect().await"]
pub struct Connect {
    url: String,
    migrate: bool,
    transaction_pooler: Option<bool>,
    listen_url: Option<String>,
}

impl Queue {
    /// Opens a queue with options: `Queue::builder(url).migrate(false).connect().await`.
    pub fn builder(url: &str) -> Connect {
        Connect {
            url: url.to_owned(),
            migrate: true,
            transaction_pooler: None,
            listen_url: None,
        }
    }
}

impl Connect {
    /// Whether connecting applies the schema's pending migrations (the default: yes). With
    /// `false`, connecting changes nothing: a database without the queue's schema, or whose
    /// schema is behind this build's, is refused with an error that says so, and the operator
    /// migrates it (`retry-queue migrate up`, or [`Schema::up`](crate::durable::Schema::up)),
    /// e.g. from a deploy step, so that workers run without the rights to change tables (the
    /// `retry-queue` commands other than `migrate` connect so). Either way a table named like
    /// the queue's that is not the queue's (an application's own `retry_tasks` without the
    /// queue's columns) is refused with an error naming it, and left as it is.
    pub fn migrate(mut self, apply: bool) -> Connect {
        self.migrate = apply;
        self
    }

    /// Whether the `postgres://` URL is a pooler in transaction mode (PgBouncer's `pool_mode =
    /// transaction`), which lends a server connection for one transaction at a time. The
    /// default detects it: PgBouncer refuses the `options` startup parameter the queue sends
    /// on a direct connection (`plan_cache_mode`), and the queue then reconnects without it,
    /// in pooled mode (logged at INFO). Say `true` for a pooler configured to ignore `options`
    /// (`ignore_startup_parameters = options`), which detection cannot see; `false` to never
    /// run pooled (a refusal is then an error).
    ///
    /// In pooled mode each statement runs in a transaction of its own (`BEGIN … COMMIT`, four
    /// round trips where a direct connection needs one), without named prepared statements
    /// (PgBouncer before 1.21 keeps none) and without session state. `LISTEN` needs a session:
    /// give the workers one with [`listen_url`](Connect::listen_url), or they poll (one WARN
    /// at start says so).
    pub fn transaction_pooler(mut self, pooled: bool) -> Connect {
        self.transaction_pooler = Some(pooled);
        self
    }

    /// A `postgres://` URL that reaches the server without the pooler, for the one connection
    /// the workers' wake-ups `LISTEN` on (a pooler in transaction mode keeps no `LISTEN`):
    /// with it, a task enqueued by another process starts at once instead of at the next
    /// poll. Used in pooled mode ([`transaction_pooler`](Connect::transaction_pooler)); a queue
    /// connected directly listens on its own connections. Either way, a worker tests its
    /// listener at start (a notification of its own must come back within 2 s) and, when it
    /// does not, says so once at WARN and polls.
    pub fn listen_url(mut self, url: &str) -> Connect {
        self.listen_url = Some(url.to_owned());
        self
    }

    /// Opens the queue [`"default"`](crate::durable::DEFAULT_QUEUE) of the database. A schema
    /// newer than this build can use is refused either way, with an error naming its version.
    pub async fn connect(self) -> Result<Queue, Error> {
        let store = Store::open_with(
            &self.url,
            self.transaction_pooler,
            self.listen_url.as_deref(),
        )
        .await?;
        migrator::prepare(&store, self.migrate).await?;
        Ok(Queue::from_store(store))
    }
}
