//! After a failover, the queue's pool does not hand out connections that may still talk to the
//! server that was lost. A failover's errors ([`Error::from_sqlx`]: read-only `25006`, shut down
//! `57P01`/`57P02`, starting up `57P03`, class `08`) stamp the time they were seen; a pooled
//! connection opened before the last stamp is closed instead of handed out, and the pool opens
//! a new one, to wherever the queue's address points now. A connection to a stopped server
//! fails sqlx's ping at acquire anyway; this catches the one that still answers: a demoted
//! primary, read-only, behind an address (a DNS name, a proxy) that moved to the new primary
//! while the pool's connections stayed.
//!
//! The listening connection (`listen.rs`) is opened again after such an error, for the same
//! reason: nothing it does would fail on a read-only server, and it would wait there for
//! notifications that never come.
//!
//! The cost on the happy path: one atomic load per acquire of an idle connection, no
//! allocation (the hook's futures are zero-sized, so their boxes allocate nothing).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use sqlx::PgConnection;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::postgres::{PgListener, PgNotification};

#[cfg(doc)]
use crate::durable::error::Error;
use crate::durable::error::{server_lost_after, server_lost_ago, server_lost_stamp};

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

/// How long a connection through a transaction pooler may sit idle and still be handed out
/// without a ping. Under load a connection is idle for microseconds, and a ping per statement
/// would be a fifth round trip through the pooler; a connection idle longer may have been cut
/// by a pooler's restart or its `client_idle_timeout`, and is pinged first (as PgBouncer
/// checks its own server connections idle longer than its `server_check_delay`).
const PING_AFTER_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// [`before_acquire`] for a pool through a transaction pooler, whose `test_before_acquire` is
/// off: as [`before_acquire`], and a connection idle for [`PING_AFTER_IDLE`] or longer is
/// pinged first, closed when the ping fails (the pool then takes or opens another).
pub(super) fn before_acquire_through_pooler(
    conn: &mut PgConnection,
    meta: PoolConnectionMetadata,
) -> Verdict<'_> {
    if opened_before_loss(meta.age, server_lost_ago()) {
        Box::pin(Answer::<false>)
    } else if meta.idle_for < PING_AFTER_IDLE {
        Box::pin(Answer::<true>)
    } else {
        Box::pin(async move { Ok(sqlx::Connection::ping(conn).await.is_ok()) })
    }
}

/// Whether a connection opened `age` ago predates the last failover error, seen `lost_ago`.
fn opened_before_loss(age: std::time::Duration, lost_ago: Option<std::time::Duration>) -> bool {
    lost_ago.is_some_and(|lost_ago| age >= lost_ago)
}

/// What a listening connection opened now compares with: see [`recv`].
pub(super) fn stamp() -> u64 {
    server_lost_stamp()
}

/// The listener's next notification (`PgListener::try_recv`), or an error once a failover's
/// error is seen after `seen` (taken before the listener connected): the listening connection
/// may be on the server that was lost, and is opened again.
pub(super) async fn recv(
    listener: &mut PgListener,
    seen: u64,
) -> Result<Option<PgNotification>, sqlx::Error> {
    tokio::select! {
        received = listener.try_recv() => received,
        () = server_lost_after(seen) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "a failover's error was seen since this connection opened (it may still be on the \
             server that was lost): listening again",
        ))),
    }
}

/// After a failover's error was seen in this process (never before: no statement on the happy
/// path), whether the listening connection's server takes writes; an error when it is a
/// standby or read-only (a demoted primary, its address not moved yet): listening there would
/// hear nothing, so the listener connects again later.
pub(super) async fn writable(listener: &mut PgListener) -> Result<(), sqlx::Error> {
    if server_lost_stamp() == 0 {
        return Ok(());
    }
    let read_only: bool = sqlx::query_scalar(
        "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool",
    )
    .fetch_one(&mut *listener)
    .await?;
    match read_only {
        false => Ok(()),
        true => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "the listening connection's server is read-only (a standby, or a former primary)",
        ))),
    }
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
