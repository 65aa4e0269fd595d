//! Phase 2: the retry rules. Every refusal names the rule id, what is wrong and the fix, points
//! at the offending tokens, and is collected with the others of the same attribute.
//!
//! The options are read into [`Options`] first, each on its own; the rules that weigh options
//! together read that struct: the kind and its key (R-RES-RE-1, R-RES-RE-X1) and the schedule,
//! by the runtime's own arithmetic ([`rules`], so that the attribute refuses exactly what
//! `Policy::new` refuses).

use proc_macro2::Span;
use syn::ext::IdentExt as _;
use syn::{Expr, ItemFn, LitStr, Path};

use super::fallback::Fallback;
use super::fallback_valid;
use super::fresh_key;
use super::hedge::Hedge;
use super::hedge_valid;
use super::options::{Jitter, Kind, Options};
use super::signature;
use crate::common::args::Arg;
use crate::common::duration::{self, millis, nanos};
use crate::common::errors::Errors;
use crate::common::krate;
use crate::common::rules::{self, Violation};

/// How errors are classified.
pub(crate) enum Classifier {
    /// `retry_runtime::Classify` on the error type.
    Classify,
    /// `retry_if = path`.
    RetryIf(Path),
}

/// A valid configuration, ready for expansion.
pub(crate) struct Config {
    /// The idempotency key expression: `Some` on writes, `None` on reads.
    pub key: Option<Expr>,
    /// Total attempts.
    pub attempts: u32,
    /// First pause, in ms.
    pub delay_ms: u64,
    /// Cap on one pause, in ms.
    pub max_delay_ms: u64,
    /// The per-attempt timeout in ms, with the tokens to blame for a missing conversion.
    pub timeout: Option<(u64, Span)>,
    /// Jitter mode.
    pub jitter: Jitter,
    /// Which errors are retried.
    pub classifier: Classifier,
    /// The external system's label.
    pub system: LitStr,
    /// The operation's label (`name = "…"`, or the fn's name).
    pub operation: LitStr,
    /// Path of the runtime crate.
    pub krate: Path,
    /// `hand_over = <expr>`, only on a keyed write: run when the in-memory attempts give up on a
    /// transient error.
    pub hand_over: Option<Expr>,
    /// `fallback = <expr>`, only on a read ([`super::fallback`]).
    pub fallback: Option<Fallback>,
    /// `hedge = "..."`: attempts race instead of waiting for each other ([`hedge`]).
    pub hedge: Option<Hedge>,
    /// `protect`: the word, where a missing `From<Rejected>` is blamed.
    pub protect: Option<Span>,
}

/// The schedule the attribute asks for, defaults filled in.
struct Schedule {
    attempts: u32,
    delay_ms: u64,
    max_delay_ms: u64,
}

/// Applies the rules to the arguments and the fn; every error at once.
pub(crate) fn check(args: Vec<Arg>, func: &ItemFn) -> syn::Result<Config> {
    let mut errors = Errors::default();
    let options = Options::read(&mut errors, args);
    check_kind(&mut errors, &options);
    let fallback = fallback_valid::check(&mut errors, &options, options.kind.as_ref().map(|k| k.0));
    let schedule = check_schedule(&mut errors, &options);
    signature::check(&mut errors, func);
    let hedge = hedge_valid::check(&mut errors, &options, func, schedule.attempts);
    if let (Some(protect), Some(_)) = (&options.protect, &options.hedge.name) {
        errors.at(
            protect,
            "`protect` does not combine with `hedge` yet: a hedged call starts attempts side by side, and the breaker would have to admit each of them. Protect the system with `protect` on a plain loop (remove `hedge`), or keep `hedge` without `protect`",
        );
    }
    if let (Some(timeout), None) = (&options.timeout.value, &func.sig.asyncness) {
        errors.at_span(
            timeout.span,
            "`timeout` bounds each attempt of an async fn; a blocking fn cannot be interrupted. Make the fn `async`, or set a timeout on the blocking call itself (its client's timeout)",
        );
    }
    errors.finish()?;
    Ok(Config {
        key: options.key.value,
        attempts: schedule.attempts,
        delay_ms: schedule.delay_ms,
        max_delay_ms: schedule.max_delay_ms,
        timeout: options.timeout.value.map(|t| (t.value, t.span)),
        jitter: options.jitter.value.unwrap_or(Jitter::Equal),
        classifier: options
            .retry_if
            .value
            .map_or(Classifier::Classify, Classifier::RetryIf),
        system: options.system.value.unwrap_or_else(|| fn_name(func)),
        operation: options.name.value.unwrap_or_else(|| fn_name(func)),
        krate: options.krate.value.unwrap_or_else(krate::default),
        hand_over: options.hand_over.value,
        fallback,
        hedge,
        protect: options.protect.map(|word| word.span()),
    })
}

/// The fn's name, as a label (`r#type` is `type`).
fn fn_name(func: &ItemFn) -> LitStr {
    LitStr::new(&func.sig.ident.unraw().to_string(), func.sig.ident.span())
}

/// A kind, and a key exactly on writes, and not one minted per call (R-RES-RE-1).
fn check_kind(errors: &mut Errors, options: &Options) {
    let Some((kind, word)) = &options.kind else {
        if !options.bad_word {
            errors.at_span(
                Span::call_site(),
                "missing the kind of call: write `#[retry(read)]` for a call that changes nothing, or `#[retry(write, idempotency_key = ...)]` for one the external system deduplicates by key (R-RES-RE-1)",
            );
        }
        return;
    };
    let key = options.key.name.as_ref().zip(options.key.value.as_ref());
    check_hand_over(errors, options, *kind, key.is_some());
    match (kind, key) {
        (Kind::Write, None) => errors.at(
            word,
            "a retried write needs an idempotency key (R-RES-RE-X1): without one, a retry after a lost response charges the customer twice. Add `idempotency_key = <expr>` with a key the external system deduplicates on (derived from the request, or saved once per user action); if the system does not deduplicate, do not retry this call: remove `#[retry]`",
        ),
        (Kind::Read, Some((name, _))) => errors.at(
            name,
            "a read needs no idempotency key, and one here would suggest the call changes state. If it does, it is a write: `#[retry(write, idempotency_key = ...)]`; otherwise remove `idempotency_key`",
        ),
        (Kind::Write, Some((_, expr))) => {
            if let Some(call) = fresh_key::find(expr) {
                errors.at(
                    call,
                    "this idempotency key is minted afresh on every call (R-RES-RE-1), so a repeat of the same request (by the user, an outer retry or a task queue) carries a new key and the external system cannot deduplicate it. Derive the key from the request (a UUID v5 of order id + operation) or generate it once per user action and save it with the order, then pass that: `idempotency_key = order.idempotency_key`",
                );
            }
        }
        (Kind::Read, None) => {}
    }
}

/// `hand_over` only on a write with a key: the queue's task is the same write, and its id the
/// key (R-RES-RE-X1); a read's caller needs its answer now (R-RES-RE-5 is for durable work).
fn check_hand_over(errors: &mut Errors, options: &Options, kind: Kind, keyed: bool) {
    let Some(name) = &options.hand_over.name else {
        return;
    };
    match (kind, keyed) {
        (Kind::Read, _) => errors.at(
            name,
            "`hand_over` is for a keyed write (R-RES-RE-5): the durable queue repeats the write later under its idempotency key, while a read's caller needs its answer now and no queue can hand it back. Remove `hand_over`, or, if this call changes state, make it `#[retry(write, idempotency_key = ..., hand_over = ...)]`",
        ),
        (Kind::Write, false) => errors.at(
            name,
            "`hand_over` needs the write's idempotency key (R-RES-RE-X1): the queue's task id is the key, and each of its attempts sends it again so that the external system deduplicates them. Add `idempotency_key = <expr>`",
        ),
        (Kind::Write, true) => {}
    }
}

/// The schedule, defaults filled in, checked by [`rules::check`] (R-RES-RE-X3, R-RES-RE-4).
fn check_schedule(errors: &mut Errors, options: &Options) -> Schedule {
    let (attempts, delay, cap) = (&options.attempts, &options.delay, &options.max_delay);
    let schedule = Schedule {
        attempts: attempts.given().unwrap_or(rules::DEFAULT_ATTEMPTS),
        delay_ms: delay.given().unwrap_or(millis(rules::DEFAULT_DELAY)),
        max_delay_ms: cap.given().unwrap_or(millis(rules::DEFAULT_MAX_DELAY)),
    };
    let (n, d, c) = (
        schedule.attempts,
        nanos(schedule.delay_ms),
        nanos(schedule.max_delay_ms),
    );
    let Err(violation) = rules::check(n, d, c) else {
        return schedule;
    };
    let (shown_delay, shown_cap) = (
        duration::show(schedule.delay_ms),
        duration::show(schedule.max_delay_ms),
    );
    // Blamed on the first of these options that was given, else on the attribute.
    let cap_or_delay = cap.span().or(delay.span()).unwrap_or_else(Span::call_site);
    match violation {
        // Refused where they were read (`attempts`, a zero duration), the default in their place.
        Violation::Attempts | Violation::ZeroDelay => {}
        Violation::MaxDelayBelowDelay => errors.at_span(
            cap_or_delay,
            format!(
                "`max_delay` ({shown_cap}) is shorter than `delay` ({shown_delay}): the cap must be at least the first pause. Raise `max_delay` or lower `delay`"
            ),
        ),
        Violation::FixedDelay => errors.at_span(
            cap_or_delay,
            format!(
                "`max_delay` equals `delay` ({shown_delay}), so every pause is the same: a fixed delay is forbidden ({}) because it hammers a degrading system in bursts. Let pauses grow: raise `max_delay` ({} by default)",
                violation.rule(),
                duration::show(millis(rules::DEFAULT_MAX_DELAY)),
            ),
        ),
        Violation::WindowTooLong(total) => {
            let pauses: Vec<String> = (1..n)
                .map(|k| duration::show(millis(rules::base_pause(d, c, k))))
                .collect();
            let at = delay.span().or(attempts.span()).or(cap.span());
            errors.at_span(
                at.unwrap_or_else(Span::call_site),
                format!(
                    "these settings may pause {} = {} in one call (attempts = {n}, delay = {shown_delay}, max_delay = {shown_cap}), beyond the {} an in-memory retry may take ({}): a caller blocked that long times out upstream. Lower `attempts`, `delay` or `max_delay` (the reference 3 attempts from 200ms pause 200ms + 400ms), or move this work to a durable task queue (R-RES-RE-5)",
                    pauses.join(" + "),
                    duration::show(millis(total)),
                    duration::show(millis(rules::MAX_WINDOW)),
                    violation.rule(),
                ),
            );
        }
    }
    schedule
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proc_macro2::{Literal, TokenStream};
    use quote::quote;
    use retry_runtime::{Jitter as RuntimeJitter, Policy};

    use super::*;

    fn check_args(args: TokenStream) -> syn::Result<Config> {
        let func: ItemFn = syn::parse_quote!(
            async fn f() -> Result<(), E> {
                Ok(())
            }
        );
        crate::common::args::parse(args).and_then(|args| check(args, &func))
    }

    #[test]
    fn suffixed_attempts_are_refused() {
        let error = check_args(quote!(read, attempts = 3u8)).err().unwrap();
        assert_eq!(
            error.to_string(),
            "`attempts = 3u8`: write the count without a suffix, like `attempts = 3`"
        );
    }

    #[test]
    fn a_second_value_is_refused_even_after_a_bad_first() {
        let args = quote!(read, attempts = 9, attempts = 3, nope = 1, nope = 2);
        let error = check_args(args).err().unwrap();
        let messages: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 4, "{messages:#?}");
        assert!(messages[0].starts_with("`attempts = 9` is above the ceiling of 5 (R-RES-RE-3)"));
        assert_eq!(
            messages[1],
            "`attempts` is given twice: keep one `attempts = ...`"
        );
        assert!(messages[2].starts_with("unknown option `nope`"));
        assert_eq!(messages[3], "`nope` is given twice: keep one `nope = ...`");
    }

    #[test]
    fn an_unknown_option_lists_the_options_and_suggests_the_closest() {
        let message = |args| check_args(args).err().unwrap().to_string();
        assert!(message(quote!(read, atempts = 3)).contains("did you mean `attempts`?"));
        assert_eq!(
            message(quote!(read, max_attempts = 3)),
            "unknown option `max_attempts`: the options are `idempotency_key`, `attempts`, `delay`, `max_delay`, `jitter`, `backoff`, `retry_if`, `system`, `name`, `crate`, `timeout`, `hand_over`, `fallback`, `fallback_on`, `hedge` and `hedge_load`"
        );
    }

    #[test]
    fn the_operation_is_the_fns_name_unless_named() {
        let labels = |args| {
            let config = check_args(args).unwrap();
            (config.system.value(), config.operation.value())
        };
        assert_eq!(labels(quote!(read)), ("f".to_owned(), "f".to_owned()));
        assert_eq!(
            labels(quote!(read, system = "gateway")),
            ("gateway".to_owned(), "f".to_owned())
        );
        assert_eq!(
            labels(quote!(read, system = "gateway", name = "get_payment")),
            ("gateway".to_owned(), "get_payment".to_owned())
        );
    }

    #[test]
    fn a_blank_or_second_name_is_refused() {
        let messages = |args| -> Vec<String> {
            let error = check_args(args).err().unwrap();
            error.into_iter().map(|e| e.to_string()).collect()
        };
        assert_eq!(
            messages(quote!(read, name = " ")),
            [
                "`name` labels the operation in events and metrics, like `name = \"get_payment\"`; it cannot be blank (remove it to use the fn's name)"
            ]
        );
        assert_eq!(
            messages(quote!(read, name = "a", name = "b")),
            ["`name` is given twice: keep one `name = ...`"]
        );
        assert_eq!(
            messages(quote!(read, name = get_payment)),
            ["`name` takes a string literal, like `name = \"get_payment\"`"]
        );
    }

    #[test]
    fn values_grouped_by_macro_rules_are_read_through() {
        // `macro_rules!` hands `$n:expr` over in an invisible group.
        let group =
            |tokens: TokenStream| proc_macro2::Group::new(proc_macro2::Delimiter::None, tokens);
        let (n, d, f) = (
            group(quote!(4)),
            group(quote!("10ms")),
            group(quote!(is_retryable)),
        );
        let config = check_args(quote!(read, attempts = #n, delay = #d, retry_if = #f)).unwrap();
        assert_eq!((config.attempts, config.delay_ms), (4, 10));
        assert!(matches!(config.classifier, Classifier::RetryIf(_)));
    }

    #[test]
    fn the_defaults_are_the_runtimes() {
        let config = check_args(quote!(read)).unwrap();
        let policy = Policy::DEFAULT;
        assert_eq!(config.attempts, policy.attempts());
        assert_eq!(Duration::from_millis(config.delay_ms), policy.delay());
        assert_eq!(
            Duration::from_millis(config.max_delay_ms),
            policy.max_delay()
        );
    }

    /// The drift test: on a grid of schedules, the attribute accepts exactly the settings the
    /// runtime's `Policy::new` accepts.
    #[test]
    fn the_attribute_refuses_exactly_what_policy_new_refuses() {
        let ms = [
            1u64, 99, 100, 200, 400, 500, 999, 1000, 1250, 1666, 2000, 2500, 4000, 5000, 5001, 8000,
        ];
        let (mut accepted, mut refused) = (0, 0);
        for attempts in 0..=6u32 {
            for delay in ms {
                for max_delay in ms {
                    let n = Literal::u32_unsuffixed(attempts);
                    let (d, m) = (format!("{delay}ms"), format!("{max_delay}ms"));
                    let args = quote!(read, attempts = #n, delay = #d, max_delay = #m);
                    let by_macro = check_args(args).is_ok();
                    let by_runtime = Policy::new(
                        attempts,
                        Duration::from_millis(delay),
                        Duration::from_millis(max_delay),
                        RuntimeJitter::Equal,
                    )
                    .is_ok();
                    assert_eq!(
                        by_macro, by_runtime,
                        "attempts = {attempts}, delay = {d}, max_delay = {m}"
                    );
                    if by_macro {
                        accepted += 1;
                    } else {
                        refused += 1;
                    }
                }
            }
        }
        // Both sides of every rule are on the grid.
        assert!(accepted > 100 && refused > 100, "{accepted} / {refused}");
    }
}
