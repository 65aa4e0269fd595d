//! The hedged path of [`RetryService`](super::RetryService), for a layer built with
//! [`RetryLayer::hedge`](super::RetryLayer::hedge): a safe request runs on the same
//! [`Hedged`] engine as `#[retry(read, hedge = "...")]`, each attempt on its own clone of the
//! inner service (driven to readiness first). Requests that are not safe never get here.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::OnceLock;

use http::{Request, Response};
use tower_service::Service;

use super::replay::{ReplayableBody, transient_response};
use crate::BoxError;
use crate::attempt;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::hedge::{Hedge, HedgeSite, Hedged, HedgedNext};
use crate::http::StatusError;
use crate::request_loop::{Ended, FallBack};
use crate::site::Site;

/// A layer's hedge setting, and its call site once made (leaked once per layer value, like the
/// layer's [`Site`]).
#[derive(Clone, Debug)]
pub(crate) struct BuiltHedge {
    hedge: Hedge,
    site: OnceLock<&'static HedgeSite>,
}

impl BuiltHedge {
    pub(crate) fn new(hedge: Hedge) -> Self {
        BuiltHedge {
            hedge,
            site: OnceLock::new(),
        }
    }

    /// The same setting, made again (for another schedule).
    pub(crate) fn remade(self) -> Self {
        BuiltHedge::new(self.hedge)
    }

    /// The hedge site for `attempts` attempts, leaked on the first call for this value.
    pub(crate) fn get(&self, attempts: u32) -> &'static HedgeSite {
        self.site.get_or_init(|| self.hedge.leak(attempts))
    }
}

/// One safe request (its `parts` and `body`), hedged; with a `fallback`, a give-up that falls
/// back ends as [`Ended::FellBack`], by the same rule as the plain loop's. The parts are
/// borrowed, each attempt sending a copy: the caller keeps them for its fallback.
pub(super) async fn call<S, B, ResB>(
    inner: S,
    site: &'static Site,
    hedge: &'static HedgeSite,
    parts: &http::request::Parts,
    body: B,
    fallback: Option<FallBack>,
) -> Ended<Response<ResB>, BoxError>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: ReplayableBody + Send + 'static,
    ResB: Send + 'static,
{
    let mut make = move || {
        let mut inner = inner.clone();
        let request = Request::from_parts(parts.clone(), body.clone());
        attempt::attempt(async move {
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(Into::into)?;
            inner.call(request).await.map_err(Into::into)
        })
    };
    let mut call = pin!(Hedged::new(site, hedge));
    loop {
        let (out, inner_gave_up, attempt) = call.as_mut().next(&mut make).await;
        let (next, failed) = match out {
            Ok(response) => {
                let Some(hint) = transient_response(&response) else {
                    call.as_mut().succeeded(attempt);
                    return Ended::Returned(Ok(response));
                };
                let status = StatusError {
                    status: response.status().as_u16(),
                    retry_after: hint,
                };
                let (verdict, text) = (Verdict::of(&status), ErrorText::Display(&status));
                let failed = (attempt, verdict, inner_gave_up, text);
                let next = judge(call.as_mut(), failed, fallback);
                (next, Ok(response))
            }
            Err(error) => {
                let (verdict, text) = (Verdict::of(&error), ErrorText::Display(&error));
                let failed = (attempt, verdict, inner_gave_up, text);
                let next = judge(call.as_mut(), failed, fallback);
                (next, Err(error))
            }
        };
        match next {
            HedgedNext::Wait => continue,
            HedgedNext::Return => return Ended::Returned(failed),
            HedgedNext::FallBack(reason) => return Ended::FellBack(reason),
        }
    }
}

/// The engine's judgement of a failed attempt (its number, verdict, whether a loop inside gave
/// up, its text): with a `fallback`, the one `#[retry(read, hedge = …, fallback = …)]` gets.
fn judge<Fut, R>(
    call: Pin<&mut Hedged<Fut>>,
    (attempt, verdict, inner_gave_up, text): (u32, Verdict, bool, ErrorText<'_>),
    fallback: Option<FallBack>,
) -> HedgedNext
where
    Fut: Future<Output = (R, bool)>,
{
    let Some(on) = fallback else {
        return match call.after_failure(attempt, verdict, inner_gave_up, text) {
            true => HedgedNext::Wait,
            false => HedgedNext::Return,
        };
    };
    call.after_failure_or_fall_back(attempt, verdict, inner_gave_up, text, on.refused_only)
}
