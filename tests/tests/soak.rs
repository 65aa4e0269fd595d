//! Fault-injection soak: thousands of `#[retry]` calls over loopback against the payment gateway
//! fixture (`retry_tests::gateway`), many at once, across the whole fault matrix — 503 with
//! `Retry-After`, 500, responses slower than the client's timeout, connection resets, "charged,
//! but the response was lost", 4xx, and an open circuit breaker — with a sample of the calls
//! cancelled mid-attempt or mid-pause.
//!
//! # Size
//!
//! `cargo test -p retry-tests --test soak` runs the reduced soak (about 2 000 calls, the size CI
//! runs: about 4 s in a debug build on 2 cores). `RETRY_SOAK_FULL=1 cargo test -p retry-tests
//! --test soak -- --nocapture` runs the full one (about 20 000 calls, at least 10 000 asserted;
//! about 25 s). Both print their figures with `--nocapture`. Every loop is bounded in count, and the whole soak runs under a
//! `tokio::time::timeout` that fails the test instead of hanging.
//!
//! # What is asserted
//!
//! From the gateway's records:
//! - no order is charged twice (every write is keyed), and a write that returned a payment was
//!   charged exactly once, with that payment;
//! - no 4xx is retried: no request for an order already refused with a 4xx, and exactly one
//!   `404` / `400` / `422` per call that was meant to get one;
//! - no (order, kind) received more requests than its call started attempts, nor more than the
//!   attribute's `attempts`.
//!
//! From the client's own per-call records (each attempt logs its start and its result):
//! - attempts per call never above the attribute's cap;
//! - only a transient failure is followed by another attempt: none after a 4xx, a breaker
//!   rejection, any other permanent error, a success, or a Retry-After hint above `max_delay`;
//! - a Retry-After hint at or below `max_delay` is honoured: the next attempt starts at least
//!   that long after the hinted failure.
//!
//! Cancellation (R-RES-RE-2), for every cancelled call — dropped while an attempt was in flight
//! or while the loop was pausing, as recorded at the moment of the drop:
//! - no attempt starts after the drop (the client's record is unchanged at the end of the soak);
//! - the gateway received at most as many requests for that call as attempts had started before
//!   the drop (timing-free: nothing was sent after it);
//! - the gateway recorded no request for that call later than [`GRACE`] after the drop. A
//!   request written to the socket before the drop can still be read and recorded after it;
//!   [`GRACE`] covers that, while a loop that kept running would send its next attempt after a
//!   pause of at least `delay`, usually much later. The soak waits at least [`QUIET`] (longer than
//!   any pause plus an attempt) after the last cancellation before it reads the records.
//!
//! And the loop's own `retry_attempts_total` counter adds up to the attempts that got a
//! verdict (every attempt started, less those dropped by a cancellation).
//!
//! The soak's systems get `Budget::unlimited()`: the soak is about what every retry does, and
//! the default budget (20 % of calls) would refuse about a third of the retries this fault mix
//! asks for (`tests/tests/budget.rs` tests budgets).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};
use retry_runtime::{Budget, Classify, retry};
use retry_tests::adapter::{Order, PaymentError, decode};
use retry_tests::gateway::{
    ChargeRequest, Fault, FaultPlan, Gateway, IDEMPOTENCY_KEY, Kind, Outcome, Payment,
};
use retry_tests::ms;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// reqwest gives up on a response after this long. Generous: a request answered in time but
/// read too late (a loaded machine) would be retried, and for a 4xx that is a retried 4xx.
const CLIENT_TIMEOUT: Duration = ms(500);
/// A `Fault::Slow` response takes this long: past `CLIENT_TIMEOUT` and the reads' `timeout`.
const SLOW: Duration = ms(1_000);
/// Calls in flight at once.
const CONCURRENCY: usize = 96;
/// How late after a cancellation the gateway may still record a request of that call (one
/// written to the socket before the drop).
const GRACE: Duration = ms(500);
/// How long the soak stays quiet after its last cancellation before reading the records: longer
/// than any pause (1 s at most, `max_delay` of the reads) plus an attempt.
const QUIET: Duration = ms(1_500);

/// `register`: `attempts = 4, delay = "5ms", max_delay = "100ms"`.
const WRITE: Cap = Cap {
    attempts: 4,
    max_delay: ms(100),
};
/// `payment_status`: `attempts = 3, delay = "5ms", max_delay = "1s", timeout = "300ms"`.
const READ: Cap = Cap {
    attempts: 3,
    max_delay: ms(1_000),
};
/// `register_behind_breaker`: `attempts = 5, delay = "2ms", max_delay = "1s", jitter = "full"`.
const BREAKER: Cap = Cap {
    attempts: 5,
    max_delay: ms(1_000),
};

/// What an attribute allows, as the assertions need it.
#[derive(Clone, Copy, Debug)]
struct Cap {
    attempts: usize,
    max_delay: Duration,
}

/// The size of one run.
#[derive(Clone, Copy, Debug)]
struct Size {
    /// Jobs (one order each: a write, and for most a read of it).
    jobs: usize,
    /// The least number of calls the run must make.
    min_calls: usize,
    /// The whole soak fails past this.
    limit: Duration,
}

const REDUCED: Size = Size {
    jobs: 1_200,
    min_calls: 1_800,
    limit: Duration::from_secs(50),
};

const FULL: Size = Size {
    jobs: 12_000,
    min_calls: 10_000,
    limit: Duration::from_secs(600),
};

// ---------------------------------------------------------------------------------------------
// The adapter: a reqwest client with `#[retry]` methods, each attempt logged.

/// What one attempt ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Ok,
    /// A transient error, with its Retry-After hint.
    Transient(Option<Duration>),
    /// A 4xx (permanent).
    Client4xx(u16),
    /// The circuit breaker refused the call (permanent).
    Rejected,
    /// Any other permanent error.
    Permanent,
    /// The attempt was dropped before it ended: by the attribute's `timeout`, or by a
    /// cancellation of the whole call.
    Dropped,
}

fn class_of(error: &PaymentError) -> Class {
    match error {
        PaymentError::Status(e) if (400..500).contains(&e.status) => Class::Client4xx(e.status),
        e if e.is_transient() => Class::Transient(e.retry_after()),
        _ => Class::Permanent,
    }
}

fn class<T>(result: &Result<T, PaymentError>) -> Class {
    result.as_ref().err().map_or(Class::Ok, class_of)
}

fn breaker_class<T>(result: &Result<T, failsafe::Error<PaymentError>>) -> Class {
    match result {
        Ok(_) => Class::Ok,
        Err(failsafe::Error::Rejected) => Class::Rejected,
        Err(failsafe::Error::Inner(e)) => class_of(e),
    }
}

/// One attempt: when it started, and when and how it ended.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    started: Instant,
    ended: Option<(Instant, Class)>,
}

/// The attempts of one call, as the attempts themselves record them.
#[derive(Debug, Default)]
struct CallLog(Mutex<Vec<Attempt>>);

impl CallLog {
    /// Starts an attempt; the guard records how it ended, or that it was dropped.
    fn begin(&self) -> AttemptGuard<'_> {
        let mut attempts = self.0.lock().unwrap();
        attempts.push(Attempt {
            started: Instant::now(),
            ended: None,
        });
        AttemptGuard {
            log: self,
            index: attempts.len() - 1,
        }
    }

    fn attempts(&self) -> Vec<Attempt> {
        self.0.lock().unwrap().clone()
    }

    fn end(&self, index: usize, class: Class) {
        let mut attempts = self.0.lock().unwrap();
        let attempt = &mut attempts[index];
        if attempt.ended.is_none() {
            attempt.ended = Some((Instant::now(), class));
        }
    }
}

/// Marks its attempt `Dropped` unless [`finish`](AttemptGuard::finish) ran first.
struct AttemptGuard<'a> {
    log: &'a CallLog,
    index: usize,
}

impl AttemptGuard<'_> {
    fn finish(self, class: Class) {
        self.log.end(self.index, class);
    }
}

impl Drop for AttemptGuard<'_> {
    fn drop(&mut self) {
        self.log.end(self.index, Class::Dropped);
    }
}

/// The adapter under test.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(gateway: &Gateway) -> Self {
        Client {
            http: reqwest::Client::builder()
                .timeout(CLIENT_TIMEOUT)
                .no_proxy()
                .build()
                .unwrap(),
            base: gateway.url(),
        }
    }

    /// One keyed `POST /payments`.
    async fn post(&self, order: &Order) -> Result<Payment, PaymentError> {
        let body = ChargeRequest {
            order_id: order.id.clone(),
            amount: order.amount,
        };
        let request = self
            .http
            .post(format!("{}/payments", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_KEY, &order.idempotency_key)
            .body(serde_json::to_vec(&body).unwrap());
        decode(request.send().await).await
    }

    #[retry(
        write,
        idempotency_key = order.idempotency_key,
        attempts = 4,
        delay = "5ms",
        max_delay = "100ms",
        system = "soak-register"
    )]
    async fn register(&self, order: &Order, log: &CallLog) -> Result<Payment, PaymentError> {
        let attempt = log.begin();
        let result = self.post(order).await;
        attempt.finish(class(&result));
        result
    }

    #[retry(
        read,
        attempts = 3,
        delay = "5ms",
        max_delay = "1s",
        timeout = "300ms",
        system = "soak-status"
    )]
    async fn payment_status(
        &self,
        payment_id: &str,
        log: &CallLog,
    ) -> Result<Payment, PaymentError> {
        let attempt = log.begin();
        let url = format!("{}/payments/{payment_id}", self.base);
        let result = decode(self.http.get(url).send().await).await;
        attempt.finish(class(&result));
        result
    }
}

type Breaker = failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>,
    (),
>;

/// The keyed write behind a shared circuit breaker: its rejection is never retried
/// (R-RES-RE-X4).
#[retry(
    write,
    idempotency_key = order.idempotency_key,
    attempts = 5,
    delay = "2ms",
    max_delay = "1s",
    jitter = "full",
    system = "soak-breaker"
)]
async fn register_behind_breaker(
    breaker: &Breaker,
    client: &Client,
    order: &Order,
    log: &CallLog,
) -> Result<Payment, failsafe::Error<PaymentError>> {
    let attempt = log.begin();
    let result = failsafe::futures::CircuitBreaker::call(breaker, client.post(order)).await;
    attempt.finish(breaker_class(&result));
    result
}

// ---------------------------------------------------------------------------------------------
// The plan: jobs drawn from a seeded RNG.

/// One call of the soak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Op {
    /// `register` of a valid order.
    Register,
    /// `payment_status` of a registered payment.
    Status,
    /// `register_behind_breaker` of a valid order.
    Breaker,
    /// `register` of an order with amount 0: one `422`.
    Invalid,
    /// `register` of an order with an empty id: one `400`.
    BadRequest,
    /// `payment_status` of a payment that does not exist: one `404`.
    Missing,
}

impl Op {
    fn cap(self) -> Cap {
        match self {
            Op::Register | Op::Invalid | Op::BadRequest => WRITE,
            Op::Status | Op::Missing => READ,
            Op::Breaker => BREAKER,
        }
    }

    /// The kind of request its (order, kind) records hold.
    fn kind(self) -> Kind {
        match self {
            Op::Status | Op::Missing => Kind::Status,
            _ => Kind::Charge,
        }
    }
}

/// A call to cancel: after how long, with which fault forced on its first attempt.
#[derive(Clone, Copy, Debug)]
struct Cancel {
    after: Duration,
    force: Option<Fault>,
}

#[derive(Clone, Copy, Debug)]
enum Job {
    /// Register an order, then read its status; either call may be cancelled.
    Pay {
        register: Option<Cancel>,
        status: Option<Cancel>,
    },
    /// Register an order behind the breaker; one order in eight starts with two 500s.
    Breaker {
        burst: bool,
    },
    Invalid,
    BadRequest,
    Missing,
}

/// About 5 % of the calls of a `Pay` job are cancelled: after how long, with which fault first.
fn cancel(rng: &mut StdRng, write: bool) -> Option<Cancel> {
    if rng.random_range(0..20) != 0 {
        return None;
    }
    let forced: &[Option<Fault>] = if write {
        &[
            None,
            Some(Fault::Slow),
            Some(Fault::ServerError),
            Some(Fault::Reset),
            Some(Fault::Lost),
        ]
    } else {
        // A 1 s Retry-After: the read pauses for it, and is cancelled in the pause.
        &[
            None,
            Some(Fault::Slow),
            Some(Fault::Unavailable {
                retry_after_secs: 1,
            }),
        ]
    };
    Some(Cancel {
        after: ms(rng.random_range(1..=if write { 60 } else { 300 })),
        force: forced[rng.random_range(0..forced.len())],
    })
}

fn plan(jobs: usize, seed: u64) -> Vec<Job> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..jobs)
        .map(|_| match rng.random_range(0..100) {
            0..70 => Job::Pay {
                register: cancel(&mut rng, true),
                status: cancel(&mut rng, false),
            },
            70..85 => Job::Breaker {
                burst: rng.random_range(0..8) == 0,
            },
            85..91 => Job::Invalid,
            91..95 => Job::BadRequest,
            _ => Job::Missing,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Running the jobs.

/// How a call ended.
#[derive(Debug)]
enum End {
    /// It returned: the payment, or the error's class.
    Returned(Result<Payment, Class>),
    /// It was dropped at `at`, with `attempts` attempts started, the last one still running if
    /// `in_attempt` (else the loop was pausing).
    Cancelled {
        at: Instant,
        attempts: usize,
        in_attempt: bool,
    },
}

/// One call and what became of it.
#[derive(Debug)]
struct Call {
    op: Op,
    /// The order its requests are recorded against (empty for `BadRequest` and `Missing`, whose
    /// requests the gateway cannot attribute).
    order_id: String,
    log: CallLog,
    end: End,
}

/// Runs `call`, dropping it after `cancel.after` if it is still running then.
async fn run<F>(call: F, log: &CallLog, cancel: Option<Cancel>) -> End
where
    F: Future<Output = Result<Payment, Class>>,
{
    let mut call = Box::pin(call);
    let Some(cancel) = cancel else {
        return End::Returned(call.await);
    };
    let raced = tokio::select! {
        biased;
        returned = &mut call => Some(returned),
        () = tokio::time::sleep(cancel.after) => None,
    };
    match raced {
        Some(returned) => End::Returned(returned),
        None => {
            // The future is not being polled: its state is final until it is dropped.
            let attempts = log.attempts();
            let in_attempt = attempts.last().is_some_and(|a| a.ended.is_none());
            drop(call);
            End::Cancelled {
                at: Instant::now(),
                attempts: attempts.len(),
                in_attempt,
            }
        }
    }
}

struct Shared {
    gateway: Gateway,
    client: Client,
    breaker: Breaker,
}

async fn job(shared: Arc<Shared>, n: usize, job: Job) -> Vec<Call> {
    let Shared {
        gateway,
        client,
        breaker,
    } = &*shared;
    let mut calls = Vec::new();
    match job {
        Job::Pay { register, status } => {
            let order = Order::new(format!("soak-{n}"), 100 + n as u64);
            if let Some(fault) = register.and_then(|c| c.force) {
                gateway.force(&order.id, [Some(fault)]);
            }
            let log = CallLog::default();
            let end = run(
                async {
                    client
                        .register(&order, &log)
                        .await
                        .map_err(|e| class_of(&e))
                },
                &log,
                register,
            )
            .await;
            let payment = match &end {
                End::Returned(Ok(payment)) => Some(payment.clone()),
                _ => None,
            };
            calls.push(Call {
                op: Op::Register,
                order_id: order.id.clone(),
                log,
                end,
            });
            if let Some(payment) = payment {
                if let Some(fault) = status.and_then(|c| c.force) {
                    gateway.force(&order.id, [Some(fault)]);
                }
                let log = CallLog::default();
                let end = run(
                    async {
                        client
                            .payment_status(&payment.payment_id, &log)
                            .await
                            .map_err(|e| class_of(&e))
                    },
                    &log,
                    status,
                )
                .await;
                calls.push(Call {
                    op: Op::Status,
                    order_id: order.id,
                    log,
                    end,
                });
            }
        }
        Job::Breaker { burst } => {
            let order = Order::new(format!("soak-{n}"), 100 + n as u64);
            if burst {
                gateway.force(&order.id, [Some(Fault::ServerError); 2]);
            }
            let log = CallLog::default();
            let end = run(
                async {
                    register_behind_breaker(breaker, client, &order, &log)
                        .await
                        .map_err(|e| match e {
                            failsafe::Error::Rejected => Class::Rejected,
                            failsafe::Error::Inner(e) => class_of(&e),
                        })
                },
                &log,
                None,
            )
            .await;
            calls.push(Call {
                op: Op::Breaker,
                order_id: order.id,
                log,
                end,
            });
        }
        Job::Invalid | Job::BadRequest => {
            let (op, id, amount) = match job {
                Job::Invalid => (Op::Invalid, format!("soak-{n}"), 0),
                _ => (Op::BadRequest, String::new(), 100),
            };
            let order = Order::new(id, amount);
            let log = CallLog::default();
            let end = run(
                async {
                    client
                        .register(&order, &log)
                        .await
                        .map_err(|e| class_of(&e))
                },
                &log,
                None,
            )
            .await;
            calls.push(Call {
                op,
                order_id: order.id,
                log,
                end,
            });
        }
        Job::Missing => {
            let log = CallLog::default();
            let end = run(
                async {
                    client
                        .payment_status(&format!("missing-{n}"), &log)
                        .await
                        .map_err(|e| class_of(&e))
                },
                &log,
                None,
            )
            .await;
            calls.push(Call {
                op: Op::Missing,
                order_id: String::new(),
                log,
                end,
            });
        }
    }
    calls
}

/// Runs every job, `CONCURRENCY` at a time; the calls in the order they ended.
async fn run_jobs(shared: &Arc<Shared>, jobs: &[Job]) -> Vec<Call> {
    let mut running = JoinSet::new();
    let mut calls = Vec::new();
    let mut next = jobs.iter().copied().enumerate();
    loop {
        while running.len() < CONCURRENCY {
            let Some((n, job)) = next.next() else { break };
            running.spawn(self::job(Arc::clone(shared), n, job));
        }
        match running.join_next().await {
            Some(done) => calls.extend(done.expect("a job panicked")),
            None => return calls,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// The figures of one run, printed at the end.
#[derive(Debug, Default)]
struct Figures {
    calls: BTreeMap<Op, u64>,
    attempts: u64,
    calls_retried: u64,
    succeeded: u64,
    failed: u64,
    hints_honoured: u64,
    hints_above_max_delay: u64,
    attempts_after_hint_above_max_delay: u64,
    client_4xx: u64,
    attempts_after_4xx: u64,
    rejections: u64,
    attempts_after_rejection: u64,
    attempts_after_permanent: u64,
    max_attempts_seen: BTreeMap<Op, usize>,
    cancelled_in_attempt: u64,
    cancelled_in_pause: u64,
    max_late_request: Duration,
    /// Attempts that ended with a verdict of the loop: all but those cut short by a
    /// cancellation.
    attempts_with_a_verdict: u64,
    /// Verdicts "retry": every attempt followed by a pause (cancelled or not).
    retry_verdicts: u64,
}

/// Checks one call that returned; adds it to the figures.
fn check_returned(call: &Call, returned: &Result<Payment, Class>, figures: &mut Figures) {
    let attempts = call.log.attempts();
    let cap = call.op.cap();
    let what = format!("{:?} {:?}", call.op, call.order_id);
    assert!(
        (1..=cap.attempts).contains(&attempts.len()),
        "{what}: {} attempts, cap {}: {attempts:?}",
        attempts.len(),
        cap.attempts
    );
    let ends: Vec<(Instant, Class)> = attempts
        .iter()
        .map(|a| {
            a.ended
                .unwrap_or_else(|| panic!("{what}: unended attempt {attempts:?}"))
        })
        .collect();
    // Every attempt but the last was followed by another: only a transient failure may be.
    for (i, (at, class)) in ends.iter().enumerate() {
        let followed = i + 1 < ends.len();
        match *class {
            Class::Transient(Some(hint)) if hint > cap.max_delay => {
                figures.hints_above_max_delay += 1;
                figures.attempts_after_hint_above_max_delay += u64::from(followed);
            }
            Class::Transient(hint) => {
                if let (Some(hint), true) = (hint, followed) {
                    let pause = attempts[i + 1].started - *at;
                    assert!(pause >= hint, "{what}: paused {pause:?} < hint {hint:?}");
                    figures.hints_honoured += u64::from(!hint.is_zero());
                }
            }
            // Only the reads' per-attempt `timeout` drops an attempt of a call that returns.
            Class::Dropped => assert_eq!(call.op.kind(), Kind::Status, "{what}: {attempts:?}"),
            Class::Client4xx(_) => {
                figures.client_4xx += 1;
                figures.attempts_after_4xx += u64::from(followed);
            }
            Class::Rejected => {
                figures.rejections += 1;
                figures.attempts_after_rejection += u64::from(followed);
            }
            Class::Permanent => figures.attempts_after_permanent += u64::from(followed),
            Class::Ok => assert!(!followed, "{what}: an attempt after a success"),
        }
    }
    let (_, last) = ends[ends.len() - 1];
    match returned {
        Ok(_) => {
            assert_eq!(last, Class::Ok, "{what}");
            figures.succeeded += 1;
        }
        Err(class) => {
            // A dropped attempt returns `AttemptTimedOut`, a transient error without a hint.
            let expected = if last == Class::Dropped {
                Class::Transient(None)
            } else {
                last
            };
            assert_eq!(*class, expected, "{what}: {attempts:?}");
            figures.failed += 1;
        }
    }
    figures.calls_retried += u64::from(attempts.len() > 1);
    figures.attempts_with_a_verdict += attempts.len() as u64;
    figures.retry_verdicts += attempts.len() as u64 - 1;
}

/// Checks everything once the jobs are done and the gateway quiet.
fn check(gateway: &Gateway, calls: &[Call], counters: &Counters) -> Figures {
    let mut figures = Figures::default();
    let mut expected_4xx: BTreeMap<Outcome, u64> = BTreeMap::new();
    for call in calls {
        *figures.calls.entry(call.op).or_default() += 1;
        let attempts = call.log.attempts();
        figures.attempts += attempts.len() as u64;
        let seen = figures.max_attempts_seen.entry(call.op).or_default();
        *seen = (*seen).max(attempts.len());
        match call.op {
            Op::Invalid => *expected_4xx.entry(Outcome::Invalid).or_default() += 1,
            Op::BadRequest => *expected_4xx.entry(Outcome::BadRequest).or_default() += 1,
            Op::Missing => *expected_4xx.entry(Outcome::NotFound).or_default() += 1,
            _ => {}
        }

        match &call.end {
            End::Returned(returned) => check_returned(call, returned, &mut figures),
            End::Cancelled {
                at,
                attempts: at_cancel,
                in_attempt,
            } => {
                let what = format!("cancelled {:?} {:?}", call.op, call.order_id);
                assert_eq!(
                    attempts.len(),
                    *at_cancel,
                    "{what}: an attempt started after the drop"
                );
                assert!(*at_cancel <= call.op.cap().attempts, "{what}");
                // Every attempt before the last was followed by a pause; the last one too when
                // the call was dropped in the pause after it.
                if *in_attempt {
                    figures.cancelled_in_attempt += 1;
                    figures.attempts_with_a_verdict += *at_cancel as u64 - 1;
                    figures.retry_verdicts += *at_cancel as u64 - 1;
                } else {
                    figures.cancelled_in_pause += 1;
                    figures.attempts_with_a_verdict += *at_cancel as u64;
                    figures.retry_verdicts += *at_cancel as u64;
                }
                let requests: Vec<_> = gateway
                    .requests(&call.order_id)
                    .into_iter()
                    .filter(|r| r.kind == call.op.kind())
                    .collect();
                assert!(
                    requests.len() <= *at_cancel,
                    "{what}: {} requests for {at_cancel} attempts started: {requests:?}",
                    requests.len()
                );
                for request in &requests {
                    let late = request.at.saturating_duration_since(*at);
                    figures.max_late_request = figures.max_late_request.max(late);
                    assert!(
                        late <= GRACE,
                        "{what}: a request {late:?} after the cancellation: {request:?}"
                    );
                }
            }
        }

        // The gateway's side of the cap: no more requests than attempts started.
        if !call.order_id.is_empty() {
            let requests = gateway.requests(&call.order_id);
            let of_kind = requests.iter().filter(|r| r.kind == call.op.kind()).count();
            assert!(
                of_kind <= attempts.len(),
                "{:?} {}: {of_kind} requests, {} attempts",
                call.op,
                call.order_id,
                attempts.len()
            );
            if call.op.kind() == Kind::Charge {
                let order = Order::new(call.order_id.clone(), 0);
                assert!(
                    requests
                        .iter()
                        .filter(|r| r.kind == Kind::Charge)
                        .all(|r| r.key.as_deref() == Some(order.idempotency_key.as_str())),
                    "{}: a request without the order's key",
                    call.order_id
                );
            }
        }

        // Zero duplicate effects: at most one charge per order, the one returned if any.
        if matches!(call.op, Op::Register | Op::Breaker) {
            let charges = gateway.charges(&call.order_id);
            match &call.end {
                End::Returned(Ok(payment)) => {
                    assert_eq!(charges, std::slice::from_ref(payment), "{}", call.order_id);
                }
                _ => assert!(charges.len() <= 1, "{}: {charges:?}", call.order_id),
            }
        }
    }

    let stats = gateway.stats();
    assert_eq!(stats.duplicate_charges, 0, "{stats:?}");
    assert_eq!(stats.retried_4xx, 0, "{stats:?}");
    for (outcome, calls) in &expected_4xx {
        assert_eq!(
            stats.outcomes.get(outcome).copied().unwrap_or(0),
            *calls,
            "{outcome:?}: one per call"
        );
    }
    assert_eq!(figures.attempts_after_4xx, 0);
    assert_eq!(figures.attempts_after_rejection, 0);
    assert_eq!(figures.attempts_after_permanent, 0);
    assert_eq!(figures.attempts_after_hint_above_max_delay, 0);

    // The loop's own counter: one verdict per attempt that was not cut short by a cancellation,
    // and "retry" for each attempt followed by a pause.
    let counted: u64 = counters.values().flat_map(|c| c.values()).sum();
    assert_eq!(counted, figures.attempts_with_a_verdict, "{counters:?}");
    let retries: u64 = counters.values().filter_map(|c| c.get("retry")).sum();
    assert_eq!(retries, figures.retry_verdicts, "{counters:?}");
    figures
}

/// `retry_attempts_total` by system, then outcome.
type Counters = BTreeMap<String, BTreeMap<String, u64>>;

/// The counters since the last snapshot (a snapshot resets them).
fn counters(snapshotter: &Snapshotter) -> Counters {
    let mut counters = Counters::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if key.key().name() != "retry_attempts_total" {
            continue;
        }
        let labels: HashMap<_, _> = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        if let DebugValue::Counter(n) = value {
            *counters
                .entry(labels["system"].clone())
                .or_default()
                .entry(labels["outcome"].clone())
                .or_default() += n;
        }
    }
    counters
}

/// The recorder of this test binary, installed before the first call.
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    })
}

async fn soak(size: Size) {
    let snapshotter = snapshotter();
    // Reset: only this run's calls count.
    counters(snapshotter);
    for system in ["soak-register", "soak-status", "soak-breaker"] {
        retry_runtime::system(system).set_budget(Budget::unlimited());
    }
    let plan_faults = FaultPlan {
        unavailable: 0.06,
        server_error: 0.05,
        slow: 0.03,
        reset: 0.05,
        lost: 0.05,
        // `Retry-After: 0` or `1`: a 1 s hint is above the writes' `max_delay` (they give up)
        // and within the reads' (they pause a second).
        max_retry_after_secs: 1,
        slow_delay: SLOW,
    };
    let gateway = Gateway::start(2024, plan_faults).await.unwrap();
    let client = Client::new(&gateway);
    let breaker = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            2,
            failsafe::backoff::constant(ms(25)),
        ))
        .build();
    let shared = Arc::new(Shared {
        gateway,
        client,
        breaker,
    });
    let jobs = plan(size.jobs, 7);

    let started = Instant::now();
    let calls = run_jobs(&shared, &jobs).await;
    let ran = started.elapsed();
    // Quiet time after the last cancellation, so that a loop still running would be seen.
    let last_cancel = calls
        .iter()
        .filter_map(|c| match c.end {
            End::Cancelled { at, .. } => Some(at),
            _ => None,
        })
        .max();
    if let Some(last) = last_cancel {
        tokio::time::sleep_until(last + QUIET).await;
    }

    let Shared { gateway, .. } = &*shared;
    let counters = counters(snapshotter);
    let figures = check(gateway, &calls, &counters);
    let stats = gateway.stats();
    let total: u64 = figures.calls.values().sum();
    println!(
        "soak: {total} calls in {ran:.2?} ({} jobs, {CONCURRENCY} in flight)",
        size.jobs
    );
    println!("calls by op: {:?}", figures.calls);
    println!(
        "attempts: {} (calls retried: {}; returned ok: {}, err: {})",
        figures.attempts, figures.calls_retried, figures.succeeded, figures.failed
    );
    println!("max attempts seen by op: {:?}", figures.max_attempts_seen);
    println!(
        "gateway: {} requests, {} charges, {} duplicate charges, {} retried 4xx; outcomes {:?}",
        stats.requests, stats.charges, stats.duplicate_charges, stats.retried_4xx, stats.outcomes
    );
    println!(
        "4xx answers: {}, attempts after them: {}; breaker rejections: {}, attempts after them: {}",
        figures.client_4xx,
        figures.attempts_after_4xx,
        figures.rejections,
        figures.attempts_after_rejection
    );
    println!(
        "Retry-After honoured (> 0): {}; above max_delay: {}, attempts after them: {}",
        figures.hints_honoured,
        figures.hints_above_max_delay,
        figures.attempts_after_hint_above_max_delay
    );
    println!(
        "cancelled: {} mid-attempt, {} mid-pause; latest request after a cancellation: {:?} \
         (grace {GRACE:?})",
        figures.cancelled_in_attempt, figures.cancelled_in_pause, figures.max_late_request
    );
    println!("retry_attempts_total: {counters:?}");

    assert!(
        total as usize >= size.min_calls,
        "only {total} calls (want {})",
        size.min_calls
    );
    // The fault matrix was exercised.
    for outcome in [
        Outcome::Unavailable,
        Outcome::ServerError,
        Outcome::Slow,
        Outcome::Reset,
        Outcome::Lost,
        Outcome::Replayed,
        Outcome::Invalid,
        Outcome::BadRequest,
        Outcome::NotFound,
    ] {
        assert!(
            stats.outcomes.get(&outcome).copied().unwrap_or(0) > 0,
            "no {outcome:?}: {stats:?}"
        );
    }
    assert!(figures.rejections > 0, "the breaker never opened");
    assert!(figures.hints_honoured > 0, "no Retry-After was honoured");
    assert!(
        figures.hints_above_max_delay > 0,
        "no Retry-After above max_delay"
    );
    assert!(
        figures.cancelled_in_attempt > 0,
        "no call cancelled mid-attempt"
    );
    assert!(
        figures.cancelled_in_pause > 0,
        "no call cancelled mid-pause"
    );

    let shared = Arc::into_inner(shared).expect("every job is done");
    shared.gateway.shutdown().await;
}

/// The reduced soak by default; the full one (≥ 10 000 calls) with `RETRY_SOAK_FULL=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_against_the_faulty_gateway() {
    let full = std::env::var_os("RETRY_SOAK_FULL").is_some_and(|v| v != "0" && !v.is_empty());
    let size = if full { FULL } else { REDUCED };
    tokio::time::timeout(size.limit, soak(size))
        .await
        .unwrap_or_else(|_| panic!("the soak took longer than {:?}", size.limit));
}
