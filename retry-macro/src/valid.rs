//! Phase 2: the retry rules. Every refusal names the rule id, what is wrong and the fix, points
//! at the offending tokens, and is collected with the others of the same attribute.

use proc_macro2::Span;
use quote::ToTokens;
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;
use syn::{Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Path, ReturnType, Type};

use crate::args::Arg;
use crate::duration::{self, parse_ms};
use crate::errors::Errors;
use crate::fresh_key;
use crate::spans::at_call_site;

/// Most attempts one call may make (R-RES-RE-3).
const MAX_ATTEMPTS: u32 = 5;
/// Most milliseconds one call may spend pausing (R-RES-RE-4).
const MAX_WINDOW_MS: u64 = 5_000;

const OPTIONS: &[&str] = &[
    "idempotency_key",
    "attempts",
    "delay",
    "max_delay",
    "jitter",
    "backoff",
    "retry_if",
    "system",
    "crate",
    "timeout",
];

/// Read or write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call that changes nothing.
    Read,
    /// A call that changes state, retried only with an idempotency key.
    Write,
}

/// How pauses are randomised; mirrors `retry_runtime::Jitter`.
#[derive(Clone, Copy)]
pub enum Jitter {
    Equal,
    Full,
    None,
}

/// How errors are classified.
pub enum Classifier {
    /// `retry_runtime::Classify` on the error type.
    Classify,
    /// `retry_if = path`.
    RetryIf(Path),
}

/// A valid configuration, ready for expansion.
pub struct Config {
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
    /// Path of the runtime crate.
    pub krate: Path,
}

/// The value of an option, with the tokens to blame for it.
struct Given<T> {
    value: T,
    tokens: proc_macro2::TokenStream,
}

/// Applies the rules to the arguments and the fn; every error at once.
pub fn check(args: Vec<Arg>, func: &ItemFn) -> syn::Result<Config> {
    let mut errors = Errors::default();
    let mut kind: Option<(Kind, Ident)> = None;
    let mut bad_word = false;
    let mut seen: Vec<Ident> = Vec::new();
    let mut key = None;
    let mut attempts: Option<Given<u32>> = None;
    let mut delay: Option<Given<u64>> = None;
    let mut max_delay: Option<Given<u64>> = None;
    let mut timeout: Option<Given<u64>> = None;
    let mut jitter = Jitter::Equal;
    let mut retry_if = None;
    let mut system = None;
    let mut krate = None;

    for (index, arg) in args.into_iter().enumerate() {
        let (name, value) = match arg {
            Arg::Word(word) => {
                bad_word |= !check_word(&mut errors, &mut kind, word, index);
                continue;
            }
            Arg::Pair { name, value } => (name, value),
        };
        let label = name.to_string();
        if seen.contains(&name) {
            errors.at(
                &name,
                format!("`{label}` is given twice: keep one `{label} = ...`"),
            );
            continue;
        }
        seen.push(name.clone());
        match label.as_str() {
            "idempotency_key" => key = Some((name, value)),
            "attempts" => attempts = check_attempts(&mut errors, value),
            "delay" | "max_delay" => {
                let parsed = check_duration(&mut errors, &label, value);
                if label == "delay" {
                    delay = parsed;
                } else {
                    max_delay = parsed;
                }
            }
            "jitter" => {
                if let Some(lit) = string(&mut errors, &label, &value, "\"equal\"") {
                    match lit.value().as_str() {
                        "equal" => jitter = Jitter::Equal,
                        "full" => jitter = Jitter::Full,
                        "none" => jitter = Jitter::None,
                        other => errors.at(
                            &lit,
                            format!(
                                "unknown jitter `{other}`: use \"equal\" (uniform in [d/2, d], the default), \"full\" (uniform in [0, d]) or \"none\" (exactly d)"
                            ),
                        ),
                    }
                }
            }
            "timeout" => timeout = check_duration(&mut errors, &label, value),
            "backoff" => {
                if let Some(lit) = string(&mut errors, &label, &value, "\"exponential\"") {
                    if lit.value() != "exponential" {
                        errors.at(
                            &lit,
                            format!(
                                "a {:?} backoff is forbidden (R-RES-RE-X3): a delay that does not grow hammers a degrading system in bursts. Backoff is always exponential: remove `backoff`, or set `delay` (first pause) and `max_delay` (cap)",
                                lit.value()
                            ),
                        );
                    }
                }
            }
            "retry_if" => match ungroup(value) {
                Expr::Path(path) if path.qself.is_none() => retry_if = Some(path.path),
                other => errors.at(
                    &other,
                    "`retry_if` takes the path of a `fn(&E) -> bool`, like `retry_if = is_retryable`; write a named fn for anything more",
                ),
            },
            "system" => {
                if let Some(lit) = string(&mut errors, &label, &value, "\"sber\"") {
                    if lit.value().trim().is_empty() {
                        errors.at(&lit, "`system` names the external system, like `system = \"sber\"`; it cannot be empty");
                    } else {
                        system = Some(lit);
                    }
                }
            }
            "crate" => {
                if let Some(lit) = string(&mut errors, &label, &value, "\"my_retry\"") {
                    // Mod-style: no generic arguments (`a<b>` would not parse where the
                    // expansion puts the path).
                    match lit.parse_with(Path::parse_mod_style) {
                        Ok(path) => krate = Some(at_call_site(&path)),
                        Err(_) => errors.at(
                            &lit,
                            "`crate` takes the path of the runtime crate as a string, like `crate = \"my_retry\"`",
                        ),
                    }
                }
            }
            _ => errors.at(&name, unknown_option(&label)),
        }
    }

    match kind {
        Some((kind, word)) => check_key(&mut errors, kind, &word, key.as_ref()),
        None if bad_word => {}
        None => {
            errors.at_span(
                Span::call_site(),
                "missing the kind of call: write `#[retry(read)]` for a call that changes nothing, or `#[retry(write, idempotency_key = ...)]` for one the external system deduplicates by key (R-RES-RE-1)",
            );
        }
    }

    let n = attempts.as_ref().map_or(3, |a| a.value);
    let d = delay.as_ref().map_or(200, |d| d.value);
    let cap = max_delay.as_ref().map_or(5_000, |m| m.value);
    check_schedule(&mut errors, n, d, cap, &attempts, &delay, &max_delay);
    check_fn(&mut errors, func);
    if let (Some(timeout), None) = (&timeout, &func.sig.asyncness) {
        errors.at_span(
            timeout.tokens.span(),
            "`timeout` bounds each attempt of an async fn; a blocking fn cannot be interrupted. Make the fn `async`, or set a timeout on the blocking call itself (its client's timeout)",
        );
    }

    errors.finish()?;
    Ok(Config {
        key: key.map(|(_, value)| value),
        attempts: n,
        delay_ms: d,
        max_delay_ms: cap,
        timeout: timeout.map(|t| (t.value, t.tokens.span())),
        jitter,
        classifier: retry_if.map_or(Classifier::Classify, Classifier::RetryIf),
        system: system.unwrap_or_else(|| {
            LitStr::new(&func.sig.ident.unraw().to_string(), func.sig.ident.span())
        }),
        krate: krate.unwrap_or_else(|| syn::parse_quote!(::retry_runtime)),
    })
}

/// false when the word is not a kind at all.
fn check_word(
    errors: &mut Errors,
    kind: &mut Option<(Kind, Ident)>,
    word: Ident,
    index: usize,
) -> bool {
    let parsed = if word == "read" {
        Kind::Read
    } else if word == "write" {
        Kind::Write
    } else if OPTIONS.iter().any(|o| word == o) {
        errors.at(&word, format!("`{word}` needs a value: `{word} = ...`"));
        return false;
    } else {
        errors.at(
            &word,
            format!(
                "unknown kind `{word}`: the first argument is `read` (a call that changes nothing) or `write` (a call the external system deduplicates by `idempotency_key`)"
            ),
        );
        return false;
    };
    if let Some((_, first)) = kind {
        errors.at(
            &word,
            format!(
                "`{first}` and `{word}` together: a call is either a `read` or a `write`; keep one"
            ),
        );
        return true;
    }
    if index != 0 {
        errors.at(
            &word,
            format!("the kind comes first: `#[retry({word}, ...)]`"),
        );
    }
    *kind = Some((parsed, word));
    true
}

fn check_key(errors: &mut Errors, kind: Kind, word: &Ident, key: Option<&(Ident, Expr)>) {
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

fn check_attempts(errors: &mut Errors, value: Expr) -> Option<Given<u32>> {
    let value = ungroup(value);
    let Expr::Lit(ExprLit {
        lit: Lit::Int(int), ..
    }) = &value
    else {
        errors.at(
            &value,
            "`attempts` takes an integer literal from 1 to 5, like `attempts = 3`, so that the bound is checked at compile time",
        );
        return None;
    };
    if !int.suffix().is_empty() {
        errors.at(
            int,
            format!(
                "`attempts = {int}`: write the count without a suffix, like `attempts = {}`",
                int.base10_digits()
            ),
        );
        return None;
    }
    let tokens = int.to_token_stream();
    match int.base10_parse::<u32>() {
        Ok(0) => {
            errors.at(
                int,
                "`attempts = 0` would never call the external system: attempts count the first call, so use 1 (no retry) to 5; 3 is typical (R-RES-RE-3)",
            );
            None
        }
        Ok(n) if n <= MAX_ATTEMPTS => Some(Given { value: n, tokens }),
        _ => {
            errors.at(
                int,
                format!(
                    "`attempts = {}` is above the ceiling of {MAX_ATTEMPTS} (R-RES-RE-3): more than 5 attempts means the external system is degrading. Use `attempts = 3` (typical) to 5, and for longer outages open a circuit breaker, fall back, or move the work to a durable task queue (R-RES-RE-5)",
                    int.base10_digits()
                ),
            );
            None
        }
    }
}

fn check_duration(errors: &mut Errors, name: &str, value: Expr) -> Option<Given<u64>> {
    let example = if name == "delay" {
        "\"200ms\""
    } else {
        "\"5s\""
    };
    let lit = string(errors, name, &value, example)?;
    match parse_ms(&lit.value()) {
        Ok(ms) => Some(Given {
            value: ms,
            tokens: lit.to_token_stream(),
        }),
        Err(e) => {
            errors.at(&lit, format!("`{name} = {:?}`: {e}", lit.value()));
            None
        }
    }
}

/// The pauses a policy makes before jitter, in ms.
fn pauses(attempts: u32, delay: u64, cap: u64) -> Vec<u64> {
    (1..attempts)
        .scan(delay, |pause, _| {
            let this = (*pause).min(cap);
            *pause = pause.saturating_mul(2);
            Some(this)
        })
        .collect()
}

fn check_schedule(
    errors: &mut Errors,
    attempts: u32,
    delay: u64,
    cap: u64,
    given_attempts: &Option<Given<u32>>,
    given_delay: &Option<Given<u64>>,
    given_cap: &Option<Given<u64>>,
) {
    if cap < delay {
        let at = given_cap.as_ref().or(given_delay.as_ref());
        errors.at_span(
            at.map_or(Span::call_site(), |g| g.tokens.span()),
            format!(
                "`max_delay` ({}) is shorter than `delay` ({}): the cap must be at least the first pause. Raise `max_delay` or lower `delay`",
                duration::show(cap),
                duration::show(delay)
            ),
        );
        return;
    }
    if attempts >= 3 && cap == delay {
        let at = given_cap.as_ref().or(given_delay.as_ref());
        errors.at_span(
            at.map_or(Span::call_site(), |g| g.tokens.span()),
            format!(
                "`max_delay` equals `delay` ({}), so every pause is the same: a fixed delay is forbidden (R-RES-RE-X3) because it hammers a degrading system in bursts. Let pauses grow: raise `max_delay` (5s by default)",
                duration::show(delay)
            ),
        );
        return;
    }
    let schedule = pauses(attempts, delay, cap);
    let total = schedule.iter().fold(0u64, |sum, p| sum.saturating_add(*p));
    if total > MAX_WINDOW_MS {
        let shown: Vec<String> = schedule.iter().map(|p| duration::show(*p)).collect();
        let at = given_delay
            .as_ref()
            .map(|g| &g.tokens)
            .or(given_attempts.as_ref().map(|g| &g.tokens))
            .or(given_cap.as_ref().map(|g| &g.tokens));
        errors.at_span(
            at.map_or(Span::call_site(), |t| t.span()),
            format!(
                "these settings may pause {} = {} in one call (attempts = {attempts}, delay = {}, max_delay = {}), beyond the 5s an in-memory retry may take (R-RES-RE-4): a caller blocked that long times out upstream. Lower `attempts`, `delay` or `max_delay` (the reference 3 attempts from 200ms pause 200ms + 400ms), or move this work to a durable task queue (R-RES-RE-5)",
                shown.join(" + "),
                duration::show(total),
                duration::show(delay),
                duration::show(cap),
            ),
        );
    }
}

fn check_fn(errors: &mut Errors, func: &ItemFn) {
    let sig = &func.sig;
    if let Some(constness) = &sig.constness {
        errors.at(
            constness,
            "`#[retry]` cannot go on a `const fn`: retrying pauses between attempts, which a const fn cannot do. Remove `const`",
        );
    }
    if let Some(FnArg::Receiver(receiver)) = sig.inputs.first() {
        if !borrows(&receiver.ty) {
            errors.at(
                receiver,
                "`#[retry]` runs the body once per attempt, but this method takes `self` by value, so the first attempt would consume it. Take `&self` or `&mut self`",
            );
        }
    }
    if let Some(impl_trait) = find_impl_trait(&sig.output) {
        errors.at(
            impl_trait,
            "`#[retry]` cannot return `impl Trait`: the loop names the return type to check each attempt's result. Name the type (or box it)",
        );
    }
    if sig.asyncness.is_none() {
        if sig
            .generics
            .lifetimes()
            .any(|l| l.lifetime.ident == "async_trait")
        {
            errors.at(
                &sig.output,
                "`#[retry]` cannot re-run this method: `#[async_trait]` has already turned it into a boxed future. Use a native `async fn` in the trait (stable since Rust 1.75) and drop `#[async_trait]`, or put `#[retry]` on an inherent async fn that the trait method calls",
            );
        } else if returns_future(&sig.output) {
            errors.at(
                &sig.output,
                "`#[retry]` cannot re-run a future it is handed: write this fn as an `async fn` returning `Result<T, E>`",
            );
        }
    }
}

/// true for `&Self`, `&mut Self` and `Pin<&mut Self>`-like receivers.
fn borrows(ty: &Type) -> bool {
    match ty {
        Type::Reference(_) => true,
        Type::Path(path) => path.path.segments.last().is_some_and(|s| {
            s.ident == "Pin"
                && matches!(&s.arguments, syn::PathArguments::AngleBracketed(a)
                    if matches!(a.args.first(), Some(syn::GenericArgument::Type(Type::Reference(_)))))
        }),
        Type::Paren(inner) => borrows(&inner.elem),
        _ => false,
    }
}

fn returns_future(output: &ReturnType) -> bool {
    struct FindFuture(bool);
    impl<'ast> syn::visit::Visit<'ast> for FindFuture {
        fn visit_trait_bound(&mut self, bound: &'ast syn::TraitBound) {
            self.0 |= bound
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "Future");
            syn::visit::visit_trait_bound(self, bound);
        }
    }
    let ReturnType::Type(_, ty) = output else {
        return false;
    };
    let mut find = FindFuture(false);
    syn::visit::Visit::visit_type(&mut find, ty);
    find.0
}

/// The first `impl Trait` in the return type.
fn find_impl_trait(output: &ReturnType) -> Option<&syn::TypeImplTrait> {
    struct Find<'ast>(Option<&'ast syn::TypeImplTrait>);
    impl<'ast> syn::visit::Visit<'ast> for Find<'ast> {
        fn visit_type_impl_trait(&mut self, found: &'ast syn::TypeImplTrait) {
            self.0.get_or_insert(found);
        }
    }
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let mut find = Find(None);
    syn::visit::Visit::visit_type(&mut find, ty);
    find.0
}

/// `value` without the invisible groups `macro_rules!` wraps around `$x:expr` fragments.
fn ungroup(mut value: Expr) -> Expr {
    while let Expr::Group(group) = value {
        value = *group.expr;
    }
    value
}

/// The string literal of `name = "..."`, or an error.
fn string(errors: &mut Errors, name: &str, value: &Expr, example: &str) -> Option<LitStr> {
    let mut value = value;
    while let Expr::Group(group) = value {
        value = &group.expr;
    }
    if let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    {
        Some(lit.clone())
    } else {
        errors.at(
            value,
            format!("`{name}` takes a string literal, like `{name} = {example}`"),
        );
        None
    }
}

fn unknown_option(name: &str) -> String {
    let close = OPTIONS
        .iter()
        .map(|o| (edit_distance(name, o), o))
        .filter(|(d, _)| *d <= 2)
        .min();
    let hint = close.map_or(String::new(), |(_, o)| format!("did you mean `{o}`? "));
    format!(
        "unknown option `{name}`: {hint}the options are `idempotency_key`, `attempts`, `delay`, `max_delay`, `jitter`, `backoff`, `retry_if`, `system`, `crate` and `timeout`"
    )
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap() {
        assert_eq!(pauses(3, 200, 5000), [200, 400]);
        assert_eq!(
            pauses(5, 1000, 5000),
            [1000, 2000, 4000, 8000].map(|p: u64| p.min(5000))
        );
        assert_eq!(pauses(1, 200, 5000), Vec::<u64>::new());
        assert_eq!(
            pauses(5, u64::MAX / 2, u64::MAX),
            [u64::MAX / 2, u64::MAX - 1, u64::MAX, u64::MAX]
        );
    }

    fn check_args(args: proc_macro2::TokenStream) -> syn::Result<Config> {
        let func: ItemFn = syn::parse_quote!(
            async fn f() -> Result<(), E> {
                Ok(())
            }
        );
        crate::args::parse(args).and_then(|args| check(args, &func))
    }

    #[test]
    fn suffixed_attempts_are_refused() {
        let error = check_args(quote::quote!(read, attempts = 3u8))
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "`attempts = 3u8`: write the count without a suffix, like `attempts = 3`"
        );
    }

    #[test]
    fn values_grouped_by_macro_rules_are_read_through() {
        // `macro_rules!` hands `$n:expr` over in an invisible group.
        let group = |tokens: proc_macro2::TokenStream| {
            proc_macro2::Group::new(proc_macro2::Delimiter::None, tokens)
        };
        let (n, d, f) = (
            group(quote::quote!(4)),
            group(quote::quote!("10ms")),
            group(quote::quote!(is_retryable)),
        );
        let config =
            check_args(quote::quote!(read, attempts = #n, delay = #d, retry_if = #f)).unwrap();
        assert_eq!((config.attempts, config.delay_ms), (4, 10));
        assert!(matches!(config.classifier, Classifier::RetryIf(_)));
    }

    #[test]
    fn suggests_the_closest_option() {
        assert!(unknown_option("atempts").contains("did you mean `attempts`?"));
        assert!(
            unknown_option("max_attempts")
                .starts_with("unknown option `max_attempts`: the options")
        );
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
