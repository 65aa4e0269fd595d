//! `fallback = <expr>` on a read, and `fallback_on = "refused"`: read here ([`set`], [`set_on`]),
//! checked by `fallback_valid`, expanded by `fallback_expand`. The expression is the fn's own
//! `Result` (a future of it, awaited, in an async fn, like `hand_over`), evaluated when the
//! attempts give up on a transient failure or the budget, the breaker or the bulkhead refuses
//! the call; never for a permanent error. It sees `reason` (a `retry_runtime::GiveUp`): why.

use syn::spanned::Spanned as _;
use syn::{Expr, Ident};

use super::setting::{Given, Setting};
use crate::common::args::lit_str;
use crate::common::errors::Errors;

/// The fallback settings of one `#[retry(...)]`, as read.
#[derive(Default)]
pub(crate) struct Settings {
    /// `fallback = <expr>`.
    pub expr: Setting<Expr>,
    /// `fallback_on = "refused"`: only refusals fall back (`true`), or `"any"` give-up.
    pub on: Setting<Given<bool>>,
}

/// A valid fallback.
pub(crate) struct Fallback {
    /// The expression that answers instead.
    pub expr: Expr,
    /// Only on refusals (the budget, the breaker, the bulkhead), not on other give-ups.
    pub refused_only: bool,
}

/// `fallback = <expr>`.
pub(super) fn set(errors: &mut Errors, settings: &mut Settings, name: &Ident, value: Expr) {
    if settings.expr.claim(errors, name) {
        settings.expr.value = Some(value);
    }
}

/// `fallback_on = "refused"` or `"any"`.
pub(super) fn set_on(errors: &mut Errors, settings: &mut Settings, name: &Ident, value: &Expr) {
    if !settings.on.claim(errors, name) {
        return;
    }
    let refused_only = match lit_str(value).map(syn::LitStr::value).as_deref() {
        Some("refused") => true,
        Some("any") => false,
        _ => {
            return errors.at(
                value,
                "`fallback_on` is `\"any\"` (the default: a transient give-up or a refusal of the budget, breaker or bulkhead) or `\"refused\"` (only the refusals)",
            );
        }
    };
    settings.on.value = Some(Given {
        value: refused_only,
        span: value.span(),
    });
}
