//! The retry loop of one HTTP request, written once for the tower layer
//! (`tower/service.rs`) and the reqwest middleware (`reqwest_middleware.rs`): each says how to
//! send an attempt and how to read its outcome ([`Attempts`]); [`run`] drives the same
//! [`Retrier`] as `#[retry]`, asking the breaker before each attempt of a protected site. With a
//! fallback ([`FallBack`], safe requests only), a give-up or a refusal ends as
//! [`Ended::FellBack`], judged by the same functions as `#[retry(read, …, fallback = …)]`.

use std::future::Future;

use crate::Rejected;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::give_up::GiveUp;
use crate::http::StatusError;
use crate::key::IdempotencyKey;
use crate::protect::Permit;
use crate::retrier::Retrier;
use crate::retrier::admission::enter_waiting;
use crate::retrier::fallback::{FallNext, refused_fell_back};
use crate::site::Site;

/// What sending an attempt gave.
pub(crate) enum Sent<R, E> {
    /// The attempt's outcome, judged by the loop.
    Attempt(Result<R, E>),
    /// An outcome returned as it is, no attempt judged (the service could not take another
    /// request; the request could not be copied for another attempt).
    Last(Result<R, E>),
}

/// A request that has a fallback: when it answers (`fallback_on = "refused"` of the attribute).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FallBack {
    /// Only on a refusal of the budget, the breaker or the bulkhead; else also after the
    /// attempts give up on a transient failure.
    pub(crate) refused_only: bool,
}

/// How a request's loop ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended<R, E> {
    /// The last response or error, returned as it is.
    Returned(Result<R, E>),
    /// Answer from the fallback, for this reason (recorded already).
    FellBack(GiveUp),
}

/// A refusal of the system's bulkhead or breaker, before the loop or before a call made once.
pub(crate) enum Refused {
    /// Returned as the integration's error (counted `bulkhead_full` / `breaker_open`).
    Rejected(Rejected),
    /// A request with a fallback answers from it (counted as a fallback).
    FellBack(GiveUp),
}

impl Refused {
    /// The refusal as the end of the request: `error` makes the integration's error of a
    /// rejection.
    pub(crate) fn ended<R, E>(self, error: impl FnOnce(Rejected) -> E) -> Ended<R, E> {
        match self {
            Refused::Rejected(rejected) => Ended::Returned(Err(error(rejected))),
            Refused::FellBack(reason) => Ended::FellBack(reason),
        }
    }
}

/// One request's attempts, as an integration sends and reads them.
pub(crate) trait Attempts: Send {
    /// A response: a success, or a failure by its status.
    type Response: Send;
    /// An error of an attempt.
    type Error: Send;

    /// Sends the next attempt; `first` for the first one of the request.
    fn send(
        &mut self,
        first: bool,
    ) -> impl Future<Output = Sent<Self::Response, Self::Error>> + Send;

    /// The response's status as a failure, when it is a transient one (with its
    /// `Retry-After`); `None` for a response that answers the request.
    fn failed_status(response: &Self::Response) -> Option<StatusError>;

    /// What the error says: transient or not, its hint.
    fn verdict(error: &Self::Error) -> Verdict;

    /// The error as the events show it.
    fn text(error: &Self::Error) -> ErrorText<'_>;

    /// A refusal of the breaker as the integration's error.
    fn refused(rejected: Rejected) -> Self::Error;
}

/// The bulkhead permit of a protected site's request, held from its first attempt to its last
/// (`None` for an unprotected site, which asks nothing); a refusal with a `fallback` falls back.
pub(crate) async fn enter(
    site: &'static Site,
    fallback: Option<FallBack>,
) -> Result<Option<Permit>, Refused> {
    if !site.protect {
        return Ok(None);
    }
    match enter_waiting(site, fallback.is_some()).await {
        Ok(permit) => Ok(Some(permit)),
        Err(rejected) if fallback.is_some() => Err(Refused::FellBack(refused_fell_back(
            site, None, 0, rejected,
        ))),
        Err(rejected) => Err(Refused::Rejected(rejected)),
    }
}

/// The breaker's admission of a protected site's request made once (sent once, or hedged): the
/// tower layer's (the middleware admits its requests sent once itself, never with a fallback).
#[cfg(feature = "tower")]
pub(crate) fn admit_once(site: &'static Site, fallback: Option<FallBack>) -> Result<(), Refused> {
    if !site.protect {
        return Ok(());
    }
    match fallback {
        None => site.admit().map_err(Refused::Rejected),
        Some(_) => site
            .admit_uncounted()
            .map_err(|rejected| Refused::FellBack(refused_fell_back(site, None, 0, rejected))),
    }
}

/// Sends `attempts` of a request retried under `site`'s rules: a read (`key` `None`) or a
/// keyed write. Returns the first answer (a response whose status is not transient), else the
/// last response or error once the rules stop the retries; a refusal of the breaker (protected
/// sites only, before each attempt) as [`Attempts::refused`]. With a `fallback`, a give-up or a
/// refusal that falls back ends as [`Ended::FellBack`] instead; a permanent error never does.
pub(crate) async fn run<A: Attempts>(
    site: &'static Site,
    key: Option<&dyn IdempotencyKey>,
    attempts: &mut A,
    fallback: Option<FallBack>,
) -> Ended<A::Response, A::Error> {
    let mut retrier = Retrier::read_or_write(site, key);
    let mut first = true;
    loop {
        if site.protect {
            if let Err(refused) = admit::<A>(&retrier, fallback) {
                return refused;
            }
        }
        let outcome = match attempts.send(first).await {
            Sent::Attempt(outcome) => outcome,
            Sent::Last(outcome) => return Ended::Returned(outcome),
        };
        first = false;
        // The failed outcome ends with this block, before the pause.
        let pause = {
            let (next, failed) = match outcome {
                Ok(response) => match A::failed_status(&response) {
                    None => {
                        retrier.succeeded();
                        return Ended::Returned(Ok(response));
                    }
                    Some(status) => {
                        let text = ErrorText::Display(&status);
                        let next = judge(&mut retrier, Verdict::of(&status), text, fallback);
                        (next, Ok(response))
                    }
                },
                Err(error) => {
                    let next = judge(&mut retrier, A::verdict(&error), A::text(&error), fallback);
                    (next, Err(error))
                }
            };
            match next {
                FallNext::Pause(pause) => pause,
                FallNext::Return => return Ended::Returned(failed),
                FallNext::FallBack(reason) => return Ended::FellBack(reason),
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// The breaker's admission of the next attempt: a refusal returned as the integration's error
/// (counted), or fallen back (counted as a fallback).
fn admit<A: Attempts>(
    retrier: &Retrier<Option<&dyn IdempotencyKey>>,
    fallback: Option<FallBack>,
) -> Result<(), Ended<A::Response, A::Error>> {
    match fallback {
        None => retrier
            .admit()
            .map_err(|rejected| Ended::Returned(Err(A::refused(rejected)))),
        Some(_) => retrier
            .admit_or_fall_back()
            .map_err(|rejected| Ended::FellBack(retrier.fell_back_refused(rejected))),
    }
}

/// What becomes of a failed attempt: the retrier's judgement, with or without a fallback.
fn judge(
    retrier: &mut Retrier<Option<&dyn IdempotencyKey>>,
    verdict: Verdict,
    text: ErrorText<'_>,
    fallback: Option<FallBack>,
) -> FallNext {
    match fallback {
        None => retrier
            .after_failure(verdict, false, text)
            .map_or(FallNext::Return, FallNext::Pause),
        Some(on) => retrier.after_failure_or_fall_back(verdict, false, text, on.refused_only),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::Sent::{Attempt, Last};
    use super::*;
    use crate::Jitter;
    use crate::site::site;

    /// Attempts that answer from a script: a status (503 is transient), or an error
    /// (transient when its text says so); records each send's `first`.
    struct Script {
        outcomes: VecDeque<Sent<u16, &'static str>>,
        firsts: Vec<bool>,
    }

    impl Script {
        fn new(outcomes: impl IntoIterator<Item = Sent<u16, &'static str>>) -> Script {
            Script {
                outcomes: outcomes.into_iter().collect(),
                firsts: Vec::new(),
            }
        }
    }

    impl Attempts for Script {
        type Response = u16;
        type Error = &'static str;

        async fn send(&mut self, first: bool) -> Sent<u16, &'static str> {
            self.firsts.push(first);
            self.outcomes
                .pop_front()
                .unwrap_or(Last(Err("the script ran out")))
        }

        fn failed_status(response: &u16) -> Option<StatusError> {
            (*response == 503).then_some(StatusError {
                status: 503,
                retry_after: None,
            })
        }

        fn verdict(error: &&'static str) -> Verdict {
            Verdict {
                transient: error.starts_with("transient"),
                retry_after: None,
                rejection: false,
            }
        }

        fn text<'e>(error: &'e &'static str) -> ErrorText<'e> {
            ErrorText::Display(error)
        }

        fn refused(_: Rejected) -> &'static str {
            "refused"
        }
    }

    static SITE: Site = site("request-loop-unit", "op", 3, 1, 4, Jitter::None, false);

    /// The outcome of a loop that had no fallback.
    fn returned<R, E>(ended: Ended<R, E>) -> Result<R, E> {
        match ended {
            Ended::Returned(outcome) => outcome,
            Ended::FellBack(reason) => panic!("no fallback was set, yet fell back: {reason:?}"),
        }
    }

    const ANY: Option<FallBack> = Some(FallBack {
        refused_only: false,
    });

    #[tokio::test(start_paused = true)]
    async fn with_a_fallback_a_transient_give_up_falls_back_and_a_permanent_error_does_not() {
        let mut script = Script::new([
            Attempt(Ok(503)),
            Attempt(Err("transient")),
            Attempt(Ok(503)),
        ]);
        let ended = run(&SITE, None, &mut script, ANY).await;
        assert_eq!(ended, Ended::FellBack(GiveUp::Attempts));
        assert_eq!(script.firsts, [true, false, false]);
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Err("bad"))]);
        let ended = run(&SITE, None, &mut script, ANY).await;
        assert_eq!(
            ended,
            Ended::Returned(Err("bad")),
            "a permanent error as it is"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_fallback_on_refusals_only_returns_an_exhausted_transient_failure() {
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(503)), Attempt(Ok(503))]);
        let refused_only = Some(FallBack { refused_only: true });
        let ended = run(&SITE, None, &mut script, refused_only).await;
        assert_eq!(ended, Ended::Returned(Ok(503)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_status_is_retried_and_the_answer_returned() {
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(200))]);
        assert_eq!(returned(run(&SITE, None, &mut script, None).await), Ok(200));
        assert_eq!(script.firsts, [true, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_response_comes_back_as_it_came_when_attempts_run_out() {
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(503)), Attempt(Ok(503))]);
        assert_eq!(returned(run(&SITE, None, &mut script, None).await), Ok(503));
        assert_eq!(script.firsts, [true, false, false], "3 attempts, no 4th");
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_is_retried_and_a_permanent_one_returned_at_once() {
        let mut script = Script::new([Attempt(Err("transient reset")), Attempt(Err("bad"))]);
        assert_eq!(
            returned(run(&SITE, None, &mut script, None).await),
            Err("bad")
        );
        assert_eq!(script.firsts, [true, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_last_outcome_ends_the_loop_as_it_is() {
        let mut script = Script::new([Attempt(Ok(503)), Last(Err("transient, not ready"))]);
        assert_eq!(
            returned(run(&SITE, None, &mut script, None).await),
            Err("transient, not ready")
        );
        assert_eq!(script.firsts, [true, false], "not judged, not retried");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_with_a_blank_key_gets_one_attempt() {
        let blank = String::from("  ");
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(200))]);
        let key: &dyn IdempotencyKey = &blank;
        assert_eq!(
            returned(run(&SITE, Some(key), &mut script, None).await),
            Ok(503)
        );
        assert_eq!(
            script.firsts,
            [true],
            "R-RES-RE-1: no retry without a real key"
        );
    }
}
