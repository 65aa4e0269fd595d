//! What a `#[retry(…, protect)]` expansion calls around its loop: a bulkhead permit for the
//! whole call ([`enter`], then [`Queued::wait`] where the bulkhead lets calls wait), the
//! breaker's admission before each attempt (`Retrier::admit`), and the conversion of a
//! refusal into the fn's error ([`Reject`]).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::observe;
use crate::protect::{Permit, Rejected};
use crate::result::RetryResult;
use crate::site::Site;

/// A permit of the site's system's bulkhead, or a place in its queue when it is full.
#[inline]
pub fn enter(site: &'static Site) -> Result<Permit, Queued> {
    match site.protection().bulkhead.try_enter() {
        Some(permit) => Ok(permit),
        None => Err(Queued(site, true)),
    }
}

/// A permit of the site's system's bulkhead, waiting for one where it lets calls wait: for the
/// sites built at run time (the tower layer, the reqwest middleware). A refusal is counted
/// (`bulkhead_full`) unless `uncounted` (a call with a fallback counts its fallback instead).
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) async fn enter_waiting(
    site: &'static Site,
    uncounted: bool,
) -> Result<Permit, Rejected> {
    match enter(site) {
        Ok(permit) => Ok(permit),
        Err(queued) if uncounted => queued.for_hand_over().wait().await,
        Err(queued) => queued.wait().await,
    }
}

/// A call that found its system's bulkhead full: a place in its queue, and whether a refusal
/// is counted now (`false` for a write with `hand_over`, which counts what became of the work).
#[must_use = "wait for a permit, or refuse the call"]
pub struct Queued(&'static Site, bool);

impl Queued {
    /// The same place, its refusal left for the hand-over to count (`#[retry(write, …,
    /// hand_over = …, protect)]`: a refused write goes to the queue, counted `handed_over`).
    pub fn for_hand_over(self) -> Queued {
        Queued(self.0, false)
    }

    /// Waits for a permit up to the bulkhead's `max_wait`; refused at once without one.
    ///
    /// Only a bulkhead with a `max_wait` makes a waiting future (a timer and a notification,
    /// some 200 bytes), boxed so that a protected fn's own future, which holds this one across
    /// its `.await`, stays the size of an unprotected one's; a refusal allocates nothing.
    pub fn wait(self) -> Wait {
        if self.0.protection().bulkhead.max_wait().is_zero() {
            return Wait::Now(std::future::ready(Err(self.refuse())));
        }
        Wait::Later(Box::pin(async move {
            match self.0.protection().bulkhead.wait().await {
                Some(permit) => Ok(permit),
                None => Err(self.refuse()),
            }
        }))
    }

    /// Refuses the call at once (a blocking fn does not wait).
    pub fn refuse(self) -> Rejected {
        let rejected = Rejected::BulkheadFull {
            system: self.0.system,
        };
        if self.1 {
            observe::rejected(&self.0.observer, rejected);
        }
        rejected
    }
}

/// What [`Queued::wait`] gives: a refusal now, or the wait for a permit.
pub enum Wait {
    /// The bulkhead lets no call wait: refused.
    Now(std::future::Ready<Result<Permit, Rejected>>),
    /// Waiting up to the bulkhead's `max_wait`.
    Later(Pin<Box<dyn Future<Output = Result<Permit, Rejected>> + Send>>),
}

impl Future for Wait {
    type Output = Result<Permit, Rejected>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Wait::Now(now) => Pin::new(now).poll(cx),
            Wait::Later(later) => later.as_mut().poll(cx),
        }
    }
}

/// Turns a refusal into the fn's result: `Err(E::from(rejected))`. Built once per call from
/// [`from_rejected`](crate::protect::from_rejected), spanned at `protect`, so that an error
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
