//! What every attempt of a worker shares: the handlers by kind, the lease, the outcomes, the
//! tasks held and the gate.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::gate::Gate;
use crate::durable::worker::execution::held::Held;
use crate::durable::worker::finishing::failure::Failure;
use crate::durable::worker::finishing::outcome::Outcomes;

/// What a handler's future gives: `Ok`, or the failure already judged.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send>>;
/// A registered handler, its error type erased.
pub(crate) type Handler = Arc<dyn Fn(ActiveTask) -> HandlerFuture + Send + Sync>;

/// What every attempt of a worker needs: the handlers by kind, the lease, and the outcomes.
pub(crate) struct Runner {
    pub(crate) handlers: HashMap<String, Handler>,
    pub(crate) lease: Duration,
    pub(crate) outcomes: Arc<Outcomes>,
    /// The tasks running now, for the worker's heartbeat.
    pub(crate) held: Arc<Held>,
    /// The per-system limits, breakers and retry share the claims obey.
    pub(crate) gate: Arc<Gate>,
}

impl Runner {
    /// How often a lease is renewed: every third of it.
    pub(crate) fn heartbeat(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(1))
    }
}
