//! The rules as tower middleware (feature `tower`): [`RetryLayer`] retries the requests of an
//! `http::Request` → `http::Response` service (a hyper-util client, an axum-based proxy) under
//! the same rules as `#[retry]`, checked at run time, where a layer sees each request.
//!
//! - **Which requests** (R-RES-RE-1, R-RES-RE-X1): a request is retried only if its method is
//!   safe (`GET`, `HEAD`, `OPTIONS`, `TRACE`) or it carries a non-blank `Idempotency-Key` header,
//!   which the other side must deduplicate on. Any other request is sent once.
//! - **Which failures**: a response whose status [`is_transient_status`](crate::http::is_transient_status) says so (500, 502, 503,
//!   504), waiting at least its `Retry-After`; an error of the inner service by [`Classify`](crate::Classify)
//!   (through its source chain: a refused or reset connection, a timeout). A 4xx is never
//!   retried (R-RES-RE-X2); the last response or error is returned as it came.
//! - **How often**: the schedule is a [`Policy`], which cannot be built with more than 5
//!   attempts or more than 5 s of pauses (R-RES-RE-3, R-RES-RE-4); the reference configuration by
//!   default. `system` shares the attribute's retry budget with every `#[retry(system = "…")]`
//!   of that name, and the same events and give-up reasons; the events and
//!   `retry_attempts_total` carry `operation` = the system's name, or the layer's
//!   [`name`](RetryLayer::name) (one layer per operation, to tell them apart).
//! - **Hedging** ([`RetryLayer::hedge`]): a safe request whose attempt is slower than the
//!   [`Hedge`] delay gets a second one beside it, the first answer winning; the behaviour of
//!   `#[retry(read, hedge = "...")]` (the crate's hedging docs), within the same attempts, retry
//!   budget and `hedge_load` share. Keyed writes and other requests are never hedged.
//! - **Fallback** ([`RetryLayer::fallback`], [`RetryLayer::fallback_on_refused`]): a read (a safe
//!   request without a key) answers from a function of the [`GiveUp`] reason
//!   after a transient give-up or a refusal of its budget, breaker or bulkhead, as
//!   `#[retry(read, …, fallback = …)]` does; never after a 4xx, never for a write.
//! - **Bodies must be replayable**: the request body type must be `Clone` (e.g. `Full<Bytes>`,
//!   `String`, `Vec<u8>`, `()`); a streaming body (hyper's `Incoming`) is refused at compile time
//!   ([`ReplayableBody`]): buffer it first.
//!
//! ```
//! use retry_runtime::tower::RetryLayer;
//! use retry_runtime::{Jitter, Policy};
//! use std::time::Duration;
//!
//! let layer = RetryLayer::new("partner-api");
//! let faster = RetryLayer::new("partner-api")
//!     .name("get_quote")
//!     .policy(Policy::new(3, Duration::from_millis(100), Duration::from_secs(1), Jitter::Full)?);
//! # Ok::<(), retry_runtime::PolicyError>(())
//! ```

mod fallback;
mod hedged;
mod replay;
mod service;

use std::future::Future;

use http::request::Parts;
use tower_layer::Layer;

pub use fallback::{Fallback, LayerFallback, NoFallback};
pub use replay::ReplayableBody;
pub use service::RetryService;

use crate::backoff::Policy;
use crate::give_up::GiveUp;
use crate::hedge::Hedge;
use crate::site::BuiltSite;

/// A [`tower_layer::Layer`] that retries requests under the retry rules; see the
/// [module docs](self).
///
/// The first [`layer`](Layer::layer) call keeps one small object for the life of the process
/// (the budget and counters' handle that the `#[retry]` expansions keep in a `static`), once
/// per layer value and its later clones: build layers at start-up, not per request.
///
/// `F` is its fallback: [`NoFallback`] (nothing, the default) until
/// [`fallback`](RetryLayer::fallback) sets one.
#[derive(Clone, Debug)]
pub struct RetryLayer<F = NoFallback> {
    site: BuiltSite,
    hedge: Option<hedged::BuiltHedge>,
    fallback: F,
}

impl RetryLayer {
    /// Retries under [`Policy::DEFAULT`] (3 attempts, 200 ms doubling, equal jitter), with the
    /// retry budget of `system`; events and counters are labelled `system` and, until
    /// [`name`](RetryLayer::name) says otherwise, `operation = system`.
    pub fn new(system: &'static str) -> Self {
        RetryLayer {
            site: BuiltSite::new(system),
            hedge: None,
            fallback: NoFallback,
        }
    }
}

impl<F> RetryLayer<F> {
    /// Labels the events and counters of this layer's requests with `operation`: a name written
    /// in the code (like `#[retry(name = "…")]`), not one taken from requests, so the number of
    /// series stays bounded.
    pub fn name(self, operation: &'static str) -> Self {
        RetryLayer {
            site: self.site.named(operation),
            ..self
        }
    }

    /// Replaces the schedule.
    pub fn policy(self, policy: Policy) -> Self {
        RetryLayer {
            site: self.site.with_policy(policy),
            hedge: self.hedge.map(hedged::BuiltHedge::remade),
            fallback: self.fallback,
        }
    }

    /// Consults the system's circuit breaker and bulkhead ([`System::set_breaker`](crate::System::set_breaker),
    /// [`System::set_bulkhead`](crate::System::set_bulkhead)), shared with every `#[retry(…, protect)]` site
    /// naming the system: each request holds a bulkhead permit from its first attempt to its
    /// last (pauses included), and the breaker admits each attempt and hears its outcome. A
    /// refused request fails with a boxed [`Rejected`](crate::Rejected), never retried
    /// (R-RES-RE-X4). A request sent once, or hedged, is admitted once and reported by its final
    /// outcome.
    ///
    /// ```
    /// use retry_runtime::tower::RetryLayer;
    /// use retry_runtime::{declare_system, Breaker};
    ///
    /// // A system only layers call: declared, so that naming it does not warn.
    /// declare_system("partner-api").set_breaker(Breaker::new());
    /// let layer = RetryLayer::new("partner-api").protect();
    /// ```
    pub fn protect(self) -> Self {
        RetryLayer {
            site: self.site.protected(),
            ..self
        }
    }

    /// Answers a read from `answer` instead of failing, as `#[retry(read, …, fallback = …)]`
    /// does: when its attempts give up on a transient failure (a 5xx, a broken connection), or
    /// its system's retry budget, breaker or bulkhead ([`protect`](RetryLayer::protect)) refuses
    /// it. `answer` gets why ([`GiveUp`]) and the request's head (method, URI,
    /// headers: `http::request::Parts`, what the attribute's expression sees of the fn's
    /// arguments) and makes the response: `Fn(GiveUp, Parts) -> Fut`,
    /// `Fut: Future<Output = Result<http::Response<ResB>, E>>`, `E: Into<BoxError>`, `ResB` the
    /// inner service's response body: one the fallback can make (map hyper's `Incoming` into
    /// `Full<Bytes>` or a `BoxBody` under this layer first).
    ///
    /// - **Never for a permanent failure**: a 4xx, or an error [`Classify`](crate::Classify)
    ///   calls permanent, is a contract error on our side that a degraded answer would hide; it
    ///   comes back as it came (R-RES-RE-X2).
    /// - **Reads only**: a safe request (`GET`, `HEAD`, `OPTIONS`, `TRACE`) without an
    ///   `Idempotency-Key`. A write (any other method, or a request with a key) never falls
    ///   back: a made-up answer would tell the caller that a change happened when it did not.
    ///   Its failure or refusal comes back as without a fallback; a write's fallback is the
    ///   durable queue (R-RES-RE-5: `#[retry(write, …, hand_over = …)]` on the adapter's method).
    /// - **Never silent**: each fallback counts as `outcome="fallback"` in
    ///   `retry_attempts_total` and in `retry_fallback_total{system, reason}`, and logs a WARN
    ///   with the reason, aggregated like the give-ups; a breaker refusal counts as a fallback,
    ///   not as `breaker_open`.
    /// - Hedged requests ([`hedge`](RetryLayer::hedge)) fall back by the same rule.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Response, StatusCode};
    /// use retry_runtime::tower::RetryLayer;
    ///
    /// let layer = RetryLayer::new("catalog").protect().fallback(|reason, request| async move {
    ///     // A real one reads the last good answer for `request.uri` from a cache.
    ///     let stale = Response::builder()
    ///         .status(StatusCode::OK)
    ///         .header("warning", format!("110 - \"stale: {}\"", reason.as_str()))
    ///         .body(format!("[] for {}", request.uri))
    ///         .expect("a valid response");
    ///     Ok::<_, Infallible>(stale)
    /// });
    /// ```
    pub fn fallback<A, Fut>(self, answer: A) -> RetryLayer<Fallback<A>>
    where
        A: Fn(GiveUp, Parts) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future + Send + 'static,
    {
        self.with_fallback(Fallback::new(answer, false))
    }

    /// [`fallback`](RetryLayer::fallback), answering only when the system refuses the request
    /// (its retry budget, breaker or bulkhead): `fallback_on = "refused"` of the attribute. A
    /// give-up on exhausted attempts returns the last response or error as it came. Replaces a
    /// fallback set before, as [`fallback`](RetryLayer::fallback) does.
    pub fn fallback_on_refused<A, Fut>(self, answer: A) -> RetryLayer<Fallback<A>>
    where
        A: Fn(GiveUp, Parts) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future + Send + 'static,
    {
        self.with_fallback(Fallback::new(answer, true))
    }

    fn with_fallback<G>(self, fallback: G) -> RetryLayer<G> {
        RetryLayer {
            site: self.site,
            hedge: self.hedge,
            fallback,
        }
    }

    /// Hedges safe requests (`GET`, `HEAD`, `OPTIONS`, `TRACE`): when an attempt has not
    /// answered after the [`Hedge`] delay, the next starts beside it and the first answer wins.
    /// Attempts count the hedges; each hedge draws on the system's retry budget and on this
    /// layer's `hedge_load` share. Other requests keep the plain retry loop (a keyed write is
    /// never hedged, R-RES-RE-1).
    ///
    /// ```
    /// use retry_runtime::Hedge;
    /// use retry_runtime::tower::RetryLayer;
    /// use std::time::Duration;
    ///
    /// let layer = RetryLayer::new("catalog").hedge(Hedge::percentile(950, Duration::from_millis(20))?);
    /// # Ok::<(), retry_runtime::HedgeError>(())
    /// ```
    pub fn hedge(self, hedge: Hedge) -> Self {
        RetryLayer {
            hedge: Some(hedged::BuiltHedge::new(hedge)),
            ..self
        }
    }
}

impl<S, F: Clone> Layer<S> for RetryLayer<F> {
    type Service = RetryService<S, F>;

    fn layer(&self, inner: S) -> RetryService<S, F> {
        let site = self.site.get();
        let hedge = self.hedge.as_ref().map(|h| h.get(site.policy.attempts()));
        RetryService::new(inner, site, hedge, self.fallback.clone())
    }
}
