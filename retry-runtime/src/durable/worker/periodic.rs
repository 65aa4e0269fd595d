//! The loops of the worker's periodic components (recoverer, janitor, heartbeat, task gauges):
//! each runs its own, side by side with the processor, until the worker stops.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Runs `tick` at once and then every `interval` until `stop` turns true (or its sender is
/// dropped): the loop of every periodic component of the worker.
pub(crate) async fn every<F, Fut>(interval: Duration, mut stop: watch::Receiver<bool>, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        tick().await;
        let next = Instant::now() + interval;
        tokio::select! {
            biased;
            changed = stop.changed() => if changed.is_err() { return },
            () = tokio::time::sleep_until(next) => {}
        }
    }
}

/// [`every`], and at once whenever `wake` changes (a queue's leadership was gained): the loop
/// of the leader's maintenance, so that a new leader recovers without waiting for its timer.
pub(crate) async fn every_or_woken<F, Fut>(
    interval: Duration,
    mut stop: watch::Receiver<bool>,
    mut wake: watch::Receiver<u64>,
    mut tick: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut next = Instant::now();
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        tokio::select! {
            biased;
            changed = stop.changed() => if changed.is_err() { return } else { continue },
            Ok(()) = wake.changed() => {}
            () = tokio::time::sleep_until(next) => {}
        }
        wake.mark_unchanged();
        tick().await;
        next = Instant::now() + interval;
    }
}
