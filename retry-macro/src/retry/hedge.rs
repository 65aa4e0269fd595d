//! `hedge = "20ms" | "p95" | "p95 or 30ms"` and `hedge_load = 0.05`: read on their own by the
//! setters here (hooked into [`super::options`]), then weighed with the rest of the attribute
//! and the fn by `hedge_valid::check` (hooked into [`super::valid`]). The rules themselves (the window, the
//! bounds) are `retry_rules::hedge`'s, shared with the runtime.

use syn::{Expr, ExprLit, Ident, Lit};

use super::setting::{Given, Setting};
use crate::common::args::{lit_str, ungroup};
use crate::common::duration::{self, millis, parse_ms};
use crate::common::errors::Errors;
use crate::common::rules::hedge as rules;

/// A hedge delay: fixed, or a percentile of the call site's latency with a fixed fallback.
#[derive(Clone, Copy)]
pub(crate) struct Spec {
    /// The fixed delay, or the percentile's fallback, in ms.
    pub fixed_ms: u64,
    /// The percentile in thousandths (950 for p95), 0 for a fixed delay.
    pub permille: u32,
}

/// What the expansion needs of a valid `hedge`.
pub(crate) struct Hedge {
    pub spec: Spec,
    /// `hedge_load`, in thousandths.
    pub load_permille: u32,
}

const USAGE: &str = "`hedge` takes a delay like \"20ms\", or a percentile of this call's recent latency from \"p50\" to \"p99.9\" (optionally with the delay to use until enough calls were seen: \"p95 or 30ms\")";

/// The setter of `hedge`.
pub(crate) fn set_hedge(
    errors: &mut Errors,
    slot: &mut Setting<Given<Spec>>,
    name: &Ident,
    value: &Expr,
) {
    if !slot.claim(errors, name) {
        return;
    }
    let Some(lit) = lit_str(value) else {
        errors.at(ungroup(value), USAGE);
        return;
    };
    match parse(&lit.value()) {
        Ok(spec) => {
            slot.value = Some(Given {
                value: spec,
                span: lit.span(),
            });
        }
        Err(why) => errors.at(lit, format!("`hedge = {:?}`: {why}", lit.value())),
    }
}

/// `"20ms"`, `"p95"`, `"p99.9 or 30ms"`.
fn parse(text: &str) -> Result<Spec, String> {
    let text = text.trim();
    let (percentile, fixed) = match text.split_once(" or ") {
        Some((p, d)) => (Some(p.trim()), Some(d.trim())),
        None if text.starts_with('p') => (Some(text), None),
        None => (None, Some(text)),
    };
    let fixed_ms = match fixed {
        Some(delay) => match parse_ms(delay) {
            Ok(ms) => ms,
            Err(duration::DurationError::Zero) => {
                return Err(
                    "a hedge delay of zero would start every attempt at once: use at least \"1ms\" (R-RES-RE-X3), typically about the p95 of this call's latency".to_owned(),
                );
            }
            Err(duration::DurationError::Unparseable) => return Err(USAGE.to_owned()),
            Err(e) => return Err(e.to_string()),
        },
        None => millis(rules::DEFAULT_FALLBACK),
    };
    let permille = match percentile {
        Some(p) => permille(p).ok_or_else(|| {
            format!(
                "a percentile is `p` and a number from 50 to 99.9 with at most one decimal, like \"p95\" or \"p99.9\" (p100 would wait for the slowest call ever seen: use a fixed delay instead). {USAGE}"
            )
        })?,
        None => 0,
    };
    Ok(Spec { fixed_ms, permille })
}

/// `"p95"` → 950, `"p99.9"` → 999, within p50–p99.9.
fn permille(text: &str) -> Option<u32> {
    let number = text.strip_prefix('p')?;
    let (whole, tenth) = number.split_once('.').unwrap_or((number, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(tenth) || tenth.len() != 1 || whole.len() > 2 {
        return None;
    }
    let permille = whole.parse::<u32>().ok()? * 10 + tenth.parse::<u32>().ok()?;
    rules::permille_allowed(permille).then_some(permille)
}

/// The setter of `hedge_load`: a float literal above 0, at most 0.5.
pub(crate) fn set_load(
    errors: &mut Errors,
    slot: &mut Setting<Given<u32>>,
    name: &Ident,
    value: &Expr,
) {
    if !slot.claim(errors, name) {
        return;
    }
    let value = ungroup(value);
    let parsed = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) if f.suffix().is_empty() => f.base10_parse::<f64>().ok(),
        _ => None,
    };
    let permille = parsed.map(|share| (share * 1_000.0).round());
    match permille {
        Some(p) if p >= 1.0 && p <= f64::from(rules::MAX_LOAD_PERMILLE) => {
            slot.value = Some(Given {
                value: p as u32,
                span: syn::spanned::Spanned::span(value),
            });
        }
        _ => errors.at(
            value,
            "`hedge_load` is the most extra calls this fn's hedges may add, as a share of its calls: a decimal above 0 and at most 0.5, like `hedge_load = 0.05` (the default: 5 %). Above that, hedging would add more load than it saves",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_and_percentiles_are_read() {
        let spec = |text| parse(text).map(|s| (s.fixed_ms, s.permille));
        assert_eq!(spec("20ms"), Ok((20, 0)));
        assert_eq!(spec("p95"), Ok((50, 950)));
        assert_eq!(spec("p99.9"), Ok((50, 999)));
        assert_eq!(spec("p50 or 30ms"), Ok((30, 500)));
        for bad in [
            "p100",
            "p49",
            "p99.99",
            "p9x",
            "p",
            "fast",
            "0ms",
            "p95 or 0ms",
            "1.5ms",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
