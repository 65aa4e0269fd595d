//! The service [`RetryLayer`](super::RetryLayer) wraps around another: decides per request
//! whether it may be retried, then drives the same [`Retrier`] as `#[retry]`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::fallback::{LayerFallback, NoFallback};
use super::replay::{ReplayableBody, transient_response};
use crate::Rejected;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::hedge::HedgeSite;
use crate::http::StatusError;
use crate::http::{idempotency_key, is_safe};
use crate::key::IdempotencyKey;
use crate::protect::Permit;
use crate::request_loop::{self, Attempts, Ended, FallBack, Refused, Sent};
use crate::site::Site;

/// A protected layer's permit and admission of a call made once (nothing for an unprotected
/// one), a refusal as the boxed rejection.
async fn enter_once(site: &'static Site) -> Result<Option<Permit>, BoxError> {
    let refused = |refused: Refused| match refused {
        Refused::Rejected(rejected) => BoxError::from(rejected),
        // Not reached: a call made once has no fallback.
        Refused::FellBack(reason) => BoxError::from(reason.as_str()),
    };
    let permit = request_loop::enter(site, None).await.map_err(refused)?;
    request_loop::admit_once(site, None).map_err(refused)?;
    Ok(permit)
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
/// [`RetryLayer`](super::RetryLayer). `F`: its fallback ([`NoFallback`] without one).
#[derive(Clone, Debug)]
pub struct RetryService<S, F = NoFallback> {
    inner: S,
    site: &'static Site,
    hedge: Option<&'static HedgeSite>,
    fallback: F,
}

impl<S, F> RetryService<S, F> {
    pub(super) fn new(
        inner: S,
        site: &'static Site,
        hedge: Option<&'static HedgeSite>,
        fallback: F,
    ) -> Self {
        RetryService {
            inner,
            site,
            hedge,
            fallback,
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, B, ResB, F> Service<Request<B>> for RetryService<S, F>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayableBody + Send + 'static,
    ResB: Send + 'static,
    F: LayerFallback<ResB>,
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
        let safe = is_safe(request.method());
        if key.is_none() && !safe {
            // Not retryable: one attempt, as if there were no layer (R-RES-RE-X1); a protected
            // layer still asks the breaker and the bulkhead, and tells the breaker the outcome.
            // A write: no fallback (R-RES-RE-5, its fallback is the queue).
            return Box::pin(async move {
                let _permit = enter_once(site).await?;
                let outcome = inner.call(request).await.map_err(Into::into);
                site.feed_breaker(verdict_of(&outcome));
                outcome
            });
        }
        // Only a read falls back: a keyed request is a write.
        let fallback = self.fallback.clone();
        let on = match (safe, &key) {
            (true, None) => fallback
                .refused_only()
                .map(|refused_only| FallBack { refused_only }),
            _ => None,
        };
        let (parts, body) = request.into_parts();
        if let (Some(hedge), None, true) = (self.hedge, &key, safe) {
            return Box::pin(async move {
                let ended = match enter_hedged(site, on).await {
                    Ok(_permit) => {
                        let ended = super::hedged::call(inner, site, hedge, &parts, body, on).await;
                        site.feed_breaker(match &ended {
                            Ended::Returned(outcome) => verdict_of(outcome),
                            Ended::FellBack(_) => Some(GAVE_UP),
                        });
                        ended
                    }
                    Err(refused) => refused.ended(boxed),
                };
                match ended {
                    Ended::Returned(outcome) => outcome,
                    Ended::FellBack(reason) => fallback.answer(reason, parts).await,
                }
            });
        }
        Box::pin(async move {
            let ended = match request_loop::enter(site, on).await {
                Ok(_permit) => {
                    let parts = &parts;
                    let mut attempts = Replays { inner, parts, body };
                    let key = key.as_ref().map(|key| key as &dyn IdempotencyKey);
                    request_loop::run(site, key, &mut attempts, on).await
                }
                Err(refused) => refused.ended(boxed),
            };
            // The fallback's answer, for the request's head: moved here, never copied.
            match ended {
                Ended::Returned(outcome) => outcome,
                Ended::FellBack(reason) => fallback.answer(reason, parts).await,
            }
        })
    }
}

/// What the breaker of a hedged call hears when it fell back after its attempts: they gave up
/// on a transient failure.
const GAVE_UP: Verdict = Verdict {
    transient: true,
    retry_after: None,
    rejection: false,
};

/// The permit and the breaker's admission of a hedged request (admitted once).
async fn enter_hedged(
    site: &'static Site,
    on: Option<FallBack>,
) -> Result<Option<Permit>, Refused> {
    let permit = request_loop::enter(site, on).await?;
    request_loop::admit_once(site, on)?;
    Ok(permit)
}

/// A refusal as the service's error.
fn boxed(rejected: Rejected) -> BoxError {
    Box::new(rejected)
}

/// A retried request's attempts through the service: each a copy of the request, the service
/// driven to readiness before each but the first (the first uses the clone `call` was given).
struct Replays<'p, S, B> {
    inner: S,
    /// Borrowed: the request's head stays with the call, for its fallback.
    parts: &'p http::request::Parts,
    body: B,
}

impl<S, B, ResB> Attempts for Replays<'_, S, B>
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
