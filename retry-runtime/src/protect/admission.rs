//! What a `#[retry(…, protect)]` expansion calls around its loop: a bulkhead permit for the
//! whole call ([`enter`], then [`Queued::wait`] where the bulkhead lets calls wait), the
//! breaker's admission before each attempt (`Retrier::admit`), and the conversion of a
//! refusal into the fn's error ([`Reject`]).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use super::bulkhead::Permit;
use super::rejected::Rejected;
use crate::observe;
use crate::retrier::{RetryResult, Site};

/// A permit of the site's system's bulkhead, or a place in its queue when it is full.
#[inline]
pub fn enter(site: &'static Site) -> Result<Permit, Queued> {
    match site.protection().bulkhead.try_enter() {
        Some(permit) => Ok(permit),
        None => Err(Queued(site)),
    }
}

/// A permit of the site's system's bulkhead, waiting for one where it lets calls wait: for the
/// sites built at run time (the tower layer, the reqwest middleware).
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) async fn enter_waiting(site: &'static Site) -> Result<Permit, Rejected> {
    match enter(site) {
        Ok(permit) => Ok(permit),
        Err(queued) => queued.wait().await,
    }
}

/// A call that found its system's bulkhead full.
#[must_use = "wait for a permit, or refuse the call"]
pub struct Queued(&'static Site);

impl Queued {
    /// Waits for a permit up to the bulkhead's `max_wait` (refused at once without one).
    ///
    /// Boxed: only a call that finds the bulkhead full pays for the waiting future (a timer
    /// and a notification, some 200 bytes), so that a protected fn's own future, which holds
    /// this one across its `.await`, stays the size of an unprotected one's.
    pub fn wait(self) -> Pin<Box<dyn Future<Output = Result<Permit, Rejected>> + Send>> {
        Box::pin(async move {
            let bulkhead = &self.0.protection().bulkhead;
            if !bulkhead.max_wait().is_zero() {
                if let Some(permit) = bulkhead.wait().await {
                    return Ok(permit);
                }
            }
            Err(self.refuse())
        })
    }

    /// Refuses the call at once (a blocking fn does not wait).
    pub fn refuse(self) -> Rejected {
        let rejected = Rejected::BulkheadFull {
            system: self.0.system,
        };
        observe::rejected(self.0, rejected);
        rejected
    }
}

/// Turns a refusal into the fn's result: `Err(E::from(rejected))`. Built once per call from
/// [`from_rejected`](super::rejected::from_rejected), spanned at `protect`, so that an error
/// type without `From<Rejected>` is reported there, once.
pub struct Reject<R: RetryResult> {
    convert: fn(Rejected) -> R::Error,
    result: PhantomData<fn() -> R>,
}

impl<R: RetryResult> Reject<R> {
    /// The conversion.
    #[inline(always)]
    pub fn new(convert: fn(Rejected) -> R::Error) -> Self {
        Reject {
            convert,
            result: PhantomData,
        }
    }

    /// The failed result for `rejected`.
    #[inline]
    pub fn failed(&self, rejected: Rejected) -> R {
        R::failed((self.convert)(rejected))
    }
}
