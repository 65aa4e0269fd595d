//! Wake-ups instead of polls: what tells a worker's processor that a task may have become due
//! before its next poll.
//!
//! - **In the process** ([`Wake`]): every handle on one database (a [`Queue`](crate::durable::Queue) and
//!   its clones, named or not) shares one bell. An enqueue, a retry written by a worker, a task
//!   run or requeued, a queue unpaused ring it; the processors of that process wake and claim.
//!   Across processes on SQLite, the poll remains.
//! - **PostgreSQL** ([`listen`], the backend's listener in `store/postgres/listen.rs`): triggers on `retry_tasks` and `retry_queues` send a
//!   `NOTIFY retry_tasks, '<queue>'` when a task is inserted waiting, when a task becomes
//!   waiting again (pending, scheduled or retry), and when a queue is unpaused. The running
//!   workers of one bell (the [`Queue`](crate::durable::Queue) handles of one `connect` and their
//!   clones) share one listening connection ([`Wake::hold_listener`]), open while any of them
//!   runs, reconnecting with a growing pause; it rings the bell on each notification (and
//!   after each reconnect: notifications sent while it was away are lost).
//!   Its first connection is tested (a `NOTIFY` of its own must come back within 2 s); behind
//!   a pooler in transaction mode without a `listen_url` (`Connect::listen_url`), or when the
//!   test fails, one WARN says the wake-ups are off and the processors poll.
//! - **Timer** (`next_due`, `worker/execution/due.rs`): after a claim round that left slots free, the processor asks for
//!   the earliest due time still in the future among the waiting tasks of its queues and sleeps
//!   no longer than that: a scheduled task or a retry starts at its due time, not up to a poll
//!   late.
//!
//! A lost wake-up (a notification dropped while the listener reconnects, a ring while no
//! processor listens) only delays a task to the next poll: the poll stays as the fallback.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::durable::store::backend::Backend as _;
use crate::durable::store::{Store, on_backend};

/// The bell shared by every handle on one database in this process: a counter each ring bumps,
/// so that a processor busy claiming when it rang still sees it afterwards.
#[derive(Clone, Debug)]
pub(crate) struct Wake {
    bell: Arc<watch::Sender<u64>>,
    listener: Arc<Mutex<Listener>>,
}

/// The one listener of a bell: how many workers hold it, and how to stop it.
#[derive(Debug, Default)]
struct Listener {
    holders: usize,
    stop: Option<watch::Sender<bool>>,
}

/// Keeps the bell's listener running while it lives: what [`Wake::hold_listener`] returns.
#[derive(Debug)]
pub(crate) struct ListenerHold {
    listener: Arc<Mutex<Listener>>,
}

impl Drop for ListenerHold {
    fn drop(&mut self) {
        let mut listener = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
        listener.holders -= 1;
        if listener.holders == 0
            && let Some(stop) = listener.stop.take()
        {
            let _ = stop.send(true);
        }
    }
}

impl Wake {
    pub(crate) fn new() -> Self {
        Wake {
            bell: Arc::new(watch::Sender::new(0)),
            listener: Arc::default(),
        }
    }

    /// Starts the bell's listener on `store` unless it runs already, and keeps it running until
    /// the last hold is dropped: one listening connection however many workers this process
    /// runs on the bell. Called once per worker run, never on a task's path.
    /// `poll` is the starting worker's poll interval, named by the WARN of a listener whose
    /// self-test fails (the polls are then all there is).
    pub(crate) fn hold_listener(&self, store: &Store, poll: Duration) -> ListenerHold {
        let mut listener = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
        listener.holders += 1;
        if listener.stop.is_none() {
            let (stop, stopped) = watch::channel(false);
            listener.stop = Some(stop);
            let (store, wake) = (store.clone(), self.clone());
            tokio::spawn(async move { listen(&store, &wake, poll, stopped).await });
        }
        ListenerHold {
            listener: self.listener.clone(),
        }
    }

    /// Wakes every processor listening, now or at its next wait.
    pub(crate) fn ring(&self) {
        self.bell
            .send_modify(|rings| *rings = rings.wrapping_add(1));
    }

    /// A listener that has seen every ring so far.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.bell.subscribe()
    }
}

/// Listens for the database's notifications until `stopped` turns true, ringing `wake`: the
/// backend's own listener (PostgreSQL's `LISTEN`, through one connection of its own; nothing on
/// SQLite, which has no notifications across processes).
async fn listen(store: &Store, wake: &Wake, poll: Duration, stopped: watch::Receiver<bool>) {
    on_backend!(store, pool => pool.listen(|| wake.ring(), poll, stopped).await);
}
