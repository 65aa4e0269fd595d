//! PostgreSQL's wake-ups: `LISTEN` on the channel the schema's triggers on `retry_tasks` and
//! `retry_queues` notify, through one connection of its own (the worker's `wake.rs` rings its
//! processors on each notification). The first connection that listens is tested: a
//! notification of its own, sent through the queue's pool, must come back within
//! [`SELF_TEST_WAIT`]. Behind a pooler in transaction mode (PgBouncer's `pool_mode =
//! transaction`) it does not (the `LISTEN` ran on whichever server connection the pooler lent,
//! and went back to the pool with it): the wake-ups are then off, said once at WARN with the
//! fix (`Connect::listen_url`, a connection that bypasses the pooler), and the workers poll.
//! A queue that knows it is behind such a pooler and has no `listen_url` does not even try:
//! a `LISTEN` through the pooler would leave a server connection listening, whose
//! notifications then reach whichever client the pooler lends it to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::watch;

/// The channel the triggers of the PostgreSQL schema notify.
const CHANNEL: &str = "retry_tasks";

/// The first pause after a lost listening connection; doubled after each failed reconnect.
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between two reconnects.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How long the self-test waits for its notification: on a direct connection it comes back in
/// a millisecond or so.
const SELF_TEST_WAIT: Duration = Duration::from_secs(2);

/// Where a listener listens and what it says when it cannot.
pub(super) struct Listen<'a> {
    /// The pool the listening connection is opened from; `None`: none that can listen (a
    /// transaction pooler and no `listen_url`).
    pub(super) listener: Option<&'a PgPool>,
    /// The queue's pool, which sends the self-test's notification.
    pub(super) notify: &'a PgPool,
    /// Whether `listener` is the queue's pool behind a transaction pooler (for the WARN).
    pub(super) through_pooler: bool,
    /// The poll interval of the worker that started the listener (for the WARN).
    pub(super) poll: Duration,
}

/// How a listening connection ended.
enum Ended {
    /// The connection failed; another is opened after a pause.
    Failed(sqlx::Error),
    /// The self-test's notification did not come back: no wake-ups, the workers poll.
    Deaf,
}

/// Listens on [`CHANNEL`] through one connection of its own and calls `ring` on every
/// notification, until `stopped` turns true. A lost connection is logged at WARN and opened
/// again after a pause that doubles up to 5 s (R-RES-RE-X3: no fixed delay), reset once a
/// connection listens; `ring` is called after every (re)connect, for what was missed. Returns
/// at once, after one WARN, when the self-test fails: the processors' polls remain.
pub(super) async fn run(wake: &Listen<'_>, ring: impl Fn(), mut stopped: watch::Receiver<bool>) {
    let Some(listener) = wake.listener else {
        deaf(wake);
        return;
    };
    let mut pause = FIRST_PAUSE;
    let mut tested = false;
    while !*stopped.borrow() {
        let ended = tokio::select! {
            biased;
            _ = stopped.changed() => return,
            ended = session(listener, wake.notify, &ring, &mut pause, &mut tested) => ended,
        };
        let failed = match ended {
            Ended::Failed(failed) => failed,
            Ended::Deaf => {
                deaf(wake);
                return;
            }
        };
        event!(
            warn,
            "durable worker: the listening connection failed; polling until it is back",
            error = failed,
            retry_in_ms = pause.as_millis(),
        );
        tokio::select! {
            biased;
            _ = stopped.changed() => return,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// The one WARN of a listener that cannot listen: what is off, why, the fix, and the poll
/// that remains.
fn deaf(wake: &Listen<'_>) {
    let why = if wake.through_pooler {
        "the queue's connections go through a pooler in transaction mode (PgBouncer \
         pool_mode = transaction), which keeps no LISTEN, and it has no listen_url"
    } else {
        "the listening connection does not get the notifications its own server sends: a \
         pooler in transaction mode that ignores the options parameter (then connect with \
         .transaction_pooler(true).listen_url(direct_url))"
    };
    event!(
        warn,
        "durable worker: wake-ups are OFF: no connection of the queue can LISTEN (or the \
         LISTEN self-test's notification did not come back within 2 s); workers find new tasks \
         by polling only. Fix: give the queue a connection that bypasses the pooler, \
         Queue::builder(url).listen_url(direct_url)",
        why = why,
        poll_interval_ms = wake.poll.as_millis(),
    );
}

/// One listening connection, from its opening to its failure: calls `ring` once listening
/// (and resets `pause`), then on every notification and every reconnect by the listener.
async fn session(
    pool: &PgPool,
    notify: &PgPool,
    ring: &impl Fn(),
    pause: &mut Duration,
    tested: &mut bool,
) -> Ended {
    let seen = super::failover::stamp();
    let mut listener = match PgListener::connect_with(pool).await {
        Ok(listener) => listener,
        Err(e) => return Ended::Failed(e),
    };
    if let Err(e) = super::failover::writable(&mut listener).await {
        return Ended::Failed(e);
    }
    if let Err(e) = listener.listen(CHANNEL).await {
        return Ended::Failed(e);
    }
    if !*tested {
        match self_test(&mut listener, notify, ring).await {
            Ok(true) => *tested = true,
            Ok(false) => {
                // Through a pooler, this lands on whichever server connection it lends.
                let _ = listener.unlisten_all().await;
                return Ended::Deaf;
            }
            Err(e) => return Ended::Failed(e),
        }
    }
    *pause = FIRST_PAUSE;
    ring();
    loop {
        // `Ok(None)`: the listener lost its connection and opened another; what was sent
        // meanwhile is lost, so wake up anyway.
        if let Err(e) = super::failover::recv(&mut listener, seen).await {
            return Ended::Failed(e);
        }
        ring();
    }
}

/// Sends a notification of its own through `notify` and waits for it on `listener`, at most
/// [`SELF_TEST_WAIT`]; the others that arrive meanwhile ring. `Ok(false)`: it did not come.
async fn self_test(
    listener: &mut PgListener,
    notify: &PgPool,
    ring: &impl Fn(),
) -> Result<bool, sqlx::Error> {
    static SENT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let payload = format!(
        "self-test-{}-{nanos}-{}",
        std::process::id(),
        SENT.fetch_add(1, Ordering::Relaxed)
    );
    // One simple-protocol statement (no prepared statement, safe behind a pooler); the payload
    // is ours, digits and dashes only.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "NOTIFY {CHANNEL}, '{payload}'"
    )))
    .execute(notify)
    .await?;
    let deadline = tokio::time::Instant::now() + SELF_TEST_WAIT;
    loop {
        match tokio::time::timeout_at(deadline, listener.recv()).await {
            Err(_) => return Ok(false),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(notification)) if notification.payload() == payload => return Ok(true),
            Ok(Ok(_)) => ring(),
        }
    }
}
