//! How a worker learns what to run: a handler per task kind, as it returns (`handle`), as it
//! classifies its own errors (`handle_classified`) or for a typed payload (`handle_typed`).

use std::future::Future;
use std::sync::Arc;

use crate::Classify;
use crate::durable::client::kind::TaskKind;
use crate::durable::error::{BoxError, SkipRetry};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::Worker;
use crate::durable::worker::execution::runner::Handler;
use crate::durable::worker::finishing::failure::Failure;

impl Worker {
    /// Runs `handler` for tasks of kind `kind` (replacing any earlier handler of that kind). A
    /// worker claims only the kinds it has handlers for: tasks of other kinds wait, pending, for
    /// a worker that knows them.
    ///
    /// `Ok(())` completes the task. An error is a failed attempt, judged by the first error of
    /// its source chain whose type is known, as the [module docs](crate::durable#which-errors-are-retried)
    /// say: a 4xx is archived at once, a breaker rejection does not count, a 429 or 503 with
    /// Retry-After waits for it without using a retry (throttled), an error nothing is known of is retried (asynq's default).
    /// A panic is a failed attempt too ([`Error::Panicked`](crate::durable::Error::Panicked)). For an adapter's own error type,
    /// [`handle_classified`](Worker::handle_classified) uses its [`Classify`] impl instead.
    ///
    /// Each attempt runs in its own tokio task; when the attempt's timeout or deadline passes,
    /// or the worker loses the lease, the handler's future is dropped (at its next `.await`:
    /// blocking code in a handler is not interrupted).
    pub fn handle<F, Fut>(self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(ActiveTask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.handle_classified(kind, handler)
    }

    #[doc = include_str!("../../../../docs/handle_classified.md")]
    pub fn handle_classified<F, Fut, E>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(ActiveTask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Classify + Into<BoxError> + 'static,
    {
        let handler: Handler = Arc::new(move |task| {
            let attempt = handler(task);
            Box::pin(async move { attempt.await.map_err(Failure::from_handler) })
        });
        self.edit().handlers.insert(kind.into(), handler);
        self
    }

    /// [`handle_classified`](Worker::handle_classified) for `T`'s [`KIND`](TaskKind::KIND),
    /// the handler receiving the payload decoded (see [`TaskKind`]). A payload that does not
    /// decode as `T` is archived at once, never retried, with an error that says so. A kind
    /// with a [`SYSTEM`](TaskKind::SYSTEM) is mapped to it, as
    /// [`system_of`](Worker::system_of)`(T::KIND, system)` would.
    pub fn handle_typed<T, F, Fut, E>(mut self, handler: F) -> Self
    where
        T: TaskKind,
        F: Fn(T, ActiveTask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Classify + Into<BoxError> + 'static,
    {
        let handler: Handler = Arc::new(move |task: ActiveTask| match task.payload::<T>() {
            Ok(payload) => {
                let attempt = handler(payload, task);
                Box::pin(async move { attempt.await.map_err(Failure::from_handler) })
            }
            Err(e) => {
                let text = format!(
                    "the payload of this {:?} task does not decode as {}: {e}",
                    T::KIND,
                    std::any::type_name::<T>()
                );
                let skip: BoxError = Box::new(SkipRetry::new(text));
                Box::pin(async move { Err(Failure::from_handler(skip)) })
            }
        });
        self.edit().handlers.insert(T::KIND.to_owned(), handler);
        match T::SYSTEM {
            Some(system) => self.system_of(T::KIND, crate::declare_system(system)),
            None => self,
        }
    }
}
