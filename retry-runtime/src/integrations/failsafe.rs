//! [`Classify`] for `failsafe::Error<E>` (feature `failsafe`).

use std::time::Duration;

use ::failsafe::Error;

use crate::Classify;

/// `Rejected` — the breaker is open, or its half-open trial calls are taken — is never
/// transient: the breaker already decided the system is down, and a retry would count twice in
/// its failure rate (R-RES-RE-X4). `Inner(e)` keeps `e`'s verdict and hint.
///
/// A `failsafe::Error` inside a `Box<dyn Error>` or an `anyhow::Error` gets the same verdicts,
/// for any inner type: see the impls for those.
impl<E: Classify> Classify for Error<E> {
    fn is_transient(&self) -> bool {
        match self {
            Error::Inner(error) => error.is_transient(),
            Error::Rejected => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Inner(error) => error.retry_after(),
            Error::Rejected => None,
        }
    }

    /// `Rejected`: the call was never made. `Inner(e)`: whatever `e` says.
    fn is_rejection(&self) -> bool {
        match self {
            Error::Inner(error) => error.is_rejection(),
            Error::Rejected => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::io;

    use super::*;
    use crate::http::StatusError;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// An inner error type the source-chain walk does not know.
    #[derive(Debug)]
    struct Unknown(io::Error);

    impl fmt::Display for Unknown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("unknown")
        }
    }

    impl std::error::Error for Unknown {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn rejected_is_permanent_and_inner_keeps_its_verdict() {
        let rejected: Error<StatusError> = Error::Rejected;
        assert!(!rejected.is_transient());
        assert_eq!(rejected.retry_after(), None);

        let unavailable = Error::Inner(StatusError::new(503, Some("2")));
        assert!(unavailable.is_transient());
        assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(2)));

        let not_found = Error::Inner(StatusError::new(404, Some("2")));
        assert!(!not_found.is_transient());
        assert!(!not_found.is_rejection());
        assert!(rejected.is_rejection());
    }

    #[test]
    fn boxed_rejections_of_common_inner_types_are_known() {
        let of_status: BoxError = Box::new(Error::<StatusError>::Rejected);
        let of_io: BoxError = Box::new(Error::<io::Error>::Rejected);
        for rejected in [&of_status, &of_io] {
            assert!(rejected.is_rejection());
            assert!(!rejected.is_transient());
        }
        // Another inner type: a rejection the walk cannot see (permanent, not a rejection).
        let of_unknown: BoxError = Box::new(Error::<Unknown>::Rejected);
        assert!(!of_unknown.is_rejection());
        assert!(!of_unknown.is_transient());
        let inner: BoxError = Box::new(Error::Inner(StatusError::new(503, None)));
        assert!(!inner.is_rejection());
    }

    #[test]
    fn erased_failsafe_errors_of_any_inner_type() {
        let rejected: BoxError = Box::new(Error::<Unknown>::Rejected);
        assert!(!rejected.is_transient());

        let reset: BoxError =
            Box::new(Error::Inner(Unknown(io::ErrorKind::ConnectionReset.into())));
        assert!(reset.is_transient());

        let unavailable: BoxError = Box::new(Error::Inner(StatusError::new(503, Some("2"))));
        assert!(unavailable.is_transient());
        assert_eq!(unavailable.retry_after(), Some(Duration::from_secs(2)));

        // A rejection tunnelled through io::Error::other stays permanent.
        let tunnelled: BoxError = Box::new(io::Error::other(Error::<StatusError>::Rejected));
        assert!(!tunnelled.is_transient());
    }
}
