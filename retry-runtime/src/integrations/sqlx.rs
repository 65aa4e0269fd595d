//! [`Classify`] for `sqlx::Error` (feature `sqlx`): the database says when trying again may work.

use std::time::Duration;

use ::sqlx::Error;

use crate::Classify;

/// Transient:
///
/// | error | why |
/// | --- | --- |
/// | `PoolTimedOut` | every connection was busy: a moment later one may be free |
/// | `Io(e)` where the `io::Error` rules say transient (reset, refused, aborted, timed out, …) | the connection broke, not the statement |
/// | PostgreSQL `40001` serialization failure | another transaction won; the whole transaction may be run again |
/// | PostgreSQL `40P01` deadlock detected | this transaction was chosen as the victim |
/// | PostgreSQL `55P03` lock not available | `NOWAIT` / `lock_timeout` gave up on a lock |
/// | PostgreSQL `57P01`, `57P02`, `57P03` | admin shutdown, crash shutdown, cannot connect now (starting up) |
/// | PostgreSQL `53300` too many connections | the server's connection slots are full |
/// | PostgreSQL class `08` (connection exception) | the connection failed or was lost |
/// | SQLite `SQLITE_BUSY` (5) and `SQLITE_LOCKED` (6), with their extended codes | another connection holds the lock |
///
/// Everything else is permanent: a unique or foreign-key violation, a row not found, a decode
/// or encode error, a bad statement, a closed pool, TLS and configuration errors — trying the
/// same thing again gives the same answer.
///
/// Retry the **whole transaction**, not a statement inside it: a serialization failure or a
/// deadlock rolls the transaction back. And a `COMMIT` whose reply is lost is the "arrived,
/// response lost" case: put `#[retry(write, idempotency_key = …)]` on the fn that runs the whole
/// transaction, and make the transaction idempotent by that key (an `INSERT … ON CONFLICT
/// (idempotency_key) DO NOTHING` that the transaction checks first), see [`manual::integrations`](crate::manual::integrations).
impl Classify for Error {
    fn is_transient(&self) -> bool {
        match self {
            Error::PoolTimedOut => true,
            Error::Io(io) => io.is_transient(),
            Error::Database(db) => db.code().is_some_and(|code| transient_code(&code)),
            _ => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

/// PostgreSQL SQLSTATEs (always five characters) and SQLite result codes (a number of at most
/// four digits, primary or extended: the primary code is its low byte) that say "try again".
fn transient_code(code: &str) -> bool {
    if code.len() == 5 {
        return matches!(
            code,
            "40001" | "40P01" | "55P03" | "57P01" | "57P02" | "57P03" | "53300"
        ) || code.starts_with("08");
    }
    code.parse::<u32>()
        .is_ok_and(|sqlite| matches!(sqlite & 0xff, 5 | 6))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::{fmt, io};

    use ::sqlx::error::{DatabaseError, ErrorKind};

    use super::*;

    /// A database error with a code, as a driver would report it.
    #[derive(Debug)]
    struct Coded(&'static str);

    impl fmt::Display for Coded {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "error {}", self.0)
        }
    }

    impl std::error::Error for Coded {}

    impl DatabaseError for Coded {
        fn message(&self) -> &str {
            "coded"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn database(code: &'static str) -> Error {
        Error::Database(Box::new(Coded(code)))
    }

    #[test]
    fn try_again_codes_are_transient() {
        for code in [
            "40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300", "08000", "08006",
            "08P01", "5", "6", "517", "262",
        ] {
            assert!(database(code).is_transient(), "{code}");
        }
    }

    #[test]
    fn other_codes_and_errors_are_permanent() {
        for code in [
            "23505", "23503", "42P01", "42601", "22012", "40002", "1", "19", "2067",
        ] {
            assert!(!database(code).is_transient(), "{code}");
        }
        assert!(!Error::RowNotFound.is_transient());
        assert!(!Error::PoolClosed.is_transient());
        assert!(!Error::Protocol("bad".into()).is_transient());
        assert!(Error::PoolTimedOut.is_transient());
        assert!(Error::Io(io::ErrorKind::ConnectionReset.into()).is_transient());
        assert!(!Error::Io(io::ErrorKind::PermissionDenied.into()).is_transient());
        assert_eq!(database("40001").retry_after(), None);
    }
}
