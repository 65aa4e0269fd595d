//! The one retry policy of the writes that record what became of a claimed task: a completion
//! (the [completer](super::completer)), a failed attempt's decision and a task given back
//! ([`persist`](super::outcome::persist)). A write that fails is tried again after pauses
//! growing to 2 s, for as long as its caller's window lasts: a lease for an outcome (until
//! then the task is still this worker's, and a write that gets through spares it a second run
//! and a retry charged as "lease expired"), a few seconds for a task given back at a stop
//! (whose lease expiring puts it back anyway, and a stop must not wait out a lease per task).

use std::time::Duration;

use tokio::time::Instant;

/// Pauses between tries of a failed write, the last one repeated.
const PAUSES: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// How long a write that gives a task back (at a stop, a cancel, a deferral) is tried: about
/// what it was before the outcomes got a lease's worth (issue 41).
pub(crate) const GIVE_BACK_WINDOW: Duration = Duration::from_secs(3);

/// The tries of one write: started at its first failure, over within a window.
pub(crate) struct Tries {
    give_up: Instant,
    failed: usize,
}

impl Tries {
    /// Tries that go on for `window` from now.
    pub(crate) fn within(window: Duration) -> Tries {
        Tries {
            give_up: Instant::now() + window,
            failed: 0,
        }
    }

    /// After a failed try: the pause before the next one, or `None` (give up) when the next
    /// try would come after the window.
    pub(crate) fn after_failure(&mut self) -> Option<Duration> {
        let pause = PAUSES[self.failed.min(PAUSES.len() - 1)];
        self.failed += 1;
        (Instant::now() + pause < self.give_up).then_some(pause)
    }

    /// How many tries failed so far.
    pub(crate) fn failed(&self) -> usize {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pauses grow to 2 s and stop before the window ends: a window of 30 s gives tries at
    /// 0, 0.1, 0.6, 1.6, 3.6, … 29.6 s (time paused: no real wait).
    #[tokio::test(start_paused = true)]
    async fn tries_go_on_for_the_window_with_pauses_growing_to_two_seconds() {
        let started = Instant::now();
        let mut tries = Tries::within(Duration::from_secs(30));
        let mut pauses = Vec::new();
        while let Some(pause) = tries.after_failure() {
            pauses.push(pause);
            tokio::time::sleep(pause).await;
        }
        assert_eq!(pauses[..4], PAUSES);
        assert!(pauses[4..].iter().all(|&p| p == Duration::from_secs(2)));
        assert_eq!(started.elapsed(), Duration::from_millis(29_600));
        assert_eq!(tries.failed(), pauses.len() + 1);
    }

    /// The window of a give-back: four tries within 1.6 s.
    #[tokio::test(start_paused = true)]
    async fn a_give_back_is_tried_four_times() {
        let mut tries = Tries::within(GIVE_BACK_WINDOW);
        let mut pauses = Vec::new();
        while let Some(pause) = tries.after_failure() {
            pauses.push(pause);
            tokio::time::sleep(pause).await;
        }
        assert_eq!(pauses, PAUSES[..3]);
    }
}
