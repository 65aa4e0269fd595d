//! [`Classify`] for type-erased errors: the first error of the source chain whose type we know
//! decides.
//!
//! One walk, [`first_known`], serves `Box<dyn Error + Send + Sync>`, `Box<dyn Error>`,
//! `anyhow::Error` (feature `anyhow`), the request errors of `reqwest::Error` (feature
//! `reqwest`) and `tonic::transport::Error` (feature `tonic`).

use std::error::Error;
use std::io;
use std::time::Duration;

use crate::Classify;
use crate::classify::Verdict;

#[cfg(feature = "failsafe")]
mod failsafe;
mod io_error;
pub(crate) mod registered;
use crate::http::StatusError;

/// How many errors of a source chain are looked at, at most: a chain is a few links long, and a
/// buggy `source()` that returns its own error must not hang the caller.
pub(crate) const MAX_CHAIN: usize = 32;

/// The verdict of the first error in `error`'s source chain, `error` itself first, whose type
/// we know; `None` when there is none (the caller's error is then permanent: deny by default).
///
/// Known, in this order for each link:
/// - [`StatusError`];
/// - `std::io::Error`, by its kind — except an `io::Error::other(inner)` (kind `Other` with a
///   payload), a tunnel whose kind says nothing: the walk goes on with `inner`. (`io::Error`'s
///   own `source()` would skip `inner` and return *its* source.);
/// - `tokio::time::error::Elapsed`, and [`AttemptTimedOut`](crate::AttemptTimedOut) (so a
///   `timeout = "…"` fn whose error type is `anyhow::Error` or a `Box<dyn Error>` retries its own
///   timed-out attempts);
/// - [`Rejected`](crate::Rejected): a refusal of a system's breaker or bulkhead, a rejection
///   (R-RES-RE-X4) however it is wrapped (the tower layer's `BoxError`, the reqwest middleware's
///   `anyhow::Error`);
/// - `reqwest::Error` (feature `reqwest`);
/// - `tonic::Status` (feature `tonic`): a status often travels boxed (a service's
///   `Box<dyn Error>`, an `anyhow::Error` of a gRPC adapter), and its code and pushback decide.
///   `tonic::transport::Error` is not known itself: its source chain is walked on, to the
///   `io::Error` of a failed connection.
///
/// `failsafe::Error<E>` (feature `failsafe`): its `source()` is the inner error of `Inner(e)`, so
/// the walk goes on with `e`; `Rejected` has no source, so the walk ends on it — permanent, for
/// every `E` (R-RES-RE-X4). A downcast only works for concrete `E`s: for the common ones
/// (`std::io::Error`, `StatusError`, and with its feature `reqwest::Error`) a `Rejected` is also
/// known as a rejection
/// ([`Classify::is_rejection`]); for another `E`, return the typed error (whose `Classify` impl
/// says it) instead of boxing it.
///
/// Last, a type that derives `Classify` (non-generic ones register themselves at link time,
/// [`registered`]): its own verdict decides, as it would unboxed.
///
/// At most [`MAX_CHAIN`] links are looked at.
pub(crate) fn first_known(error: &(dyn Error + 'static)) -> Option<Verdict> {
    links(error).find_map(known).map(|known| known.verdict)
}

/// true when the first known error of the chain is a client error (a 4xx, R-RES-RE-X2).
pub(crate) fn is_client_error(error: &(dyn Error + 'static)) -> bool {
    links(error)
        .find_map(known)
        .is_some_and(|known| known.client_error)
}

/// What the walk knows of one link.
struct Known {
    verdict: Verdict,
    client_error: bool,
}

impl Known {
    fn of<E: Classify + ?Sized>(error: &E) -> Known {
        Known {
            verdict: Verdict::of(error),
            client_error: error.is_client_error(),
        }
    }
}

/// What is known of one link, if its type is (an `io::Error::other` tunnel is not: the walk
/// goes on with its payload).
fn known(error: &(dyn Error + 'static)) -> Option<Known> {
    verdict(error)
        .map(|verdict| Known {
            verdict,
            client_error: false,
        })
        .or_else(|| {
            if let Some(status) = error.downcast_ref::<StatusError>() {
                return Some(Known::of(status));
            }
            #[cfg(feature = "reqwest")]
            if let Some(reqwest) = error.downcast_ref::<::reqwest::Error>() {
                return Some(Known::of(reqwest));
            }
            registered::find(error).map(Known::of)
        })
}

/// The verdict of a link of a built-in type that is never a client error.
fn verdict(error: &(dyn Error + 'static)) -> Option<Verdict> {
    if let Some(io) = error.downcast_ref::<io::Error>() {
        return (tunnel(io).is_none()).then(|| Verdict::of(io));
    }
    if let Some(elapsed) = error.downcast_ref::<tokio::time::error::Elapsed>() {
        return Some(Verdict::of(elapsed));
    }
    if let Some(timed_out) = error.downcast_ref::<crate::AttemptTimedOut>() {
        return Some(Verdict::of(timed_out));
    }
    if let Some(rejected) = error.downcast_ref::<crate::Rejected>() {
        return Some(Verdict::of(rejected));
    }
    #[cfg(feature = "failsafe")]
    if failsafe::is_rejection(error) {
        return Some(Verdict {
            transient: false,
            retry_after: None,
            rejection: true,
        });
    }
    #[cfg(feature = "tonic")]
    if let Some(status) = error.downcast_ref::<::tonic::Status>() {
        return Some(Verdict::of(status));
    }
    None
}

/// The payload of an `io::Error::other(inner)`: a tunnel whose kind says nothing.
pub(crate) fn tunnel(io: &io::Error) -> Option<&(dyn Error + 'static)> {
    match io.get_ref() {
        Some(inner) if io.kind() == io::ErrorKind::Other => Some(inner),
        _ => None,
    }
}

/// The one walk of a source chain, for every reader of one: `error` first, then each link's
/// `source()` — except that an `io::Error::other(inner)` is followed by `inner` (`io::Error`'s
/// own `source()` would skip `inner` and return *its* source). At most [`MAX_CHAIN`] links.
pub(crate) fn links<'e>(
    error: &'e (dyn Error + 'static),
) -> impl Iterator<Item = &'e (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&link| {
        match link.downcast_ref::<io::Error>() {
            Some(io) => tunnel(io).or_else(|| link.source()),
            None => link.source(),
        }
    })
    .take(MAX_CHAIN)
}

/// true when the first known error of the chain is transient.
pub(crate) fn is_transient(error: &(dyn Error + 'static)) -> bool {
    first_known(error).is_some_and(|verdict| verdict.transient)
}

/// The hint of the first known error of the chain.
pub(crate) fn retry_after(error: &(dyn Error + 'static)) -> Option<Duration> {
    first_known(error).and_then(|verdict| verdict.retry_after)
}

/// true when the first known error of the chain is a rejection.
pub(crate) fn is_rejection(error: &(dyn Error + 'static)) -> bool {
    first_known(error).is_some_and(|verdict| verdict.rejection)
}

macro_rules! boxed {
    ($($ty:ty),* $(,)?) => {$(
        /// The first error of the source chain (the boxed error first) whose type is known
        /// decides, with its hint: `StatusError`, `std::io::Error` (an `io::Error::other` is
        /// looked through), `tokio::time::error::Elapsed`, and with their features
        /// `reqwest::Error`, `tonic::Status` and the inner error of a `failsafe::Error` (a
        /// rejection is permanent). Nothing known: permanent.
        impl Classify for $ty {
            fn is_transient(&self) -> bool {
                is_transient(&**self)
            }

            fn retry_after(&self) -> Option<Duration> {
                retry_after(&**self)
            }

            fn is_rejection(&self) -> bool {
                is_rejection(&**self)
            }

            fn is_client_error(&self) -> bool {
                is_client_error(&**self)
            }
        }
    )*};
}
boxed!(Box<dyn Error + Send + Sync>, Box<dyn Error>);

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    type BoxError = Box<dyn Error + Send + Sync>;

    /// An error of ours, unknown to the walk, with an optional source.
    #[derive(Debug)]
    struct Wrapper(Option<BoxError>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("wrapper")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.0.as_deref().map(|e| e as _)
        }
    }

    fn wrap(inner: impl Error + Send + Sync + 'static) -> Wrapper {
        Wrapper(Some(Box::new(inner)))
    }

    const UNAVAILABLE_2S: StatusError = StatusError {
        status: 503,
        retry_after: Some(Duration::from_secs(2)),
    };

    #[test]
    fn a_boxed_status_error_keeps_its_verdict_and_hint() {
        let boxed: BoxError = Box::new(UNAVAILABLE_2S);
        assert!(boxed.is_transient());
        assert_eq!(boxed.retry_after(), Some(Duration::from_secs(2)));

        let not_found: Box<dyn Error> = Box::new(StatusError::new(404, Some("2")));
        assert!(!not_found.is_transient());
        assert_eq!(not_found.retry_after(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn an_io_error_under_a_custom_error_decides() {
        let reset: BoxError = Box::new(wrap(wrap(io::Error::from(io::ErrorKind::ConnectionReset))));
        assert!(reset.is_transient());
        assert_eq!(reset.retry_after(), None);

        let denied: BoxError = Box::new(wrap(io::Error::from(io::ErrorKind::PermissionDenied)));
        assert!(!denied.is_transient());
    }

    #[test]
    fn an_unknown_error_is_permanent() {
        let unknown: BoxError = Box::new(wrap(Wrapper(None)));
        assert!(!unknown.is_transient());
        assert_eq!(unknown.retry_after(), None);
        let message: BoxError = "gateway said no".into();
        assert!(!message.is_transient());
        assert_eq!(first_known(&*message), None);
    }

    #[test]
    fn the_first_known_error_wins() {
        // A timed-out io::Error is known: the 404 it carries is not looked at.
        let timed_out: BoxError = Box::new(io::Error::new(
            io::ErrorKind::TimedOut,
            StatusError::new(404, None),
        ));
        assert!(timed_out.is_transient());
        // A known permanent error ends the walk, even above a connection reset (its
        // `source()` would lead to the reset).
        let denied = io::Error::new(
            io::ErrorKind::PermissionDenied,
            wrap(io::Error::from(io::ErrorKind::ConnectionReset)),
        );
        assert!(denied.source().is_some());
        let denied: BoxError = Box::new(wrap(denied));
        assert!(!denied.is_transient());
    }

    #[test]
    fn io_error_other_is_looked_through() {
        let tunnel: BoxError = Box::new(wrap(io::Error::other(UNAVAILABLE_2S)));
        assert!(tunnel.is_transient());
        assert_eq!(tunnel.retry_after(), Some(Duration::from_secs(2)));

        let tunnel_to_unknown: BoxError = Box::new(io::Error::other(Wrapper(None)));
        assert!(!tunnel_to_unknown.is_transient());
        // Without a payload, `Other` is just a kind: permanent.
        let bare: BoxError = Box::new(io::Error::from(io::ErrorKind::Other));
        assert!(!bare.is_transient());
    }

    #[test]
    fn a_boxed_attempt_timeout_is_transient() {
        let timed_out = crate::AttemptTimedOut::new(Duration::from_millis(5));
        let boxed: BoxError = Box::new(wrap(timed_out));
        assert!(boxed.is_transient());
        let plain: Box<dyn Error> = Box::new(timed_out);
        assert!(plain.is_transient());
    }

    #[tokio::test(start_paused = true)]
    async fn a_boxed_elapsed_is_transient() {
        let elapsed = tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>())
            .await
            .unwrap_err();
        let boxed: BoxError = Box::new(wrap(elapsed));
        assert!(boxed.is_transient());
        assert_eq!(boxed.retry_after(), None);
    }

    #[test]
    fn a_source_chain_that_loops_ends_permanent() {
        #[derive(Debug)]
        struct Loop;
        impl fmt::Display for Loop {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("loop")
            }
        }
        impl Error for Loop {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(self)
            }
        }
        let looping: BoxError = Box::new(Loop);
        assert!(!looping.is_transient());
    }
}
