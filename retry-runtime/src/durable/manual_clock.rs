//! [`ManualClock`] (feature `test-util`): the queue's clock moved by hand.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::durable::clock::Clock;

/// A clock that moves only when told to: schedules, lease expiries and archive ages become exact.
/// Feature `test-util` (tokio's convention for what tests need).
///
/// Clones share the same time.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use retry_runtime::durable::{Clock, ManualClock};
///
/// let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
/// clock.advance(Duration::from_secs(15));
/// assert_eq!(clock.now(), UNIX_EPOCH + Duration::from_secs(1_700_000_015));
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<SystemTime>>,
}

impl ManualClock {
    /// A clock that reads `start` until moved.
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now += by;
    }

    /// Sets the clock to `to` (forward or back).
    pub fn set(&self, to: SystemTime) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
