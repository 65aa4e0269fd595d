//! PostgreSQL's wake-ups: `LISTEN` on the channel the schema's triggers on `retry_tasks` and
//! `retry_queues` notify, through one connection of its own (the worker's `wake.rs` rings its
//! processors on each notification).

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::watch;

/// The channel the triggers of the PostgreSQL schema notify.
const CHANNEL: &str = "retry_tasks";

/// The first pause after a lost listening connection; doubled after each failed reconnect.
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between two reconnects.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Listens on [`CHANNEL`] through one connection of its own and calls `ring` on every
/// notification, until `stopped` turns true. A lost connection is logged at WARN and opened
/// again after a pause that doubles up to 5 s (R-RES-RE-X3: no fixed delay), reset once a
/// connection listens; `ring` is called after every (re)connect, for what was missed.
pub(super) async fn run(pool: &PgPool, ring: impl Fn(), mut stopped: watch::Receiver<bool>) {
    let mut pause = FIRST_PAUSE;
    while !*stopped.borrow() {
        let failed = tokio::select! {
            biased;
            _ = stopped.changed() => return,
            failed = session(pool, &ring, &mut pause) => failed,
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

/// One listening connection, from its opening to its failure: calls `ring` once listening
/// (and resets `pause`), then on every notification and every reconnect by the listener.
async fn session(pool: &PgPool, ring: &impl Fn(), pause: &mut Duration) -> sqlx::Error {
    let seen = super::failover::stamp();
    let mut listener = match PgListener::connect_with(pool).await {
        Ok(listener) => listener,
        Err(e) => return e,
    };
    if let Err(e) = super::failover::writable(&mut listener).await {
        return e;
    }
    if let Err(e) = listener.listen(CHANNEL).await {
        return e;
    }
    *pause = FIRST_PAUSE;
    ring();
    loop {
        // `Ok(None)`: the listener lost its connection and opened another; what was sent
        // meanwhile is lost, so wake up anyway.
        if let Err(e) = super::failover::recv(&mut listener, seen).await {
            return e;
        }
        ring();
    }
}
