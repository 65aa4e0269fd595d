//! The processor (asynq's): claims due tasks from the served queues, by their priority, holds a
//! few more than its free slots while there is a backlog (the prefetch), and starts an
//! [attempt](crate::durable::worker::execution::attempt) for each as slots free up, until its shutdown signal; then it gives
//! the prefetched tasks back and drains the running attempts.
//!
//! A claim is in flight beside the running attempts, not awaited by the loop: while the
//! database answers, finished attempts free their slots and prefetched tasks take them (with
//! the claim awaited, a worker of short tasks sat idle for every claim's round trip).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::durable::client::queue::Queue;
use crate::durable::error::Error;
use crate::durable::types::active::ActiveTask;
use crate::durable::types::kinds::Kinds;
use crate::durable::worker::execution::claim;
use crate::durable::worker::execution::due::next_due;
use crate::durable::worker::execution::gate::Key;
use crate::durable::worker::execution::pace::{Pace, claim_backoff};
use crate::durable::worker::execution::runner::Runner;
use crate::durable::worker::execution::served::Served;
use crate::durable::worker::execution::stopping::{self, StopDeadline};
use crate::durable::worker::finishing::completer::Completer;
use crate::durable::worker::joined::log_join;
use crate::durable::worker::lease;

/// The processor of one worker: what it claims, how many it runs and holds, and how it stops.
pub(crate) struct Processor {
    /// The queues served, each with its weight.
    pub(crate) queues: Vec<Served>,
    /// Higher weights drained first instead of picked by weight.
    pub(crate) strict_priority: bool,
    /// The kinds the runner has handlers for: a claim takes only these.
    pub(crate) kinds: Kinds,
    pub(crate) runner: Arc<Runner>,
    pub(crate) concurrency: usize,
    pub(crate) prefetch: usize,
    pub(crate) poll_interval: Duration,
    pub(crate) shutdown_timeout: Duration,
}

impl Processor {
    /// Runs until `shutdown` completes, then gives the prefetched tasks back and drains: running
    /// attempts get [`shutdown_timeout`](crate::durable::Worker::shutdown_timeout), then are dropped and
    /// their tasks returned to pending. Completions go to `completer`. Returns the deadlines
    /// of the stop, for the worker's last writes.
    pub(crate) async fn run<F: Future>(self, shutdown: F, completer: Completer) -> StopDeadline {
        let (stop, stopped) = watch::channel(false);
        // Each attempt returns how long it took: the pace that bounds the prefetch.
        // (and whether a system it held has more due: claim at once).
        let mut running: JoinSet<(Duration, bool)> = JoinSet::new();
        // Prefetched tasks, with when their lease was last taken or renewed.
        let mut ready: VecDeque<(Queue, ActiveTask, Instant)> = VecDeque::new();
        let beat = self.runner.heartbeat();
        let mut pace = Pace::default();
        let mut eager = false;
        let mut next_claim = Instant::now();
        // Claims failed in a row (the database is away): the next one waits longer.
        let mut failed_claims = 0u32;
        let mut woken = self.queues[0].queue.handle.wake.subscribe();
        let mut shutdown = std::pin::pin!(shutdown);
        // The claim in flight, if any (`asked`: how many it asks for): the slots go on starting
        // prefetched tasks while it waits for the database, instead of idling for a round trip.
        let mut claiming = std::pin::pin!(self.claim_if(0, 0));
        let mut asked = 0;
        loop {
            self.start_ready(&mut running, &mut ready, &stopped, &completer);
            let now = Instant::now();
            // Slots held longer than the pace promised (attempts that suddenly take longer):
            // prefetched tasks are renewed every heartbeat, like running ones (not while a
            // claim is in flight: see `renew_ready`).
            self.renew_ready(&mut ready, beat, asked > 0).await;
            let capacity = self.concurrency + self.prefetch_limit(pace.average());
            let held = running.len() + ready.len() + asked;
            let room = capacity.saturating_sub(held);
            let eager_batch = (capacity / 2).max(1);
            if asked == 0 && room > 0 && (now >= next_claim || (eager && room >= eager_batch)) {
                // Rings from here on wake the next wait: this claim may not see their task.
                woken.borrow_and_update();
                next_claim = Instant::now() + self.poll_interval;
                claiming.set(self.claim_if(room, self.concurrency.saturating_sub(held)));
                asked = room;
            }
            let has_room = asked == 0 && held < capacity;
            let renewals = (asked == 0).then_some(&ready);
            let wake = next_wake(has_room.then_some(next_claim), renewals, beat);
            let idle = Instant::now() + Duration::from_secs(3600);
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                claimed = &mut claiming, if asked > 0 => {
                    let room = std::mem::take(&mut asked);
                    (eager, next_claim) = self
                        .after_claim(claimed, room, &mut ready, &mut failed_claims, next_claim)
                        .await;
                }
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    if let Some((took, claim_now)) = log_join(joined) {
                        pace.record(took);
                        if claim_now && failed_claims == 0 {
                            next_claim = next_claim.min(Instant::now());
                        }
                    }
                }
                () = tokio::time::sleep_until(wake.unwrap_or(idle)), if wake.is_some() => {}
                // A task may be due before the next poll: claim as soon as there is room (not
                // sooner than a failing database's backoff allows).
                Ok(()) = woken.changed() => {
                    if failed_claims == 0 {
                        next_claim = Instant::now();
                    }
                }
            }
        }
        let deadline = StopDeadline::from_now(self.shutdown_timeout);
        if asked > 0 {
            // The claim in flight is not dropped half-done while the database answers: its
            // tasks start in the free slots and drain with the others; the rest go back.
            let claimed = stopping::settle_claim(claiming, deadline).await;
            let at = Instant::now();
            ready.extend(claimed.into_iter().map(|(q, t)| (q, t, at)));
            self.start_ready(&mut running, &mut ready, &stopped, &completer);
        }
        self.drain(ready, running, stop, deadline).await;
        deadline
    }

    /// After a claim: the ready queue extended, the run of failed claims counted or ended;
    /// returns whether to claim again eagerly (the claim filled the room) and when next.
    async fn after_claim(
        &self,
        claimed: Result<Vec<(Queue, ActiveTask)>, Error>,
        room: usize,
        ready: &mut VecDeque<(Queue, ActiveTask, Instant)>,
        failed_claims: &mut u32,
        next_claim: Instant,
    ) -> (bool, Instant) {
        match claimed {
            Ok(claimed) => {
                if *failed_claims > 0 {
                    event!(
                        info,
                        "durable worker: claims succeed again",
                        failed = *failed_claims
                    );
                    *failed_claims = 0;
                }
                let eager = claimed.len() == room;
                let next = if eager {
                    next_claim
                } else {
                    next_due(&self.queues, next_claim).await
                };
                // A system's rate holds tasks back: claim again when it lets the next start.
                let next = self
                    .runner
                    .gate
                    .next_start()
                    .map_or(next, |at| next.min(at));
                let claimed_at = Instant::now();
                ready.extend(claimed.into_iter().map(|(q, t)| (q, t, claimed_at)));
                (eager, next)
            }
            Err(e) => {
                *failed_claims = failed_claims.saturating_add(1);
                let pause = claim_backoff(self.poll_interval, *failed_claims);
                event!(
                    warn,
                    "durable worker: claim failed, backing off",
                    error = e,
                    retry_in_ms = pause.as_millis()
                );
                (false, Instant::now() + pause)
            }
        }
    }

    /// The shutdown, bounded ([`stopping`]): prefetched tasks back first (for other workers to
    /// take while these drain), then the running attempts get the shutdown timeout, then are
    /// dropped.
    async fn drain(
        &self,
        mut ready: VecDeque<(Queue, ActiveTask, Instant)>,
        mut running: JoinSet<(Duration, bool)>,
        stop: watch::Sender<bool>,
        deadline: StopDeadline,
    ) {
        stopping::give_back_prefetched(&mut ready, &self.runner.gate, deadline).await;
        stopping::drain_attempts(&mut running, &stop, deadline).await;
    }

    /// Renews the leases of the prefetched tasks that waited a heartbeat since their claim or
    /// last renewal; drops those whose lease was lost (recovered elsewhere). Nothing while a
    /// claim is in flight (`claiming`): they wait for its answer, a round trip.
    async fn renew_ready(
        &self,
        ready: &mut VecDeque<(Queue, ActiveTask, Instant)>,
        beat: Duration,
        claiming: bool,
    ) {
        // Only the loop polls its claim, which holds or awaits a connection (SQLite's only one):
        // a renewal awaited meanwhile waited until the pool gave up (20 s), every lease of the
        // process lapsed, and the recoverer charged retries to tasks that never started.
        let now = Instant::now();
        if claiming || ready.iter().all(|(_, _, at)| now < *at + beat) {
            return;
        }
        let mut kept = VecDeque::with_capacity(ready.len());
        for (queue, mut task, at) in ready.drain(..) {
            if now < at + beat {
                kept.push_back((queue, task, at));
                continue;
            }
            match lease::extend(&queue.handle, &mut task, self.runner.lease).await {
                Ok(true) => kept.push_back((queue, task, Instant::now())),
                Ok(false) => {
                    self.runner.gate.release(self.runner.gate.key(&task), None);
                    event!(
                        warn,
                        "durable worker: lease of a prefetched task lost (recovered elsewhere)",
                        task = task.id()
                    );
                }
                Err(e) => {
                    event!(
                        warn,
                        "durable worker: renewing a prefetched task's lease failed",
                        task = task.id(),
                        error = e
                    );
                    // Tried again at the next heartbeat; the attempt renews it before starting.
                    kept.push_back((queue, task, now));
                }
            }
        }
        *ready = kept;
    }

    /// How many tasks to hold beyond the slots: [`prefetch`](crate::durable::Worker::prefetch), and no more
    /// than the slots start within a third of the lease at the pace of recent attempts.
    fn prefetch_limit(&self, attempt: Duration) -> usize {
        let horizon = self.runner.lease / 3;
        let per_slot = match horizon.as_nanos().checked_div(attempt.as_nanos()) {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        self.prefetch.min(per_slot.saturating_mul(self.concurrency))
    }

    /// Claims the tasks due now (at most `concurrency` of them, from the served queues by their
    /// priority) and runs each to its end; returns how many ran.
    pub(crate) async fn run_due(&self, completer: Completer) -> Result<usize, Error> {
        let claimed = self.claim(self.concurrency, self.concurrency).await?;
        let count = claimed.len();
        let (_stop, stopped) = watch::channel(false);
        let mut running = JoinSet::new();
        let mut ready = claimed
            .into_iter()
            .map(|(queue, task)| (queue, task, Instant::now()))
            .collect();
        self.start_ready(&mut running, &mut ready, &stopped, &completer);
        while let Some(joined) = running.join_next().await {
            log_join(joined);
        }
        Ok(count)
    }

    /// One claim round of up to `free` tasks, or none at once when `free` is 0: the
    /// processor's claim slot holds one future of this type, in flight or spent. `slots`: the
    /// slots free when it is asked for; its first tasks start in them, the rest wait, marked
    /// prefetched in the queue (`start.rs`).
    async fn claim_if(&self, free: usize, slots: usize) -> Result<Vec<(Queue, ActiveTask)>, Error> {
        if free == 0 {
            return Ok(Vec::new());
        }
        self.claim(free, slots).await
    }

    /// One claim round of up to `free` tasks, `slots` of them to start at once
    /// ([`claim::claim`]).
    async fn claim(&self, free: usize, slots: usize) -> Result<Vec<(Queue, ActiveTask)>, Error> {
        let order = claim::order(&self.queues, self.strict_priority, &self.runner);
        let queues = (self.queues.as_slice(), order);
        claim::claim(queues, &self.runner, &self.kinds, (free, slots)).await
    }
}

/// When the processor must look again: the next claim (`claim`, while there is room) or the
/// next renewal in `ready` (none while a claim is in flight), whichever first; else `None`.
fn next_wake(
    claim: Option<Instant>,
    ready: Option<&VecDeque<(Queue, ActiveTask, Instant)>>,
    beat: Duration,
) -> Option<Instant> {
    let renewal = ready.and_then(|ready| ready.iter().map(|(_, _, at)| *at + beat).min());
    match (claim, renewal) {
        (Some(claim), Some(renewal)) => Some(claim.min(renewal)),
        (claim, renewal) => claim.or(renewal),
    }
}

/// Runs `run`, releases its task from the gate, and returns how long it took and whether to
/// claim at once.
pub(crate) async fn timed(
    run: impl Future<Output = Option<bool>>,
    runner: Arc<Runner>,
    key: Key,
) -> (Duration, bool) {
    let start = Instant::now();
    let ended = run.await;
    let claim_now = runner.gate.release(key, ended);
    (start.elapsed(), claim_now)
}
