//! The retry loop of one HTTP request, written once for the tower layer
//! (`tower/service.rs`) and the reqwest middleware (`reqwest_middleware.rs`): each says how to
//! send an attempt and how to read its outcome ([`Attempts`]); [`run`] drives the same
//! [`Retrier`] as `#[retry]`, asking the breaker before each attempt of a protected site.

use std::future::Future;

use crate::Rejected;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::http::StatusError;
use crate::key::IdempotencyKey;
use crate::retrier::Retrier;
use crate::site::Site;

/// What sending an attempt gave.
pub(crate) enum Sent<R, E> {
    /// The attempt's outcome, judged by the loop.
    Attempt(Result<R, E>),
    /// An outcome returned as it is, no attempt judged (the service could not take another
    /// request; the request could not be copied for another attempt).
    Last(Result<R, E>),
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

/// Sends `attempts` of a request retried under `site`'s rules: a read (`key` `None`) or a
/// keyed write. Returns the first answer (a response whose status is not transient), else the
/// last response or error once the rules stop the retries; a refusal of the breaker (protected
/// sites only, before each attempt) as [`Attempts::refused`].
pub(crate) async fn run<A: Attempts>(
    site: &'static Site,
    key: Option<&dyn IdempotencyKey>,
    attempts: &mut A,
) -> Result<A::Response, A::Error> {
    let mut retrier = Retrier::read_or_write(site, key);
    let mut first = true;
    loop {
        if site.protect {
            retrier.admit().map_err(A::refused)?;
        }
        let outcome = match attempts.send(first).await {
            Sent::Attempt(outcome) => outcome,
            Sent::Last(outcome) => return outcome,
        };
        first = false;
        let pause = match outcome {
            Ok(response) => match A::failed_status(&response) {
                None => {
                    retrier.succeeded();
                    return Ok(response);
                }
                Some(status) => {
                    let text = ErrorText::Display(&status);
                    match retrier.after_failure(Verdict::of(&status), false, text) {
                        Some(pause) => pause,
                        None => return Ok(response),
                    }
                }
            },
            Err(error) => match retrier.after_failure(A::verdict(&error), false, A::text(&error)) {
                Some(pause) => pause,
                None => return Err(error),
            },
        };
        tokio::time::sleep(pause).await;
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

    #[tokio::test(start_paused = true)]
    async fn a_transient_status_is_retried_and_the_answer_returned() {
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(200))]);
        assert_eq!(run(&SITE, None, &mut script).await, Ok(200));
        assert_eq!(script.firsts, [true, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_response_comes_back_as_it_came_when_attempts_run_out() {
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(503)), Attempt(Ok(503))]);
        assert_eq!(run(&SITE, None, &mut script).await, Ok(503));
        assert_eq!(script.firsts, [true, false, false], "3 attempts, no 4th");
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_is_retried_and_a_permanent_one_returned_at_once() {
        let mut script = Script::new([Attempt(Err("transient reset")), Attempt(Err("bad"))]);
        assert_eq!(run(&SITE, None, &mut script).await, Err("bad"));
        assert_eq!(script.firsts, [true, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_last_outcome_ends_the_loop_as_it_is() {
        let mut script = Script::new([Attempt(Ok(503)), Last(Err("transient, not ready"))]);
        assert_eq!(
            run(&SITE, None, &mut script).await,
            Err("transient, not ready")
        );
        assert_eq!(script.firsts, [true, false], "not judged, not retried");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_with_a_blank_key_gets_one_attempt() {
        let blank = String::from("  ");
        let mut script = Script::new([Attempt(Ok(503)), Attempt(Ok(200))]);
        let key: &dyn IdempotencyKey = &blank;
        assert_eq!(run(&SITE, Some(key), &mut script).await, Ok(503));
        assert_eq!(
            script.firsts,
            [true],
            "R-RES-RE-1: no retry without a real key"
        );
    }
}
