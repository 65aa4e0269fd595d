//! Why a transient failure is not retried: the reason a give-up's log, counter and error name.

/// Why a transient failure is not retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// Every attempt was used.
    Attempts,
    /// A write with a blank idempotency key gets one attempt (R-RES-RE-1).
    BlankKey,
    /// The other side asked for a pause longer than `max_delay`.
    HintAboveMaxDelay,
    /// A `#[retry]` loop inside the attempt already gave up on this failure.
    InnerLoop,
    /// The system's retry budget is spent.
    Budget,
    /// The pause would end past the caller's deadline ([`crate::with_deadline`]).
    Deadline,
    /// The pause would take the call's pauses past the 5 s window (R-RES-RE-4).
    Window,
    /// The configuration turned retries off for the system (`RETRY_<SYSTEM>_RETRIES=off`).
    RetriesOff,
    /// The system's circuit breaker is open (`protect`): the next attempt would be refused, or
    /// this call was (a keyed write with `hand_over` then goes to the queue).
    BreakerOpen,
    /// The system's bulkhead refused the call (`protect`): only a keyed write with `hand_over`
    /// gives up for it (to the queue); any other call returns the refusal.
    BulkheadFull,
    /// The other side asked for less load (a 429 with a Retry-After hint): not retried in memory
    /// (R-RES-RE-X2), but a keyed write with `hand_over` goes to the queue, due at the hint.
    Throttled,
}

impl GiveUp {
    /// Whether a protection refused (the budget, the breaker, the bulkhead) rather than the
    /// attempts ending: the give-ups a read with `fallback_on = "refused"` falls back on.
    pub(crate) const fn is_refusal(self) -> bool {
        matches!(
            self,
            GiveUp::Budget | GiveUp::BreakerOpen | GiveUp::BulkheadFull
        )
    }

    /// The `reason` label of `retry_fallback_total`: why a read fell back.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) const fn label(self) -> &'static str {
        match self {
            GiveUp::Attempts => "attempts",
            GiveUp::BlankKey => "blank_key",
            GiveUp::HintAboveMaxDelay => "retry_after_too_long",
            GiveUp::InnerLoop => "inner_loop",
            GiveUp::Budget => "budget",
            GiveUp::Deadline => "deadline",
            GiveUp::Window => "window",
            GiveUp::RetriesOff => "retries_off",
            GiveUp::BreakerOpen => "breaker_open",
            GiveUp::BulkheadFull => "bulkhead_full",
            GiveUp::Throttled => "throttled",
        }
    }

    /// A short label for logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            GiveUp::Attempts => "attempts exhausted",
            GiveUp::BlankKey => "blank idempotency key",
            GiveUp::HintAboveMaxDelay => "retry-after above max_delay",
            GiveUp::Window => "retry window exhausted",
            GiveUp::InnerLoop => "an inner retry loop gave up",
            GiveUp::Deadline => "the next pause would pass the deadline",
            GiveUp::Budget => "retry budget exhausted",
            GiveUp::RetriesOff => "retries turned off by configuration",
            GiveUp::BreakerOpen => "the circuit breaker is open",
            GiveUp::BulkheadFull => "the bulkhead is full",
            GiveUp::Throttled => "the system asked for less load (retry-after)",
        }
    }
}
