//! Phase 2a: `#[retry(...)]` read into one struct (tokio-macros' `Configuration`).
//!
//! Each option has one setter, which refuses a second value and checks what the option alone
//! can tell (an integer, a duration, a known word). What options mean together (the kind and
//! its key, the schedule) is checked afterwards by [`super::valid`], which reads the struct.

use syn::{Expr, ExprLit, Ident, Lit, LitStr, Path};

use super::fallback;
use super::hedge;
use super::setting::twice;
pub(crate) use super::setting::{Given, Setting};
use crate::common::args::{Arg, closest, lit_str, prose, ungroup};
use crate::common::duration::parse_ms;
use crate::common::errors::Errors;
use crate::common::krate::{self, Refused};
use crate::common::rules;

/// Every option that takes a value, in the order the messages list them.
pub(crate) const OPTIONS: &[&str] = &[
    "idempotency_key",
    "attempts",
    "delay",
    "max_delay",
    "jitter",
    "backoff",
    "retry_if",
    "system",
    "name",
    "crate",
    "timeout",
    "hand_over",
    "fallback",
    "fallback_on",
    "hedge",
    "hedge_load",
];

/// Read or write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A call that changes nothing.
    Read,
    /// A call that changes state, retried only with an idempotency key.
    Write,
}

/// How pauses are randomised; mirrors `retry_runtime::Jitter`.
#[derive(Clone, Copy)]
pub(crate) enum Jitter {
    Equal,
    Full,
    None,
}

/// The arguments of one `#[retry(...)]`.
#[derive(Default)]
pub(crate) struct Options {
    /// `read` or `write`, with the word to blame.
    pub kind: Option<(Kind, Ident)>,
    /// A word that is no kind was given, and refused: no need to ask for the kind as well.
    pub bad_word: bool,
    pub key: Setting<Expr>,
    pub attempts: Setting<Given<u32>>,
    pub delay: Setting<Given<u64>>,
    pub max_delay: Setting<Given<u64>>,
    pub timeout: Setting<Given<u64>>,
    pub jitter: Setting<Jitter>,
    /// Only ever `"exponential"`: held to refuse a second `backoff`.
    pub backoff: Setting<()>,
    pub retry_if: Setting<Path>,
    pub system: Setting<LitStr>,
    /// The operation's label in events and metrics; the fn's name by default.
    pub name: Setting<LitStr>,
    pub krate: Setting<Path>,
    /// `hand_over = <expr>`: where a keyed write goes when its in-memory attempts run out.
    pub hand_over: Setting<Expr>,
    /// `fallback = <expr>` and `fallback_on = "..."` ([`super::fallback`]).
    pub fallback: fallback::Settings,
    /// `hedge = "..."` ([`super::hedge`]).
    pub hedge: Setting<Given<hedge::Spec>>,
    /// `hedge_load = 0.05`, in thousandths.
    pub hedge_load: Setting<Given<u32>>,
    /// `protect`: consult the system's breaker and bulkhead before each attempt. The word, to
    /// blame for a missing `From<Rejected>`.
    pub protect: Option<Ident>,
    /// Unknown options seen so far, refused once each.
    unknown: Vec<Ident>,
}

impl Options {
    /// Reads the arguments in order, each error into `errors`.
    pub(crate) fn read(errors: &mut Errors, args: Vec<Arg>) -> Options {
        let mut options = Options::default();
        for (index, arg) in args.into_iter().enumerate() {
            match arg {
                Arg::Word(word) => options.set_kind(errors, word, index),
                Arg::Pair { name, value } => options.set(errors, name, value),
            }
        }
        options
    }

    /// `name = value`, to the setter of that option.
    fn set(&mut self, errors: &mut Errors, name: Ident, value: Expr) {
        match name.to_string().as_str() {
            "idempotency_key" => self.set_key(errors, &name, value),
            "attempts" => self.set_attempts(errors, &name, &value),
            "delay" => set_duration(errors, &mut self.delay, &name, &value),
            "max_delay" => set_duration(errors, &mut self.max_delay, &name, &value),
            "timeout" => set_duration(errors, &mut self.timeout, &name, &value),
            "jitter" => self.set_jitter(errors, &name, &value),
            "backoff" => self.set_backoff(errors, &name, &value),
            "retry_if" => self.set_retry_if(errors, &name, &value),
            "system" => self.set_system(errors, &name, &value),
            "name" => self.set_name(errors, &name, &value),
            "crate" => self.set_crate(errors, &name, &value),
            "hand_over" => self.hand_over.set_once(errors, &name, value),
            "fallback" => fallback::set(errors, &mut self.fallback, &name, value),
            "fallback_on" => fallback::set_on(errors, &mut self.fallback, &name, &value),
            "hedge" => hedge::set_hedge(errors, &mut self.hedge, &name, &value),
            "hedge_load" => hedge::set_load(errors, &mut self.hedge_load, &name, &value),
            "protect" => errors.at(
                &name,
                "`protect` is a flag and takes no value: write `protect`, as in `#[retry(read, system = \"payments\", protect)]`; the breaker and bulkhead it consults are set per system (`retry_runtime::system(\"payments\").set_breaker(…)`, `.set_bulkhead(…)`) or by configuration",
            ),
            label => {
                if self.unknown.contains(&name) {
                    errors.at(&name, twice(&name));
                } else {
                    errors.at(&name, unknown_option(label));
                    self.unknown.push(name);
                }
            }
        }
    }

    /// A bare word: `read` or `write`, first; or the flag `protect`.
    fn set_kind(&mut self, errors: &mut Errors, word: Ident, index: usize) {
        if word == "protect" {
            return self.set_protect(errors, word);
        }
        let parsed = if word == "read" {
            Kind::Read
        } else if word == "write" {
            Kind::Write
        } else {
            if OPTIONS.iter().any(|o| word == o) {
                errors.at(&word, format!("`{word}` needs a value: `{word} = ...`"));
            } else {
                errors.at(
                    &word,
                    format!(
                        "unknown kind `{word}`: the first argument is `read` (a call that changes nothing) or `write` (a call the external system deduplicates by `idempotency_key`)"
                    ),
                );
            }
            self.bad_word = true;
            return;
        };
        if let Some((_, first)) = &self.kind {
            errors.at(
                &word,
                format!(
                    "`{first}` and `{word}` together: a call is either a `read` or a `write`; keep one"
                ),
            );
            return;
        }
        if index != 0 {
            errors.at(
                &word,
                format!("the kind comes first: `#[retry({word}, ...)]`"),
            );
        }
        self.kind = Some((parsed, word));
    }

    fn set_protect(&mut self, errors: &mut Errors, word: Ident) {
        if self.protect.is_some() {
            errors.at(&word, "`protect` is given twice: keep one");
            return;
        }
        self.protect = Some(word);
    }

    fn set_key(&mut self, errors: &mut Errors, name: &Ident, value: Expr) {
        if self.key.claim(errors, name) {
            self.key.value = Some(value);
        }
    }

    fn set_attempts(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.attempts.claim(errors, name) {
            return;
        }
        let value = ungroup(value);
        let Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) = value
        else {
            errors.at(
                value,
                format!(
                    "`attempts` takes an integer literal from 1 to {}, like `attempts = 3`, so that the bound is checked at compile time",
                    rules::MAX_ATTEMPTS
                ),
            );
            return;
        };
        if !int.suffix().is_empty() {
            errors.at(
                int,
                format!(
                    "`attempts = {int}`: write the count without a suffix, like `attempts = {}`",
                    int.base10_digits()
                ),
            );
            return;
        }
        match int.base10_parse::<u32>() {
            Ok(0) => errors.at(
                int,
                "`attempts = 0` would never call the external system: attempts count the first call, so use 1 (no retry) to 5; 3 is typical (R-RES-RE-3)",
            ),
            Ok(n) if rules::attempts_allowed(n) => {
                self.attempts.value = Some(Given {
                    value: n,
                    span: int.span(),
                });
            }
            _ => errors.at(
                int,
                format!(
                    "`attempts = {}` is above the ceiling of {} ({}): more than 5 attempts means the external system is degrading. Use `attempts = 3` (typical) to 5, and for longer outages open a circuit breaker, fall back, or move the work to a durable task queue (R-RES-RE-5)",
                    int.base10_digits(),
                    rules::MAX_ATTEMPTS,
                    rules::Violation::Attempts.rule(),
                ),
            ),
        }
    }

    fn set_jitter(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.jitter.claim(errors, name) {
            return;
        }
        let Some(lit) = string(errors, "jitter", value, "\"equal\"") else {
            return;
        };
        self.jitter.value = match lit.value().as_str() {
            "equal" => Some(Jitter::Equal),
            "full" => Some(Jitter::Full),
            "none" => Some(Jitter::None),
            other => {
                errors.at(
                    lit,
                    format!(
                        "unknown jitter `{other}`: use \"equal\" (uniform in [d/2, d], the default), \"full\" (uniform in [0, d]) or \"none\" (exactly d)"
                    ),
                );
                None
            }
        };
    }

    fn set_backoff(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.backoff.claim(errors, name) {
            return;
        }
        let Some(lit) = string(errors, "backoff", value, "\"exponential\"") else {
            return;
        };
        if lit.value() == "exponential" {
            self.backoff.value = Some(());
        } else {
            errors.at(
                lit,
                format!(
                    "a {:?} backoff is forbidden (R-RES-RE-X3): a delay that does not grow hammers a degrading system in bursts. Backoff is always exponential: remove `backoff`, or set `delay` (first pause) and `max_delay` (cap)",
                    lit.value()
                ),
            );
        }
    }

    fn set_retry_if(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.retry_if.claim(errors, name) {
            return;
        }
        match ungroup(value) {
            Expr::Path(path) if path.qself.is_none() => {
                self.retry_if.value = Some(path.path.clone());
            }
            other => errors.at(
                other,
                "`retry_if` takes the path of a `fn(&E) -> bool`, like `retry_if = is_retryable`; write a named fn for anything more",
            ),
        }
    }

    fn set_system(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.system.claim(errors, name) {
            return;
        }
        let Some(lit) = string(errors, "system", value, "\"gateway\"") else {
            return;
        };
        if lit.value().trim().is_empty() {
            errors.at(
                lit,
                "`system` names the external system, like `system = \"gateway\"`; it cannot be empty",
            );
        } else {
            self.system.value = Some(lit.clone());
        }
    }

    fn set_name(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.name.claim(errors, name) {
            return;
        }
        let Some(lit) = string(errors, "name", value, "\"get_payment\"") else {
            return;
        };
        if lit.value().trim().is_empty() {
            errors.at(
                lit,
                "`name` labels the operation in events and metrics, like `name = \"get_payment\"`; it cannot be blank (remove it to use the fn's name)",
            );
        } else {
            self.name.value = Some(lit.clone());
        }
    }

    fn set_crate(&mut self, errors: &mut Errors, name: &Ident, value: &Expr) {
        if !self.krate.claim(errors, name) {
            return;
        }
        match krate::parse(value) {
            Ok(path) => self.krate.value = Some(path),
            Err(Refused::NotAString(value)) => {
                errors.at(value, takes_a_string("crate", "\"my_retry\""))
            }
            Err(Refused::NotAPath(lit)) => errors.at(lit, krate::USAGE),
        }
    }
}

/// The setter of `delay`, `max_delay` and `timeout`: a duration, in ms.
fn set_duration(errors: &mut Errors, slot: &mut Setting<Given<u64>>, name: &Ident, value: &Expr) {
    if !slot.claim(errors, name) {
        return;
    }
    let example = if name == "delay" {
        "\"200ms\""
    } else {
        "\"5s\""
    };
    let Some(lit) = string(errors, &name.to_string(), value, example) else {
        return;
    };
    match parse_ms(&lit.value()) {
        Ok(ms) => {
            slot.value = Some(Given {
                value: ms,
                span: lit.span(),
            });
        }
        Err(e) => errors.at(lit, format!("`{name} = {:?}`: {e}", lit.value())),
    }
}

/// The string literal of `name = "..."`, or an error.
fn string<'a>(
    errors: &mut Errors,
    name: &str,
    value: &'a Expr,
    example: &str,
) -> Option<&'a LitStr> {
    let lit = lit_str(value);
    if lit.is_none() {
        errors.at(ungroup(value), takes_a_string(name, example));
    }
    lit
}

fn takes_a_string(name: &str, example: &str) -> String {
    format!("`{name}` takes a string literal, like `{name} = {example}`")
}

fn unknown_option(name: &str) -> String {
    let hint = closest(name, OPTIONS).map_or(String::new(), |o| format!("did you mean `{o}`? "));
    format!(
        "unknown option `{name}`: {hint}the options are {}",
        prose(OPTIONS)
    )
}
