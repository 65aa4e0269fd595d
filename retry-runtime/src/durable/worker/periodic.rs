//! The loop of the worker's periodic components (recoverer, janitor, task gauges): each runs its
//! own, side by side with the processor, until the worker stops.

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
