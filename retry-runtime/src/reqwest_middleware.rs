//! [`RetryMiddleware`] (feature `reqwest-middleware`): the rules of the tower layer for a
//! `reqwest_middleware::ClientWithMiddleware`.

use std::fmt;
use std::sync::Arc;

use ::http::Extensions;
use ::reqwest::{Request, Response};
use ::reqwest_middleware::{Error, Middleware, Next};

use crate::backoff::Policy;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::erased;
use crate::give_up::GiveUp;
use crate::http::{StatusError, idempotency_key, is_safe, is_transient_status};
use crate::key::IdempotencyKey;
use crate::request_loop::{self, Attempts, Ended, FallBack, Sent};
use crate::retrier::admission::enter_waiting;
use crate::site::BuiltSite;

/// A `reqwest_middleware::Middleware` that retries requests under the retry rules, like
/// [`tower::RetryLayer`](crate::tower::RetryLayer) (feature `tower`) does for http services:
///
/// - only a safe method (`GET`, `HEAD`, `OPTIONS`, `TRACE`) or a request with a non-blank
///   `Idempotency-Key` header is retried (R-RES-RE-1, R-RES-RE-X1); any other is sent once;
/// - on a response whose status `http::is_transient_status` calls transient, no sooner than its
///   `Retry-After`; on an error that [`Classify`](crate::Classify) calls transient (a
///   `reqwest::Error`, or a middleware's error by its source chain); never on a 4xx
///   (R-RES-RE-X2); the last response or error comes back as it came;
/// - on a [`Policy`] schedule (the reference one by default), with the retry budget of
///   `system`, shared with `#[retry(system = "…")]`; events and counters are labelled `system`
///   and `operation` (the system's name, or [`name`](RetryMiddleware::name)).
///
/// A request whose body cannot be cloned (a stream) is sent once: reqwest only tells at run
/// time. The first request keeps one small object for the life of the process, once per
/// middleware value: build the client at start-up.
///
/// ```
/// use retry_runtime::reqwest_middleware::RetryMiddleware;
///
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryMiddleware::new("partner-api").name("get_quote"))
///     .build();
/// # let _ = client;
/// ```
#[derive(Clone, Debug)]
pub struct RetryMiddleware {
    site: BuiltSite,
    fallback: Option<AnswerFn>,
}

/// A fallback's function, shared by the middleware's clones.
type Answer = dyn Fn(GiveUp, &Request) -> Result<Response, Error> + Send + Sync;

/// The fallback of a [`RetryMiddleware`]: its function, and when it answers.
#[derive(Clone)]
struct AnswerFn {
    answer: Arc<Answer>,
    refused_only: bool,
}

impl fmt::Debug for AnswerFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("refused_only", &self.refused_only)
            .finish_non_exhaustive()
    }
}

impl RetryMiddleware {
    /// Retries under [`Policy::DEFAULT`], with the retry budget of `system`; events and
    /// counters are labelled `system` and, until [`name`](RetryMiddleware::name) says
    /// otherwise, `operation = system`.
    pub fn new(system: &'static str) -> Self {
        RetryMiddleware {
            site: BuiltSite::new(system),
            fallback: None,
        }
    }

    /// Labels the events and counters of this middleware's requests with `operation`: a name
    /// written in the code, not one taken from requests, so the number of series stays bounded.
    pub fn name(self, operation: &'static str) -> Self {
        RetryMiddleware {
            site: self.site.named(operation),
            ..self
        }
    }

    /// Replaces the schedule.
    pub fn policy(self, policy: Policy) -> Self {
        RetryMiddleware {
            site: self.site.with_policy(policy),
            ..self
        }
    }

    /// Consults the system's circuit breaker and bulkhead, shared with every
    /// `#[retry(…, protect)]` site naming the system, as
    /// [`RetryLayer::protect`](crate::tower::RetryLayer::protect) does: a permit per request,
    /// the breaker's admission before each attempt; a refusal is an
    /// `Error::Middleware` holding a [`Rejected`](crate::Rejected), never retried.
    pub fn protect(self) -> Self {
        RetryMiddleware {
            site: self.site.protected(),
            ..self
        }
    }

    /// Answers a read from `answer` instead of failing, as `#[retry(read, …, fallback = …)]`
    /// and [`RetryLayer::fallback`](crate::tower::RetryLayer::fallback) do: when its attempts
    /// give up on a transient failure, or the system's retry budget, breaker or bulkhead
    /// ([`protect`](RetryMiddleware::protect)) refuses it. `answer` gets why ([`GiveUp`]) and
    /// the request (what the attribute's expression sees of the fn's arguments); an
    /// `http::Response` converts into the `reqwest::Response` it returns.
    ///
    /// Never for a permanent failure (a 4xx, an error that is not transient: returned as it
    /// came); only for a read, a safe request (`GET`, `HEAD`, `OPTIONS`, `TRACE`) without an
    /// `Idempotency-Key`, that can be retried (its body can be copied). A write never falls
    /// back: its fallback is the durable queue (R-RES-RE-5, `#[retry(write, …, hand_over = …)]`).
    /// Each fallback counts as `outcome="fallback"` and in `retry_fallback_total{system,
    /// reason}`, with a WARN aggregated like the give-ups. Replaces a fallback set before.
    ///
    /// ```
    /// use retry_runtime::reqwest_middleware::RetryMiddleware;
    ///
    /// let middleware = RetryMiddleware::new("catalog").protect().fallback(|reason, request| {
    ///     // A real one reads the last good answer for `request.url()` from a cache.
    ///     let stale = http::Response::builder()
    ///         .header("warning", format!("110 - \"stale: {}\"", reason.as_str()))
    ///         .body(format!("[] for {}", request.url()))
    ///         .expect("a valid response");
    ///     Ok(reqwest::Response::from(stale))
    /// });
    /// # let _ = middleware;
    /// ```
    pub fn fallback<F>(self, answer: F) -> Self
    where
        F: Fn(GiveUp, &Request) -> Result<Response, Error> + Send + Sync + 'static,
    {
        self.with_fallback(Arc::new(answer), false)
    }

    /// [`fallback`](RetryMiddleware::fallback), answering only when the system refuses the
    /// request (its retry budget, breaker or bulkhead): `fallback_on = "refused"` of the
    /// attribute. Exhausted attempts return the last response or error as it came.
    pub fn fallback_on_refused<F>(self, answer: F) -> Self
    where
        F: Fn(GiveUp, &Request) -> Result<Response, Error> + Send + Sync + 'static,
    {
        self.with_fallback(Arc::new(answer), true)
    }

    fn with_fallback(self, answer: Arc<Answer>, refused_only: bool) -> Self {
        RetryMiddleware {
            fallback: Some(AnswerFn {
                answer,
                refused_only,
            }),
            ..self
        }
    }
}

/// A refusal, as the middleware's error.
fn refused(rejected: crate::Rejected) -> Error {
    Error::middleware(rejected)
}

/// What an error of the chain says, through `Classify`.
fn verdict(error: &Error) -> Verdict {
    match error {
        Error::Reqwest(error) => Verdict::of(error),
        Error::Middleware(error) => erased::first_known(&**error).unwrap_or(Verdict {
            transient: false,
            retry_after: None,
            rejection: false,
        }),
    }
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response, Error> {
        let site = self.site.get();
        let key = idempotency_key(request.headers());
        let safe = is_safe(request.method());
        if !(key.is_some() || safe) || request.try_clone().is_none() {
            return send_once(site, request, extensions, next).await;
        }
        // Only a read falls back: a keyed request is a write.
        let on = match (&self.fallback, safe, &key) {
            (Some(fallback), true, None) => Some(FallBack {
                refused_only: fallback.refused_only,
            }),
            _ => None,
        };
        let (ended, request) = match request_loop::enter(site, on).await {
            Ok(_permit) => {
                let mut attempts = Copies {
                    request: Some(request),
                    extensions,
                    next,
                };
                let key = key.as_ref().map(|key| key as &dyn IdempotencyKey);
                let ended = request_loop::run(site, key, &mut attempts, on).await;
                (ended, attempts.request)
            }
            Err(refusal) => (refusal.ended(refused), Some(request)),
        };
        match (ended, &self.fallback, request) {
            (Ended::Returned(outcome), _, _) => outcome,
            (Ended::FellBack(reason), Some(fallback), Some(request)) => {
                (fallback.answer)(reason, &request)
            }
            // Not reached: only a middleware with a fallback falls back, and its loop keeps the
            // request (only a request sent as it is, never judged, leaves it).
            (Ended::FellBack(reason), _, _) => {
                Err(Error::middleware(std::io::Error::other(format!(
                    "fell back without a fallback or a request: {}",
                    reason.as_str()
                ))))
            }
        }
    }
}

/// A request that cannot be retried (a write without a key, a body that cannot be copied):
/// sent once, as if there were no middleware; a protected one still asks the bulkhead and the
/// breaker, and tells the breaker the outcome. Never falls back.
async fn send_once(
    site: &'static crate::site::Site,
    request: Request,
    extensions: &mut Extensions,
    next: Next<'_>,
) -> Result<Response, Error> {
    let _permit = match site.protect {
        true => Some(enter_waiting(site, false).await.map_err(refused)?),
        false => None,
    };
    if site.protect {
        site.admit().map_err(refused)?;
    }
    let outcome = next.run(request, extensions).await;
    site.feed_breaker(match &outcome {
        Ok(response) if !is_transient_status(response.status().as_u16()) => None,
        Ok(response) => Some(Verdict::of(&StatusError::from_parts(
            response.status(),
            response.headers(),
        ))),
        Err(error) => Some(verdict(error)),
    });
    outcome
}

/// A retried request's attempts down the chain: each a copy of the request (`try_clone`).
struct Copies<'a> {
    /// The request; taken only to send it as it is, should it stop being copyable.
    request: Option<Request>,
    extensions: &'a mut Extensions,
    next: Next<'a>,
}

impl Attempts for Copies<'_> {
    type Response = Response;
    type Error = Error;

    async fn send(&mut self, _first: bool) -> Sent<Response, Error> {
        if let Some(attempt) = self.request.as_ref().and_then(Request::try_clone) {
            return Sent::Attempt(self.next.clone().run(attempt, self.extensions).await);
        }
        // A body that cannot be copied (checked before the loop, so not expected): sent once,
        // as it is, and its outcome returned.
        match self.request.take() {
            Some(request) => Sent::Last(self.next.clone().run(request, self.extensions).await),
            None => Sent::Last(Err(Error::middleware(std::io::Error::other(
                "the request was already sent and cannot be copied for another attempt",
            )))),
        }
    }

    fn failed_status(response: &Response) -> Option<StatusError> {
        is_transient_status(response.status().as_u16())
            .then(|| StatusError::from_parts(response.status(), response.headers()))
    }

    fn verdict(error: &Error) -> Verdict {
        verdict(error)
    }

    fn text(error: &Error) -> ErrorText<'_> {
        ErrorText::Error(error)
    }

    fn refused(rejected: crate::Rejected) -> Error {
        refused(rejected)
    }
}
