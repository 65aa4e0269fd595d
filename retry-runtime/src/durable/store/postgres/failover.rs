//! After a failover, the queue's pool does not hand out connections that may still talk to the
//! server that was lost. A failover's errors ([`Error::from_sqlx`]: read-only `25006`, shut down
//! `57P01`/`57P02`, starting up `57P03`, class `08`) stamp the time they were seen; a pooled
//! connection opened before the last stamp is closed instead of handed out, and the pool opens
//! a new one, to wherever the queue's address points now. A connection to a stopped server
//! fails sqlx's ping at acquire anyway; this catches the one that still answers: a demoted
//! primary, read-only, behind an address (a DNS name, a proxy) that moved to the new primary
//! while the pool's connections stayed.
//!
//! The cost on the happy path: one atomic load per acquire of an idle connection, no
//! allocation (the hook's futures are zero-sized, so their boxes allocate nothing).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use sqlx::PgConnection;
use sqlx::pool::PoolConnectionMetadata;

#[cfg(doc)]
use crate::durable::error::Error;
use crate::durable::error::server_lost_ago;

/// What the pool's `before_acquire` hook returns.
type Verdict<'c> = Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + 'c>>;

/// The pool's `before_acquire` hook: keeps a connection opened after the last failover error
/// (or when there was none), closes one opened before it.
pub(super) fn before_acquire(_: &mut PgConnection, meta: PoolConnectionMetadata) -> Verdict<'_> {
    if opened_before_loss(meta.age, server_lost_ago()) {
        Box::pin(Answer::<false>)
    } else {
        Box::pin(Answer::<true>)
    }
}

/// Whether a connection opened `age` ago predates the last failover error, seen `lost_ago`.
fn opened_before_loss(age: std::time::Duration, lost_ago: Option<std::time::Duration>) -> bool {
    lost_ago.is_some_and(|lost_ago| age >= lost_ago)
}

/// A future ready at once with `Ok(KEEP)`; zero-sized.
struct Answer<const KEEP: bool>;

impl<const KEEP: bool> Future for Answer<KEEP> {
    type Output = Result<bool, sqlx::Error>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(KEEP))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::opened_before_loss;

    #[test]
    fn only_connections_opened_before_the_last_loss_are_closed() {
        let secs = Duration::from_secs;
        assert!(
            !opened_before_loss(secs(60), None),
            "no loss: every one is kept"
        );
        assert!(opened_before_loss(secs(60), Some(secs(5))), "opened before");
        assert!(!opened_before_loss(secs(2), Some(secs(5))), "opened after");
    }

    #[test]
    fn the_verdicts_are_zero_sized() {
        assert_eq!(size_of::<super::Answer<true>>(), 0);
    }
}
