//! The service [`RetryLayer`](super::RetryLayer) wraps around another: decides per request
//! whether it may be retried, then drives the same [`Retrier`] as `#[retry]`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::replay::{ReplayableBody, transient_response};
use crate::Rejected;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::hedge::HedgeSite;
use crate::http::StatusError;
use crate::http::{idempotency_key, is_safe};
use crate::key::IdempotencyKey;
use crate::request_loop::{self, Attempts, Sent};
use crate::site::Site;

/// A protected layer's permit and admission (nothing for an unprotected one).
mod protect {
    use crate::BoxError;
    use crate::protect::Permit;
    use crate::retrier::admission::enter_waiting;
    use crate::site::Site;

    /// The bulkhead's permit and the breaker's admission of a call made once.
    pub(super) async fn enter(site: &'static Site) -> Result<Option<Permit>, BoxError> {
        let permit = enter_for_loop(site).await?;
        if site.protect {
            site.admit()?;
        }
        Ok(permit)
    }

    /// The bulkhead's permit of a call whose loop asks the breaker before each attempt.
    pub(super) async fn enter_for_loop(site: &'static Site) -> Result<Option<Permit>, BoxError> {
        if !site.protect {
            return Ok(None);
        }
        Ok(Some(enter_waiting(site).await?))
    }
}

/// What the breaker hears of a call made once: `None` a success (a response that is not a
/// transient status), else the verdict on the status or the error.
fn verdict_of<B>(outcome: &Result<Response<B>, BoxError>) -> Option<Verdict> {
    match outcome {
        Ok(response) => transient_response(response).map(|hint| {
            Verdict::of(&StatusError {
                status: response.status().as_u16(),
                retry_after: hint,
            })
        }),
        Err(error) => Some(Verdict::of(error)),
    }
}

use crate::BoxError;

/// A service whose requests are retried under the retry rules; built by
/// [`RetryLayer`](super::RetryLayer).
#[derive(Clone, Debug)]
pub struct RetryService<S> {
    inner: S,
    site: &'static Site,
    hedge: Option<&'static HedgeSite>,
}

impl<S> RetryService<S> {
    pub(super) fn new(inner: S, site: &'static Site, hedge: Option<&'static HedgeSite>) -> Self {
        RetryService { inner, site, hedge }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, B, ResB> Service<Request<B>> for RetryService<S>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayableBody + Send + 'static,
    ResB: Send + 'static,
{
    type Response = Response<ResB>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResB>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone that was driven to readiness serves the first attempt (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let site = self.site;
        let key = idempotency_key(request.headers());
        if key.is_none() && !is_safe(request.method()) {
            // Not retryable: one attempt, as if there were no layer (R-RES-RE-X1); a protected
            // layer still asks the breaker and the bulkhead, and tells the breaker the outcome.
            return Box::pin(async move {
                let _permit = protect::enter(site).await?;
                let outcome = inner.call(request).await.map_err(Into::into);
                site.feed_breaker(verdict_of(&outcome));
                outcome
            });
        }
        if let (Some(hedge), None, true) = (self.hedge, &key, is_safe(request.method())) {
            return Box::pin(async move {
                let _permit = protect::enter(site).await?;
                let outcome = super::hedged::call(inner, site, hedge, request).await;
                site.feed_breaker(verdict_of(&outcome));
                outcome
            });
        }
        let (parts, body) = request.into_parts();
        Box::pin(async move {
            let _permit = protect::enter_for_loop(site).await?;
            let mut attempts = Replays { inner, parts, body };
            let key = key.as_ref().map(|key| key as &dyn IdempotencyKey);
            request_loop::run(site, key, &mut attempts).await
        })
    }
}

/// A retried request's attempts through the service: each a copy of the request, the service
/// driven to readiness before each but the first (the first uses the clone `call` was given).
struct Replays<S, B> {
    inner: S,
    parts: http::request::Parts,
    body: B,
}

impl<S, B, ResB> Attempts for Replays<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>> + Send,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayableBody + Send,
    ResB: Send,
{
    type Response = Response<ResB>;
    type Error = BoxError;

    async fn send(&mut self, first: bool) -> Sent<Response<ResB>, BoxError> {
        if !first {
            let ready = std::future::poll_fn(|cx| self.inner.poll_ready(cx)).await;
            if let Err(error) = ready {
                return Sent::Last(Err(error.into()));
            }
        }
        let attempt = Request::from_parts(self.parts.clone(), self.body.clone());
        Sent::Attempt(self.inner.call(attempt).await.map_err(Into::into))
    }

    fn failed_status(response: &Response<ResB>) -> Option<StatusError> {
        transient_response(response).map(|hint| StatusError {
            status: response.status().as_u16(),
            retry_after: hint,
        })
    }

    fn verdict(error: &BoxError) -> Verdict {
        Verdict::of(error)
    }

    fn text(error: &BoxError) -> ErrorText<'_> {
        ErrorText::Display(error)
    }

    fn refused(rejected: Rejected) -> BoxError {
        Box::new(rejected)
    }
}
