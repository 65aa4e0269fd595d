//! What a site's failed attempt runs under: the attempts and schedule it compiled, tightened by
//! the configuration in force (`state.rs`).

use super::state::overrides;
use crate::backoff::Policy;
use crate::site::Site;

/// What a site's failed attempt runs under: its attempts, its schedule, whether it may hedge.
pub(crate) struct Effective {
    /// Attempts in all, the first included.
    pub(crate) attempts: u32,
    /// The schedule: the compiled one, or the configured delays.
    pub(crate) policy: Policy,
    /// Whether hedged attempts may start.
    pub(crate) hedges: bool,
}

/// The effective settings of `site`: the compiled ones, tightened by the configuration. A value
/// that would loosen them (a later site of the system compiled tighter than the configuration
/// was checked against) is ignored: the compiled value stays.
pub(crate) fn effective(site: &Site) -> Effective {
    let compiled = site.policy;
    let Some(o) = overrides(site.system) else {
        return Effective {
            attempts: compiled.attempts(),
            policy: compiled,
            hedges: true,
        };
    };
    let attempts = if o.retries_off {
        1
    } else {
        o.attempts
            .map_or(compiled.attempts(), |n| n.min(compiled.attempts()))
    };
    let policy = match (o.delay, o.max_delay) {
        (None, None) => compiled,
        // Never shorter than compiled (`tighten.rs` refuses a shorter one for the sites it
        // knows; a tower layer's or a later site's own is kept here).
        (delay, max_delay) => Policy::new(
            attempts,
            delay.map_or(compiled.delay(), |d| d.max(compiled.delay())),
            max_delay.map_or(compiled.max_delay(), |d| d.max(compiled.max_delay())),
            compiled.jitter(),
        )
        .unwrap_or(compiled),
    };
    Effective {
        attempts,
        policy,
        hedges: !o.retries_off && !o.hedge_off,
    }
}
