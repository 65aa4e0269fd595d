//! [`Classify`] for `anyhow::Error` (feature `anyhow`).

use std::time::Duration;

use crate::Classify;
use crate::erased;

/// Walks the source chain, starting at the error `anyhow` wraps (contexts added with
/// `.context(...)` are looked through), and the first error whose type is known decides, with its
/// hint: `StatusError`, `std::io::Error` (an `io::Error::other` is looked through),
/// `tokio::time::error::Elapsed`, and with their features `reqwest::Error`, `tonic::Status` and
/// the inner error of a `failsafe::Error` (a rejection is permanent). Nothing known — an `anyhow!("...")`
/// message, say: permanent.
impl Classify for ::anyhow::Error {
    fn is_transient(&self) -> bool {
        erased::is_transient(&**self)
    }

    fn retry_after(&self) -> Option<Duration> {
        erased::retry_after(&**self)
    }

    fn is_rejection(&self) -> bool {
        erased::is_rejection(&**self)
    }

    fn is_client_error(&self) -> bool {
        erased::is_client_error(&**self)
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use ::anyhow::{Context, anyhow};

    use super::*;
    use crate::http::StatusError;

    #[test]
    fn the_wrapped_error_decides_through_contexts() {
        let unavailable = ::anyhow::Error::new(StatusError::new(503, Some("2")))
            .context("reading the payment status")
            .context("order 42");
        assert!(unavailable.is_transient());
        assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(2)));

        let reset: Result<(), io::Error> = Err(io::ErrorKind::ConnectionReset.into());
        let reset = reset.context("calling the gateway").unwrap_err();
        assert!(reset.is_transient());
        assert_eq!(reset.retry_after(), None);

        let not_found = ::anyhow::Error::new(StatusError::new(404, None)).context("lookup");
        assert!(!not_found.is_transient());
    }

    #[test]
    fn a_message_is_permanent() {
        let message = anyhow!("the gateway refused the card");
        assert!(!message.is_transient());
        assert_eq!(message.retry_after(), None);
        assert!(!message.context("charging").is_transient());
    }
}
