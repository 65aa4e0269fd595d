//! The values of the counter's `outcome` label.

/// How many values the `outcome` label has: one counter per outcome and site.
pub(crate) const OUTCOMES: usize = 14;

/// The values of the `outcome` label.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) enum Outcome {
    Success = 0,
    Retry = 1,
    Exhausted = 2,
    Permanent = 3,
    BudgetExhausted = 4,
    Deadline = 5,
    HandedOver = 6,
    RetryAfterTooLong = 7,
    BreakerOpen = 8,
    BulkheadFull = 9,
    AlreadyQueued = 10,
    AlreadyDone = 11,
    HandOverRefused = 12,
    Fallback = 13,
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
impl Outcome {
    pub(super) const ALL: [Outcome; OUTCOMES] = [
        Outcome::Success,
        Outcome::Retry,
        Outcome::Exhausted,
        Outcome::Permanent,
        Outcome::BudgetExhausted,
        Outcome::Deadline,
        Outcome::HandedOver,
        Outcome::RetryAfterTooLong,
        Outcome::BreakerOpen,
        Outcome::BulkheadFull,
        Outcome::AlreadyQueued,
        Outcome::AlreadyDone,
        Outcome::HandOverRefused,
        Outcome::Fallback,
    ];

    pub(super) const fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Retry => "retry",
            Outcome::Exhausted => "exhausted",
            Outcome::Permanent => "permanent",
            Outcome::BudgetExhausted => "budget_exhausted",
            Outcome::Deadline => "deadline",
            Outcome::HandedOver => "handed_over",
            Outcome::RetryAfterTooLong => "retry_after_too_long",
            Outcome::BreakerOpen => "breaker_open",
            Outcome::BulkheadFull => "bulkhead_full",
            Outcome::AlreadyQueued => "already_queued",
            Outcome::AlreadyDone => "already_done",
            Outcome::HandOverRefused => "hand_over_refused",
            Outcome::Fallback => "fallback",
        }
    }
}
