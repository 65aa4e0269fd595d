//! The retry rules of `retry-runtime` as plain arithmetic, defined once for the runtime and its
//! `#[retry]` macro.
//!
//! `retry-runtime` builds `Policy` on these functions; `retry-runtime-macros` checks the attribute's
//! settings with them at compile time. So an attribute is refused exactly when `Policy::new`
//! would refuse the same settings at run time, and a change here reaches both. Hence std only,
//! `const fn`s, no dependency: a proc-macro crate and the runtime can both depend on it
//! (serde shares `serde_derive_internals` the same way, through a symlink; a crate of its own
//! survives `cargo package` and checkouts without symlinks).
//!
//! One unit throughout: nanoseconds as a `u128` ([`Nanos`]), what `Duration::as_nanos`
//! returns. Every `Duration` fits (at most about 1.8 × 10^28 ns), the sum of four of them
//! too, and the macro's whole milliseconds convert exactly.
//!
//! The rule ids (`R-RES-RE-3`, …) are those of the resilience style guide that
//! `retry-runtime`'s documentation lists.

pub mod duration;
pub mod hedge;

/// A length of time in nanoseconds.
pub type Nanos = u128;

/// Nanoseconds in a millisecond.
pub const NANOS_PER_MS: Nanos = 1_000_000;

/// The most attempts one call may make, the first included (R-RES-RE-3).
pub const MAX_ATTEMPTS: u32 = 5;

/// The longest an in-memory retry may pause in total over one call: 5 s (R-RES-RE-4).
pub const MAX_WINDOW: Nanos = 5_000 * NANOS_PER_MS;

/// The reference configuration's attempts, the first call included.
pub const DEFAULT_ATTEMPTS: u32 = 3;

/// The reference configuration's first pause: 200 ms.
pub const DEFAULT_DELAY: Nanos = 200 * NANOS_PER_MS;

/// The reference configuration's cap on one pause: 5 s.
pub const DEFAULT_MAX_DELAY: Nanos = 5_000 * NANOS_PER_MS;

/// From this many attempts on (two pauses or more), `max_delay == delay` makes every pause the
/// same. A single pause has nothing to grow into.
pub const FIXED_DELAY_FROM_ATTEMPTS: u32 = 3;

/// A rule that settings break. [`rule`](Violation::rule) names its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// `attempts` is 0 or above [`MAX_ATTEMPTS`].
    Attempts,
    /// The first pause is zero: no backoff at all.
    ZeroDelay,
    /// `max_delay` is shorter than the first pause: every pause would be cut to `max_delay`.
    MaxDelayBelowDelay,
    /// `max_delay` equals the first pause with two pauses or more: a fixed delay.
    FixedDelay,
    /// The pauses may add up to more than [`MAX_WINDOW`]; carries the worst case.
    WindowTooLong(Nanos),
}

impl Violation {
    /// The id of the rule broken, as `RULES.md` lists it.
    pub const fn rule(&self) -> &'static str {
        match self {
            Violation::Attempts => "R-RES-RE-3",
            Violation::ZeroDelay | Violation::MaxDelayBelowDelay | Violation::FixedDelay => {
                "R-RES-RE-X3"
            }
            Violation::WindowTooLong(_) => "R-RES-RE-4",
        }
    }
}

/// true for 1 to [`MAX_ATTEMPTS`] attempts (R-RES-RE-3).
pub const fn attempts_allowed(attempts: u32) -> bool {
    attempts >= 1 && attempts <= MAX_ATTEMPTS
}

/// true when every pause would be the same (R-RES-RE-X3): see [`FIXED_DELAY_FROM_ATTEMPTS`].
pub const fn is_fixed_delay(attempts: u32, delay: Nanos, max_delay: Nanos) -> bool {
    attempts >= FIXED_DELAY_FROM_ATTEMPTS && max_delay == delay
}

/// The nominal pause after failed attempt `k` (1-based), before jitter:
/// `min(delay · 2^(k−1), max_delay)`. Zero for `k = 0`.
pub const fn base_pause(delay: Nanos, max_delay: Nanos, k: u32) -> Nanos {
    if k == 0 {
        return 0;
    }
    let mut pause = delay;
    let mut i = 1;
    while i < k && pause < max_delay {
        pause = pause.saturating_mul(2);
        i += 1;
    }
    if pause > max_delay { max_delay } else { pause }
}

/// The longest a call may spend pausing: the sum of the un-jittered pauses (jitter only
/// shortens them).
pub const fn worst_case_window(attempts: u32, delay: Nanos, max_delay: Nanos) -> Nanos {
    let mut total: Nanos = 0;
    let mut k = 1;
    while k < attempts {
        total = total.saturating_add(base_pause(delay, max_delay, k));
        k += 1;
    }
    total
}

/// Applies every rule, in this order: attempts, zero delay, cap below the delay, fixed delay,
/// window. `Ok` carries the worst-case window.
pub const fn check(attempts: u32, delay: Nanos, max_delay: Nanos) -> Result<Nanos, Violation> {
    if !attempts_allowed(attempts) {
        return Err(Violation::Attempts);
    }
    if delay == 0 {
        return Err(Violation::ZeroDelay);
    }
    if max_delay < delay {
        return Err(Violation::MaxDelayBelowDelay);
    }
    if is_fixed_delay(attempts, delay, max_delay) {
        return Err(Violation::FixedDelay);
    }
    let window = worst_case_window(attempts, delay, max_delay);
    if window > MAX_WINDOW {
        return Err(Violation::WindowTooLong(window));
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NANOS_PER_MS;

    #[test]
    fn pauses_double_up_to_the_cap() {
        let pauses = |attempts: u32, delay: Nanos, cap: Nanos| -> Vec<Nanos> {
            (1..attempts).map(|k| base_pause(delay, cap, k)).collect()
        };
        assert_eq!(pauses(3, 200 * MS, 5000 * MS), [200 * MS, 400 * MS]);
        assert_eq!(
            pauses(5, 1000 * MS, 5000 * MS),
            [1000 * MS, 2000 * MS, 4000 * MS, 5000 * MS]
        );
        assert_eq!(pauses(1, 200 * MS, 5000 * MS), []);
        assert_eq!(base_pause(200 * MS, 5000 * MS, 0), 0);
        assert_eq!(base_pause(Nanos::MAX / 2, Nanos::MAX, 3), Nanos::MAX);
    }

    #[test]
    fn every_rule_names_its_id() {
        assert_eq!(check(0, MS, 2 * MS), Err(Violation::Attempts));
        assert_eq!(check(6, MS, 2 * MS), Err(Violation::Attempts));
        assert_eq!(check(3, 0, 2 * MS), Err(Violation::ZeroDelay));
        assert_eq!(check(3, 2 * MS, MS), Err(Violation::MaxDelayBelowDelay));
        assert_eq!(check(3, MS, MS), Err(Violation::FixedDelay));
        assert_eq!(check(2, MS, MS), Ok(MS));
        assert_eq!(
            check(3, 2000 * MS, 5000 * MS),
            Err(Violation::WindowTooLong(6000 * MS))
        );
        assert_eq!(check(4, 1000 * MS, 2000 * MS), Ok(MAX_WINDOW));
        let rules = [
            Violation::Attempts,
            Violation::ZeroDelay,
            Violation::MaxDelayBelowDelay,
            Violation::FixedDelay,
            Violation::WindowTooLong(0),
        ]
        .map(|v| v.rule());
        assert_eq!(
            rules,
            [
                "R-RES-RE-3",
                "R-RES-RE-X3",
                "R-RES-RE-X3",
                "R-RES-RE-X3",
                "R-RES-RE-4"
            ]
        );
    }

    #[test]
    fn the_reference_configuration_is_allowed() {
        assert_eq!(
            check(DEFAULT_ATTEMPTS, DEFAULT_DELAY, DEFAULT_MAX_DELAY),
            Ok(600 * MS)
        );
    }
}
