//! The fallback of a [`RetryLayer`](super::RetryLayer)
//! ([`RetryLayer::fallback`](super::RetryLayer::fallback),
//! [`RetryLayer::fallback_on_refused`](super::RetryLayer::fallback_on_refused)): what a read
//! answers with when its attempts give up on a transient failure, or its system's budget,
//! breaker or bulkhead refuses it. [`NoFallback`], the default, is a zero-sized type: a layer
//! without a fallback carries nothing and does nothing more per request.

use std::fmt;
use std::future::Future;

use http::Response;
use http::request::Parts;

use crate::BoxError;
use crate::give_up::GiveUp;

/// No fallback: a [`RetryLayer`](super::RetryLayer)'s default. A give-up returns the last
/// response or error as it came, a refusal the boxed [`Rejected`](crate::Rejected).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoFallback;

/// A fallback set by [`RetryLayer::fallback`](super::RetryLayer::fallback) or
/// [`RetryLayer::fallback_on_refused`](super::RetryLayer::fallback_on_refused): a function of
/// why ([`GiveUp`]) and the request's head (`http::request::Parts`) to the future of a response.
#[derive(Clone)]
pub struct Fallback<F> {
    answer: F,
    refused_only: bool,
}

impl<F> Fallback<F> {
    pub(super) fn new(answer: F, refused_only: bool) -> Self {
        Fallback {
            answer,
            refused_only,
        }
    }
}

impl<F> fmt::Debug for Fallback<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("refused_only", &self.refused_only)
            .finish_non_exhaustive()
    }
}

mod sealed {
    /// Only [`NoFallback`](super::NoFallback) and [`Fallback`](super::Fallback).
    pub trait Sealed {}
}

impl sealed::Sealed for NoFallback {}
impl<F> sealed::Sealed for Fallback<F> {}

/// What a [`RetryService`](super::RetryService) answers a read with when it falls back:
/// nothing ([`NoFallback`]), or a [`Fallback`] whose function makes a
/// `Result<http::Response<ResB>, E>` (`E: Into<BoxError>`) from the reason and the request's
/// head, `ResB` the inner service's response body. Sealed: set with
/// [`RetryLayer::fallback`](super::RetryLayer::fallback).
#[diagnostic::on_unimplemented(
    message = "this fallback does not answer the service's requests",
    label = "the fallback of this `RetryLayer`",
    note = "a `RetryLayer` fallback is `Fn(GiveUp, http::request::Parts) -> Fut + Clone + Send + Sync + 'static`, `Fut: Future<Output = Result<http::Response<ResB>, E>> + Send + 'static`, `E: Into<BoxError>`, with `ResB` the inner service's response body type"
)]
pub trait LayerFallback<ResB>: sealed::Sealed + Clone + Send + Sync + 'static {
    /// `None` without a fallback; `Some(refused_only)` with one.
    #[doc(hidden)]
    fn refused_only(&self) -> Option<bool>;

    /// The fallback's answer for `reason`, to the request of `parts`.
    #[doc(hidden)]
    fn answer(
        &self,
        reason: GiveUp,
        parts: Parts,
    ) -> impl Future<Output = Result<Response<ResB>, BoxError>> + Send;
}

impl<ResB: Send> LayerFallback<ResB> for NoFallback {
    #[inline(always)]
    fn refused_only(&self) -> Option<bool> {
        None
    }

    fn answer(
        &self,
        reason: GiveUp,
        parts: Parts,
    ) -> impl Future<Output = Result<Response<ResB>, BoxError>> + Send {
        // Not reached: a service without a fallback never falls back. The future holds neither
        // the parts nor a response (it sits in every request's future): the error is made when
        // polled.
        drop(parts);
        async move {
            Err(BoxError::from(format!(
                "no fallback is set, yet the request fell back: {}",
                reason.as_str()
            )))
        }
    }
}

impl<F, Fut, ResB, E> LayerFallback<ResB> for Fallback<F>
where
    F: Fn(GiveUp, Parts) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<ResB>, E>> + Send + 'static,
    E: Into<BoxError>,
{
    #[inline(always)]
    fn refused_only(&self) -> Option<bool> {
        Some(self.refused_only)
    }

    fn answer(
        &self,
        reason: GiveUp,
        parts: Parts,
    ) -> impl Future<Output = Result<Response<ResB>, BoxError>> + Send {
        let answered = (self.answer)(reason, parts);
        async move { answered.await.map_err(Into::into) }
    }
}
