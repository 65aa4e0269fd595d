//! `io::Error`'s verdict: by its kind, or, for a tunnel (`io::Error::other(inner)`), by what it
//! carries ([`erased`](super)).

use std::io;
use std::time::Duration;

use crate::Classify;
use crate::erased;

/// Timeouts, resets, refused or aborted connections, broken pipes, interrupted calls and
/// unexpected ends of stream are transient; every other kind is permanent. An
/// `io::Error::other(inner)` is a tunnel whose kind says nothing: `inner`'s source chain decides,
/// as it does when the `io::Error` is boxed.
impl Classify for io::Error {
    fn is_transient(&self) -> bool {
        match erased::tunnel(self) {
            Some(inner) => erased::is_transient(inner),
            None => matches!(
                self.kind(),
                io::ErrorKind::TimedOut
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::Interrupted
                    | io::ErrorKind::UnexpectedEof
            ),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        erased::tunnel(self).and_then(erased::retry_after)
    }

    fn is_rejection(&self) -> bool {
        erased::tunnel(self).is_some_and(erased::is_rejection)
    }

    fn is_client_error(&self) -> bool {
        erased::tunnel(self).is_some_and(erased::is_client_error)
    }
}
