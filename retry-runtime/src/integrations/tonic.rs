//! [`Classify`] for gRPC errors (feature `tonic`): `tonic::Status` by its code and the server's
//! pushback, `tonic::transport::Error` by its source chain.

use std::error::Error;
use std::time::Duration;

use ::tonic::{Code, Status, TimeoutExpired};

use crate::Classify;
use crate::erased;

/// The trailer (or trailers-only header) in which a gRPC server tells the client how long to
/// wait before retrying, in milliseconds: gRPC's retry design A6.
pub(crate) const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// What the server's pushback says, when it says something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pushback {
    /// A non-negative integer: wait this long before the next attempt.
    After(Duration),
    /// A negative or unparseable value: A6 reads it as "do not retry".
    Stop,
}

/// The pushback of `status`, if its metadata carries one.
fn pushback(status: &Status) -> Option<Pushback> {
    let value = status.metadata().get(PUSHBACK)?;
    Some(match value.to_str() {
        Ok(text) => parse_pushback(text),
        // Not visible ASCII: certainly not an integer.
        Err(_) => Pushback::Stop,
    })
}

/// A6's grammar, read as gRPC's own clients read it (grpc-go's `strconv.Atoi`, grpc-java's
/// `Integer.valueOf`): a decimal integer of milliseconds, with an optional sign. A negative
/// one says "do not retry", and so does anything that is not an integer (empty, white space, a
/// fraction, a unit, too many digits for a 64-bit integer).
fn parse_pushback(text: &str) -> Pushback {
    match text.parse::<i64>().map(u64::try_from) {
        Ok(Ok(millis)) => Pushback::After(Duration::from_millis(millis)),
        _ => Pushback::Stop,
    }
}

/// Transient when trying the same call again may work, and the server did not say otherwise:
///
/// | code | verdict | why |
/// | --- | --- | --- |
/// | `Unavailable` | transient | gRPC's "most likely a transient condition, corrected by retrying with a backoff"; tonic also reports a failed connection with it |
/// | `DeadlineExceeded` | transient | the call ran out of time; a write may have been applied, which `#[retry(write, idempotency_key = …)]` covers |
/// | `Cancelled` made by tonic's own client timeout (`TimeoutExpired` in its source chain) | transient | the same deadline, which other gRPC clients report as `DeadlineExceeded` |
/// | `ResourceExhausted` | permanent | gRPC's 429: a quota or rate limit, which repeating makes worse (as a 429 is never retried, R-RES-RE-X2) |
/// | `Aborted` | permanent | a concurrency conflict: the whole transaction (read, modify, write) must run again, not this one call |
/// | `Internal`, `Unknown` | permanent | not known to be safe to repeat: "if in doubt: no retry" (R-RES-RE-1) |
/// | every other code (`InvalidArgument`, `NotFound`, `AlreadyExists`, `PermissionDenied`, `Unauthenticated`, `FailedPrecondition`, `OutOfRange`, `Unimplemented`, `DataLoss`, `Cancelled`, `Ok`) | permanent | a contract error or a final answer, gRPC's 4xx (R-RES-RE-X2) |
///
/// **Pushback** (gRPC A6): the `grpc-retry-pushback-ms` trailer is the server's Retry-After. A
/// non-negative integer of milliseconds is the [`retry_after`](Classify::retry_after) hint (the
/// loop waits at least that long); a negative or unparseable value means "do not retry", so the
/// status is permanent whatever its code.
impl Classify for Status {
    fn is_transient(&self) -> bool {
        let transient = match self.code() {
            Code::Unavailable | Code::DeadlineExceeded => true,
            Code::Cancelled => client_timeout(self),
            _ => false,
        };
        transient && pushback(self) != Some(Pushback::Stop)
    }

    fn retry_after(&self) -> Option<Duration> {
        match pushback(self)? {
            Pushback::After(wait) => Some(wait),
            Pushback::Stop => None,
        }
    }
}

/// true when tonic made this `Cancelled` from its own client timeout (`Endpoint::timeout`, or a
/// request's `grpc-timeout`): it keeps the `TimeoutExpired` as the status's source. A
/// `Cancelled` that came over the wire has no source.
fn client_timeout(status: &Status) -> bool {
    status
        .source()
        .is_some_and(|source| erased::links(source).any(|link| link.is::<TimeoutExpired>()))
}

/// The first error of the source chain whose type is known decides (the walk of
/// `Box<dyn Error>`): a failed connection — refused, reset, aborted, timed out (`connect_timeout`)
/// — is an `std::io::Error` of a transient kind there, so it is transient. Everything else is
/// permanent: an invalid URI or user agent, a TLS or HTTP/2 handshake that failed, a name that
/// does not resolve (its `io::Error` kind says nothing transient) — trying again gives the same
/// answer.
impl Classify for ::tonic::transport::Error {
    fn is_transient(&self) -> bool {
        erased::is_transient(self)
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Arc;

    use ::tonic::metadata::{MetadataMap, MetadataValue};

    use super::*;

    fn with_pushback(code: Code, value: &str) -> Status {
        let mut metadata = MetadataMap::new();
        let value: MetadataValue<_> = value.parse().unwrap();
        metadata.insert(PUSHBACK, value);
        Status::with_metadata(code, "pushed back", metadata)
    }

    #[test]
    fn only_unavailable_and_deadline_exceeded_are_transient() {
        let transient = [Code::Unavailable, Code::DeadlineExceeded];
        for value in 0..=16 {
            let code = Code::from_i32(value);
            assert_eq!(
                Status::new(code, "").is_transient(),
                transient.contains(&code),
                "{code:?}"
            );
            assert_eq!(Status::new(code, "").retry_after(), None, "{code:?}");
        }
        // A code from a newer server: permanent.
        assert!(!Status::new(Code::from_i32(42), "").is_transient());
    }

    #[test]
    fn a_pushback_is_the_retry_after_hint() {
        let status = with_pushback(Code::Unavailable, "100");
        assert!(status.is_transient());
        assert_eq!(status.retry_after(), Some(Duration::from_millis(100)));
        let zero = with_pushback(Code::DeadlineExceeded, "0");
        assert!(zero.is_transient());
        assert_eq!(zero.retry_after(), Some(Duration::ZERO));
        // A hint on a permanent code is still reported, and the code still decides.
        let exhausted = with_pushback(Code::ResourceExhausted, "2000");
        assert!(!exhausted.is_transient());
        assert_eq!(exhausted.retry_after(), Some(Duration::from_secs(2)));
        // A sign is allowed, as gRPC's own clients allow it; -0 is zero, not negative.
        let signed = with_pushback(Code::Unavailable, "+100");
        assert_eq!(signed.retry_after(), Some(Duration::from_millis(100)));
        assert_eq!(
            with_pushback(Code::Unavailable, "-0").retry_after(),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn a_negative_or_unparseable_pushback_means_do_not_retry() {
        for value in [
            "-1",
            "-100",
            "",
            " 100",
            "100 ",
            "1.5",
            "100ms",
            "0x10",
            "abc",
            "99999999999999999999999",
        ] {
            let status = with_pushback(Code::Unavailable, value);
            assert!(!status.is_transient(), "{value:?}");
            assert_eq!(status.retry_after(), None, "{value:?}");
        }
    }

    #[test]
    fn a_client_timeout_is_transient_and_a_cancelled_call_is_not() {
        let mut timed_out = Status::cancelled("Timeout expired");
        timed_out.set_source(Arc::new(TimeoutExpired(())));
        assert!(timed_out.is_transient());
        assert!(!Status::cancelled("the caller went away").is_transient());
        let mut other = Status::cancelled("reset");
        other.set_source(Arc::new(io::Error::from(io::ErrorKind::ConnectionReset)));
        assert!(!other.is_transient());
    }

    #[test]
    fn a_boxed_status_keeps_its_verdict_and_hint() {
        #[derive(Debug)]
        struct Wrapper(Status);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("calling the partner")
            }
        }
        impl Error for Wrapper {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }

        let boxed: Box<dyn Error + Send + Sync> =
            Box::new(Wrapper(with_pushback(Code::Unavailable, "250")));
        assert!(boxed.is_transient());
        assert_eq!(boxed.retry_after(), Some(Duration::from_millis(250)));
        let refused: Box<dyn Error> = Box::new(with_pushback(Code::Unavailable, "-1"));
        assert!(!refused.is_transient());
        // The status decides, not the reset under it.
        let mut invalid = Status::invalid_argument("bad amount");
        invalid.set_source(Arc::new(io::Error::from(io::ErrorKind::ConnectionReset)));
        let invalid: Box<dyn Error + Send + Sync> = Box::new(invalid);
        assert!(!invalid.is_transient());
    }
}
