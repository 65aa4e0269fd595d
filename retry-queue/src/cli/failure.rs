//! Why a command stopped short, and the one line it prints then.

use std::fmt;

use retry_runtime::durable::{Error, Queue};

use crate::ops::Problem;

/// Why a command stopped short.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The one line printed after `error: `.
    Message(String),
    /// The reader of the output went away (`retry-queue … | head`): nothing to report.
    ClosedOutput,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Message(message) => f.write_str(message),
            Failure::ClosedOutput => f.write_str("the output was closed"),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::ClosedOutput;
        }
        Failure::Message(format!("cannot write the output: {e}"))
    }
}

/// A failure to open the database or to change its schema, where no queue or task is named:
/// the error's own text, control characters escaped.
impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Message(super::table::clean(&e.to_string()))
    }
}

/// The failure of an inspector call on `queue` (about the task `id`, if any).
pub(super) fn failure(e: Error, queue: &Queue, id: Option<&str>) -> Failure {
    Failure::Message(Problem::of(e, queue.name(), id).message)
}

#[cfg(test)]
mod tests {
    use super::Failure;

    #[test]
    fn a_closed_output_is_no_error_but_other_write_errors_are() {
        let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(matches!(Failure::from(closed), Failure::ClosedOutput));
        let full = std::io::Error::other("disk full");
        assert_eq!(
            Failure::from(full).to_string(),
            "cannot write the output: disk full"
        );
    }
}
