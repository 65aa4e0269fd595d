//! What ends a worker's run from inside (issue 41): its database failed every heartbeat for
//! longer than its [`outage_limit`](crate::durable::Worker::outage_limit) ([`Outage`]), or its
//! SQLite file was deleted or replaced under it
//! ([`FileIdentity`](crate::durable::store::file_identity::FileIdentity)). The heartbeat watches both,
//! once per beat (not per task); the first fault found is logged once, at ERROR, stops the
//! claims as a shutdown signal would ([`Fatal::fired`]), and is what
//! [`run_until`](crate::durable::Worker::run_until) returns.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::durable::error::Error;

/// The fault that ends the run, once found: the first one wins.
pub(crate) struct Fatal {
    error: Mutex<Option<Error>>,
    fired: watch::Sender<bool>,
}

impl Default for Fatal {
    fn default() -> Self {
        Fatal {
            error: Mutex::new(None),
            fired: watch::Sender::new(false),
        }
    }
}

impl Fatal {
    /// Records `error` as what ends the run (unless a fault was found before), logs it once,
    /// and wakes [`Fatal::fired`].
    pub(crate) fn fire(&self, error: Error) {
        let mut slot = self.error.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return;
        }
        event!(
            error,
            "durable worker: stopping: it claims no more tasks, drains, and run_until returns \
             this error",
            error = error
        );
        *slot = Some(error);
        self.fired.send_replace(true);
    }

    /// Completes once a fault was found; never otherwise.
    pub(crate) async fn fired(&self) {
        let mut fired = self.fired.subscribe();
        // The sender lives in `self`, which outlives this wait: `wait_for` cannot fail.
        let _ = fired.wait_for(|fired| *fired).await;
    }

    /// The fault that ended the run, if one did.
    pub(crate) fn take(&self) -> Option<Error> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// The run of failed heartbeats: since when every beat has failed, if the last one did.
pub(crate) struct Outage {
    limit: Duration,
    since: Mutex<Option<Instant>>,
}

impl Outage {
    /// No failed beat yet; gives up after `limit` of them.
    pub(crate) fn new(limit: Duration) -> Outage {
        Outage {
            limit,
            since: Mutex::new(None),
        }
    }

    /// A beat that succeeded ends the run of failures.
    pub(crate) fn beat_ok(&self) {
        let mut since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        if since.take().is_some() {
            event!(
                info,
                "durable worker: the database answers the heartbeat again"
            );
        }
    }

    /// A beat that failed with `error`: `Some` (the error to end the run with) once every beat
    /// has failed for longer than the limit.
    pub(crate) fn beat_failed(&self, error: Error) -> Option<Error> {
        let now = Instant::now();
        let mut since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        let first = *since.get_or_insert(now);
        let lasted = now.duration_since(first);
        (lasted >= self.limit).then(|| Error::Outage {
            lasted,
            last: Box::new(error),
        })
    }
}
