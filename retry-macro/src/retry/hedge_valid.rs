//! The rules of `hedge` weighed with the rest of the attribute and the fn (phase 2, called by
//! [`super::valid`]); the option's own grammar is in [`super::hedge`].

use proc_macro2::Span;
use syn::{FnArg, ItemFn, Type};

use super::hedge::Hedge;
use super::options::{Kind, Options};
use crate::common::duration::{self, millis, nanos};
use crate::common::errors::Errors;
use crate::common::rules::hedge::{self as rules, HedgeViolation};

/// The rules of `hedge` with the rest of the attribute and the fn; `None` without `hedge`.
pub(super) fn check(
    errors: &mut Errors,
    options: &Options,
    func: &ItemFn,
    attempts: u32,
) -> Option<Hedge> {
    let Some(name) = &options.hedge.name else {
        if let Some(load) = &options.hedge_load.name {
            errors.at(
                load,
                "`hedge_load` caps the extra calls of hedging, but this fn does not hedge: add `hedge = \"p95\"` (or a delay), or remove `hedge_load`",
            );
        }
        return None;
    };
    let mut ok = true;
    if let Some((Kind::Write, _)) = &options.kind {
        ok = false;
        errors.at(
            name,
            "hedging a write is forbidden (R-RES-RE-1): a hedge has two attempts in flight at once, and even with an idempotency key providers answer 409 or apply the write twice under that race. Hedge reads only: remove `hedge` (retries after a failure stay allowed)",
        );
    }
    if func.sig.asyncness.is_none() {
        ok = false;
        errors.at(
            name,
            "`hedge` starts an attempt beside a slow one, but nothing can run beside a blocking fn. Make the fn `async`, or remove `hedge`",
        );
    }
    for arg in &func.sig.inputs {
        if let Some(at) = exclusive(arg) {
            ok = false;
            errors.at(
                at,
                "`hedge` runs the body twice at once, and a `&mut` borrow can serve only one attempt at a time. Take `&self` (with interior mutability for what must change), or remove `hedge`",
            );
        }
    }
    let spec = options.hedge.given()?;
    let span = options.hedge.span().unwrap_or_else(Span::call_site);
    match rules::check(attempts, nanos(spec.fixed_ms)) {
        Ok(()) => {}
        Err(HedgeViolation::OneAttempt) => {
            ok = false;
            errors.at_span(
                options.attempts.span().unwrap_or(span),
                "`hedge` needs at least 2 attempts: `attempts` counts the hedges too (R-RES-RE-3). Use `attempts = 2` to 5, or remove `hedge`",
            );
        }
        Err(violation @ (HedgeViolation::TooShort | HedgeViolation::WindowTooLong)) => {
            ok = false;
            let gap = duration::show(millis(rules::max_gap(attempts)));
            errors.at_span(
                span,
                format!(
                    "with {attempts} attempts a hedge delay of {} may start the last attempt {} after the first, beyond the 5s an in-memory retry may take ({}). Use a delay of at most {gap} (5s / (attempts − 1)), or fewer attempts",
                    duration::show(spec.fixed_ms),
                    duration::show(spec.fixed_ms.saturating_mul(u64::from(attempts - 1))),
                    violation.rule(),
                ),
            );
        }
    }
    ok.then(|| Hedge {
        spec,
        load_permille: options
            .hedge_load
            .given()
            .unwrap_or(rules::DEFAULT_LOAD_PERMILLE),
    })
}

/// The tokens to blame when `arg` is an exclusive borrow (`&mut self`, `x: &mut T`).
fn exclusive(arg: &FnArg) -> Option<proc_macro2::TokenStream> {
    use quote::ToTokens as _;
    match arg {
        FnArg::Receiver(receiver)
            if receiver.reference.is_some() && receiver.mutability.is_some() =>
        {
            Some(receiver.to_token_stream())
        }
        FnArg::Typed(typed) => match &*typed.ty {
            Type::Reference(reference) if reference.mutability.is_some() => {
                Some(typed.to_token_stream())
            }
            _ => None,
        },
        _ => None,
    }
}
