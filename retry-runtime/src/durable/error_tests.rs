//! The unit tests of `error.rs`: the text stored of an error, and which database errors are
//! the database unreachable.

use super::*;

#[derive(Debug)]
struct Outer(SkipRetry);
impl fmt::Display for Outer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("charge failed")
    }
}
impl StdError for Outer {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.0)
    }
}

/// A database error with only a code, as PostgreSQL's carry their SQLSTATE.
#[derive(Debug)]
struct Coded(&'static str);
impl fmt::Display for Coded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error {}", self.0)
    }
}
impl StdError for Coded {}
impl sqlx::error::DatabaseError for Coded {
    fn message(&self) -> &str {
        self.0
    }
    fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
        Some(self.0.into())
    }
    fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        self
    }
    fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
        self
    }
    fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
        self
    }
    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}

#[test]
fn a_failovers_errors_are_the_database_unreachable_and_stamped() {
    let failover = [
        "25006", "57P01", "57P02", "57P03", "08000", "08006", "08P01",
    ];
    for code in failover {
        let e = Error::from_sqlx(sqlx::Error::Database(Box::new(Coded(code))));
        assert!(e.is_unreachable(), "{code}: {e}");
        assert!(server_lost_ago().is_some(), "{code} stamps the loss");
    }
    // A statement's own errors stay errors of the database: unique violation, deadlock,
    // serialization failure, lock timeout, a query cancelled, disk full.
    for code in [
        "23505", "40P01", "40001", "55P03", "57014", "53100", "25P02",
    ] {
        let e = Error::from_sqlx(sqlx::Error::Database(Box::new(Coded(code))));
        assert!(matches!(e, Error::Database(_)), "{code}: {e}");
    }
    let io = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert!(Error::from_sqlx(sqlx::Error::Io(io)).is_unreachable());
}

#[test]
fn error_text_joins_the_chain() {
    let wrapped: BoxError = Box::new(Outer(SkipRetry::new("card blocked")));
    assert_eq!(error_text(&wrapped), "charge failed: card blocked");
}

#[test]
fn error_text_is_cut_at_a_char_boundary() {
    let long: BoxError = "é".repeat(3000).into();
    let text = error_text(&long);
    assert!(text.len() <= MAX_ERR_TEXT + '…'.len_utf8());
    assert!(text.ends_with('…'));
}
