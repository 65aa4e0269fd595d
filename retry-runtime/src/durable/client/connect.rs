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
}

impl Queue {
    /// Opens a queue with options: `Queue::builder(url).migrate(false).connect().await`.
    pub fn builder(url: &str) -> Connect {
        Connect {
            url: url.to_owned(),
            migrate: true,
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

    /// Opens the queue [`"default"`](crate::durable::DEFAULT_QUEUE) of the database. A schema
    /// newer than this build can use is refused either way, with an error naming its version.
    pub async fn connect(self) -> Result<Queue, Error> {
        let store = Store::open(&self.url).await?;
        migrator::prepare(&store, self.migrate).await?;
        Ok(Queue::from_store(store))
    }
}
