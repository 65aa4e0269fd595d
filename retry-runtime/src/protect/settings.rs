//! A system's breaker and bulkhead settings, either or both: what its code set, or what is in
//! effect once the configuration tightened them.

use super::breaker::Breaker;
use super::bulkhead::Bulkhead;

/// A system's breaker and bulkhead settings; `None` where it has none.
#[derive(Clone, Copy, Default)]
pub(crate) struct Settings {
    pub(crate) breaker: Option<Breaker>,
    pub(crate) bulkhead: Option<Bulkhead>,
}
