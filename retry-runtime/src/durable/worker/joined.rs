//! The end of a spawned part of the worker (an attempt's supervisor, the completer's writer, a
//! periodic component), joined: its value, or its panic logged.

use tokio::task::JoinError;

/// Logs a supervisor's panic; the value it returned otherwise.
pub(crate) fn log_join<T>(joined: Result<T, JoinError>) -> Option<T> {
    match joined {
        Ok(value) => Some(value),
        Err(e) => {
            if e.is_panic() {
                // A panic of the worker's own code (or of a retry_delay / is_failure / on_error
                // closure): the task's lease expires and the recoverer counts the attempt as
                // failed.
                event!(
                    error,
                    "durable worker: an attempt's supervisor panicked",
                    error = e
                );
            }
            None
        }
    }
}
