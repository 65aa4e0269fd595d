//! What a configured value may be, given what the code compiled: only tighter (R-RES-RE-3 for
//! attempts, R-RES-RE-4 and R-RES-RE-X3 for the schedule, where a shorter delay or max_delay is
//! looser: faster retries; the breaker, bulkhead and queue limits the code set may be made
//! stricter, never looser). Each refusal names the rule and the value that stays.

use std::time::Duration;

use super::keys::Value;
use super::queue::{self, QueueLimits};
use super::report::Report;
use super::state::Overrides;
use crate::protect::{Breaker, Settings};
use crate::rules::{self, Violation, duration::show};
use crate::site::Site;

/// Values given, by system.
pub(super) type BySystem = std::collections::BTreeMap<String, Vec<Given>>;

/// One value as given: where from, its text, and what it read as.
pub(super) struct Given {
    pub(super) source: String,
    pub(super) text: String,
    pub(super) value: Result<Value, String>,
}

/// The overrides of `system` from `given`, each value checked against the sites compiled for
/// it, the protections its code set and the queue limits its workers' code set; refusals and
/// applications into `report`.
pub(super) fn system(
    system: &str,
    given: &[Given],
    code: Settings,
    queue: QueueLimits,
    sites: &[&'static Site],
    report: &mut Report,
) -> Overrides {
    let mut o = Overrides::default();
    let mut schedule: Vec<&Given> = Vec::new();
    for g in given {
        let value = match &g.value {
            Ok(value) => *value,
            Err(why) => {
                report.refuse(&g.source, &g.text, why.clone());
                continue;
            }
        };
        if let Value::Delay(_) | Value::MaxDelay(_) = value {
            schedule.push(g);
            continue;
        }
        match looser(value, code, queue, sites) {
            Some(why) => report.refuse(&g.source, &g.text, why),
            None => {
                o.set(value);
                report.apply(system, &g.source, &g.text);
            }
        }
    }
    check_schedule(system, &schedule, &mut o, sites, report);
    o
}

/// Why `value` would loosen what the code set (a site's attempts, the system's bulkhead or
/// breaker, its workers' queue limits), naming the value that stays; `None` when it tightens.
fn looser(
    value: Value,
    code: Settings,
    queue: QueueLimits,
    sites: &[&'static Site],
) -> Option<String> {
    match value {
        Value::Attempts(n) => attempts(n, sites).err(),
        Value::Bulkhead(n) => code
            .bulkhead
            .filter(|b| n > b.get_max_in_flight())
            .map(|b| {
                format!(
                    "more calls in flight than the bulkhead the code set ({}): configuration may only tighten; {} stays",
                    b.get_max_in_flight(),
                    b.get_max_in_flight()
                )
            }),
        Value::Breaker(false) if code.breaker.is_some() => Some(
            "the code set a circuit breaker for this system: configuration may only tighten, so it stays".to_owned(),
        ),
        Value::BreakerFailureRate(_)
        | Value::BreakerMinCalls(_)
        | Value::BreakerConsecutive(_)
        | Value::BreakerOpen(_)
        | Value::BreakerProbes(_) => code.breaker.and_then(|b| looser_breaker(value, b)),
        Value::QueueConcurrency(_) | Value::QueueRate(_) => queue::looser(value, queue),
        // `off` only takes away; `on` is what the code has anyway. The schedule is judged with
        // the attempts in effect (`check_schedule`).
        Value::Retries(_)
        | Value::Hedge(_)
        | Value::Breaker(_)
        | Value::Delay(_)
        | Value::MaxDelay(_) => None,
    }
}

/// `ATTEMPTS = n`: at most 5 (R-RES-RE-3), and never more than a site of the system compiled.
fn attempts(n: u32, sites: &[&'static Site]) -> Result<(), String> {
    if !rules::attempts_allowed(n) {
        return Err(format!(
            "above the ceiling of {} attempts ({}): more means the system is degrading; open a breaker or move the work to a durable queue. Configuration may only tighten: {} stay",
            rules::MAX_ATTEMPTS,
            Violation::Attempts.rule(),
            compiled_attempts(sites),
        ));
    }
    match sites.iter().find(|s| s.policy.attempts() < n) {
        Some(site) => Err(format!(
            "more attempts than `#[retry]` compiled (attempts = {} at `{}`): configuration may only tighten ({}), so the compiled attempts = {} stay",
            site.policy.attempts(),
            site.operation,
            Violation::Attempts.rule(),
            site.policy.attempts(),
        )),
        None => Ok(()),
    }
}

fn compiled_attempts(sites: &[&'static Site]) -> String {
    if sites.is_empty() {
        return "the compiled attempts".to_owned();
    }
    let each: Vec<String> = sites
        .iter()
        .map(|s| format!("attempts = {} at `{}`", s.policy.attempts(), s.operation))
        .collect();
    format!("the compiled {}", each.join(", "))
}

/// A breaker value looser than the code's breaker `b`, said why; `None` when as tight or tighter.
fn looser_breaker(value: Value, b: Breaker) -> Option<String> {
    let (what, code_value) = match value {
        Value::BreakerFailureRate(r) if r > b.get_failure_rate() => {
            ("a higher failure rate", b.get_failure_rate().to_string())
        }
        Value::BreakerMinCalls(n) if n > b.get_min_calls() => {
            ("more calls before judging", b.get_min_calls().to_string())
        }
        Value::BreakerConsecutive(n)
            if b.get_consecutive_failures() > 0 && n > b.get_consecutive_failures() =>
        {
            (
                "more consecutive failures",
                b.get_consecutive_failures().to_string(),
            )
        }
        Value::BreakerOpen(d) if d < b.get_open_for() => {
            ("a shorter open interval", format!("{:?}", b.get_open_for()))
        }
        Value::BreakerProbes(n) if n > b.get_probes() => {
            ("more probes half-open", b.get_probes().to_string())
        }
        _ => return None,
    };
    Some(format!(
        "{what} than the circuit breaker the code set ({code_value}): configuration may only tighten, so {code_value} stays"
    ))
}

/// `DELAY` and `MAX_DELAY`: each first on its own, no shorter than any site of the system
/// compiled ([`shorter`]); then what is left together: at every site, the schedule they make
/// with the attempts in effect must be one the rules allow (no zero or fixed delay,
/// R-RES-RE-X3; at most 5 s of pauses, R-RES-RE-4). Refused together when one site's would not
/// be.
fn check_schedule(
    system: &str,
    given: &[&Given],
    o: &mut Overrides,
    sites: &[&'static Site],
    report: &mut Report,
) {
    let given: Vec<&Given> = given
        .iter()
        .copied()
        .filter(
            |g| match g.value.as_ref().ok().and_then(|v| shorter(*v, sites)) {
                Some(why) => {
                    report.refuse(&g.source, &g.text, why);
                    false
                }
                None => true,
            },
        )
        .collect();
    if given.is_empty() {
        return;
    }
    let (mut delay, mut max_delay) = (None, None);
    for g in &given {
        match g.value {
            Ok(Value::Delay(d)) => delay = Some(d),
            Ok(Value::MaxDelay(d)) => max_delay = Some(d),
            _ => {}
        }
    }
    let attempts_of = |compiled: u32| o.attempts.map_or(compiled, |n| n.min(compiled));
    // Each site's schedule as configured; a system no site names yet is judged at the ceiling.
    let schedules: Vec<(u32, Duration, Duration, &str)> = if sites.is_empty() {
        vec![(
            o.attempts.unwrap_or(rules::MAX_ATTEMPTS),
            delay.unwrap_or(Duration::from_nanos(rules::DEFAULT_DELAY as u64)),
            max_delay.unwrap_or(Duration::from_nanos(rules::DEFAULT_MAX_DELAY as u64)),
            "any site (judged at the ceiling of 5 attempts)",
        )]
    } else {
        sites
            .iter()
            .map(|s| {
                (
                    attempts_of(s.policy.attempts()),
                    delay.unwrap_or(s.policy.delay()),
                    max_delay.unwrap_or(s.policy.max_delay()),
                    s.operation,
                )
            })
            .collect()
    };
    for (n, d, m, at) in schedules {
        if let Err(violation) = rules::check(n, d.as_nanos(), m.as_nanos()) {
            let why = broken(violation, n, d, m, at);
            for g in &given {
                report.refuse(&g.source, &g.text, why.clone());
            }
            return;
        }
    }
    o.delay = delay;
    o.max_delay = max_delay;
    for g in &given {
        report.apply(system, &g.source, &g.text);
    }
}

/// The refusal of a schedule that breaks `violation` at site `at` (attempts `n`, delay `d`,
/// max_delay `m`): the rule it breaks, and that the compiled schedule stays.
fn broken(violation: Violation, n: u32, d: Duration, m: Duration, at: &str) -> String {
    match violation {
        Violation::WindowTooLong(total) => format!(
            "at `{at}` (attempts = {n}) the pauses of delay = {}, max_delay = {} may add up to {}, beyond the {} an in-memory retry may take ({}); the compiled schedule stays",
            show(millis(d)),
            show(millis(m)),
            show(u64::try_from(total / rules::NANOS_PER_MS).unwrap_or(u64::MAX)),
            show(millis(crate::MAX_WINDOW)),
            violation.rule(),
        ),
        Violation::FixedDelay => format!(
            "at `{at}` every pause would be {}: a fixed delay is forbidden ({}); the compiled schedule stays",
            show(millis(d)),
            violation.rule()
        ),
        _ => format!(
            "at `{at}` max_delay ({}) would be shorter than delay ({}); the compiled schedule stays",
            show(millis(m)),
            show(millis(d))
        ),
    }
}

/// Why a `DELAY` or `MAX_DELAY` of `value` is looser than a site of the system compiled: a
/// shorter first pause or cap retries faster, hammering a system that is already degrading
/// (R-RES-RE-X3's reason); `None` when no site compiled a longer one. A longer one tightens.
/// A system no `#[retry]` site names has no compiled value here: its calls keep their own
/// where a configured one is shorter (`effective.rs`).
fn shorter(value: Value, sites: &[&'static Site]) -> Option<String> {
    let (key, d, compiled): (&str, Duration, fn(&Site) -> Duration) = match value {
        Value::Delay(d) => ("delay", d, |s| s.policy.delay()),
        Value::MaxDelay(d) => ("max_delay", d, |s| s.policy.max_delay()),
        _ => return None,
    };
    let site = sites.iter().find(|s| d < compiled(s))?;
    let stays = show(millis(compiled(site)));
    Some(format!(
        "a shorter {key} than `#[retry]` compiled ({key} = {stays} at `{}`): faster retries hammer a degrading system ({}); configuration may only tighten, so the compiled {key} = {stays} stays",
        site.operation,
        Violation::FixedDelay.rule(),
    ))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
