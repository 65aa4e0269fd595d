//! The loop's decisions after a failure: the schedule, permanent errors, blank keys, hints and
//! the window.

use super::*;
use crate::Jitter;
use crate::result::RetryResult;
use crate::site::site;
use rand::SeedableRng as _;

const MS: Duration = Duration::from_millis(1);
static NONE: Site = site("test", "test", 3, 200, 5000, Jitter::None, false);
static FIVE: Site = site("test", "test", 5, 100, 2000, Jitter::None, false);

fn verdict(transient: bool, retry_after: Option<Duration>) -> Verdict {
    Verdict {
        transient,
        retry_after,
        rejection: false,
    }
}

fn rng() -> rand::rngs::SmallRng {
    rand::rngs::SmallRng::seed_from_u64(1)
}

#[test]
fn transient_failures_follow_the_schedule_then_give_up() {
    let mut r = Retrier::read(&NONE);
    assert_eq!(
        r.after_failure_with(verdict(true, None), false, ErrorText::Opaque, &mut rng()),
        Some(MS * 200)
    );
    assert_eq!(r.attempt(), 2);
    assert_eq!(
        r.after_failure_with(verdict(true, None), false, ErrorText::Opaque, &mut rng()),
        Some(MS * 400)
    );
    assert_eq!(r.attempt(), 3);
    assert_eq!(
        r.after_failure_with(verdict(true, None), false, ErrorText::Opaque, &mut rng()),
        None
    );
}

#[test]
fn permanent_failures_give_up_at_once() {
    let mut r = Retrier::read(&NONE);
    assert_eq!(
        r.after_failure_with(verdict(false, None), false, ErrorText::Opaque, &mut rng()),
        None
    );
    assert_eq!(r.attempt(), 1);
}

#[test]
fn blank_key_allows_one_attempt() {
    assert_eq!(
        Retrier::write(&NONE, &"").after_failure(verdict(true, None), false, ErrorText::Opaque),
        None
    );
    assert_eq!(
        Retrier::write(&NONE, &" ").after_failure(verdict(true, None), false, ErrorText::Opaque),
        None
    );
    assert_eq!(
        Retrier::write(&NONE, &"k").after_failure(verdict(true, None), false, ErrorText::Opaque),
        Some(MS * 200)
    );
}

#[test]
fn hint_lengthens_a_pause_but_never_past_the_window() {
    let mut r = Retrier::read(&FIVE);
    // A hint longer than the backoff pause wins.
    assert_eq!(
        r.after_failure_with(
            verdict(true, Some(MS * 1500)),
            false,
            ErrorText::Opaque,
            &mut rng()
        ),
        Some(MS * 1500)
    );
    // A shorter hint does not shorten the backoff pause.
    assert_eq!(
        r.after_failure_with(
            verdict(true, Some(MS * 10)),
            false,
            ErrorText::Opaque,
            &mut rng()
        ),
        Some(MS * 200)
    );
    // 1.5 + 0.2 + 2 s = 3.7 s so far is fine ...
    assert_eq!(
        r.after_failure_with(
            verdict(true, Some(MS * 2000)),
            false,
            ErrorText::Opaque,
            &mut rng()
        ),
        Some(MS * 2000)
    );
    // ... but another 2 s would pass the 5 s window: give up.
    assert_eq!(
        r.after_failure_with(
            verdict(true, Some(MS * 2000)),
            false,
            ErrorText::Opaque,
            &mut rng()
        ),
        None
    );
}

#[test]
fn hint_above_max_delay_gives_up() {
    let mut r = Retrier::read(&FIVE);
    assert_eq!(
        r.after_failure_with(
            verdict(true, Some(MS * 2001)),
            false,
            ErrorText::Opaque,
            &mut rng()
        ),
        None
    );
    let mut r = Retrier::read(&FIVE);
    assert_eq!(
        r.after_failure_with(
            verdict(true, Some(Duration::MAX)),
            false,
            ErrorText::Opaque,
            &mut rng()
        ),
        None
    );
}

#[test]
fn failure_reads_the_error_of_any_result_alias() {
    let ok: std::io::Result<u8> = Ok(1);
    let err: std::io::Result<u8> = Err(std::io::ErrorKind::TimedOut.into());
    assert!(ok.failure().is_none());
    assert_eq!(
        err.failure().map(|e| e.kind()),
        Some(std::io::ErrorKind::TimedOut)
    );
}
