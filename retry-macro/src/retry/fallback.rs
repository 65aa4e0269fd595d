//! `fallback = <expr>` on a read, and `fallback_on = "refused"`: read ([`set`], [`set_on`]),
//! checked ([`check`]) and expanded ([`decide`], [`tail`]). The expression is the fn's own
//! `Result` (a future of it, awaited, in an async fn, like `hand_over`), evaluated when the
//! attempts give up on a transient failure or the budget, the breaker or the bulkhead refuses
//! the call; never for a permanent error. It sees `reason` (a `retry_runtime::GiveUp`): why.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Expr, Ident};

use super::locals::{Locals, Ret};
use super::options::{Kind, Options};
use super::setting::{Given, Setting};
use super::valid::Config;
use crate::common::args::lit_str;
use crate::common::errors::Errors;
use crate::common::spans::located_at;

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

/// A fallback only on a read (a write's is the queue, R-RES-RE-5), not with `hedge`, and
/// `fallback_on` only with a fallback.
pub(super) fn check(
    errors: &mut Errors,
    options: &Options,
    kind: Option<Kind>,
) -> Option<Fallback> {
    let settings = &options.fallback;
    if let (Some(on), None) = (&settings.on.name, &settings.expr.name) {
        errors.at(
            on,
            "`fallback_on` says when `fallback` answers, and there is no `fallback = <expr>`: add one, or remove `fallback_on`",
        );
    }
    let name = settings.expr.name.as_ref()?;
    if kind == Some(Kind::Write) {
        errors.at(
            name,
            "`fallback` is for a read: a write's fallback is the durable queue (R-RES-RE-5), `hand_over = <expr>` with its `idempotency_key`, which repeats the write later under its key; a made-up answer would tell the caller that a change happened when it did not. Replace `fallback` with `hand_over`",
        );
    }
    if options.hedge.name.is_some() {
        errors.at(
            name,
            "`fallback` does not combine with `hedge` yet: remove one of them",
        );
    }
    Some(Fallback {
        expr: settings.expr.value.clone()?,
        refused_only: settings.on.given().unwrap_or(false),
    })
}

/// `expand::decide` for a read with `fallback`: a give-up the runtime lets fall back ends the
/// fn with the fallback's answer ([`tail`]).
pub(super) fn decide(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    (verdict, text): (TokenStream, TokenStream),
    fallback: &Fallback,
    is_async: bool,
) -> TokenStream {
    let Locals {
        retrier,
        out,
        err,
        pause,
        inner,
        ..
    } = locals;
    let (krate, ret_span) = (&config.krate, ret.span);
    let krate_at_ret = located_at(krate, ret_span);
    let out_at_ret = Ident::new("__retry_out", Span::mixed_site().located_at(ret_span));
    let next = Ident::new("__retry_next", Span::mixed_site());
    let why = why_local();
    let gone = Ident::new("__retry_gone", Span::mixed_site());
    let refused_only = fallback.refused_only;
    let tail = tail(config, fallback, is_async);
    quote_spanned! {ret_span=>
        let #next = match #krate_at_ret::__private::RetryResult::failure(&#out_at_ret) {
            ::core::option::Option::None => {
                #retrier.succeeded();
                return #out;
            }
            ::core::option::Option::Some(#err) => {
                #retrier.after_failure_or_fall_back(#verdict, #inner, #text, #refused_only)
            }
        };
        match #next {
            #krate::__private::FallNext::Pause(#pause) => #pause,
            #krate::__private::FallNext::Return => return #out,
            #krate::__private::FallNext::FallBack(#why) => {
                // The failed result ends here, not across the fallback's `.await`.
                { let #gone = #out; }
                #tail
            }
        }
    }
}

/// The local holding why the read falls back (a `GiveUp`), before it is `reason`.
pub(super) fn why_local() -> Ident {
    Ident::new("__retry_why", Span::mixed_site())
}

/// The fallback itself, ending the fn: `reason` (the user's name, so that the expression sees
/// it) bound to the [`why_local`], then the expression's answer returned (awaited in an async
/// fn). Used where the loop gives up ([`decide`]) and where `protect` refuses the call.
pub(super) fn tail(config: &Config, fallback: &Fallback, is_async: bool) -> TokenStream {
    let expr = &fallback.expr;
    let krate = located_at(&config.krate, expr.span());
    let reason = Ident::new("reason", expr.span());
    let why = why_local();
    let run = if is_async {
        quote_spanned!(expr.span()=> (#expr).await)
    } else {
        quote_spanned!(expr.span()=> #expr)
    };
    quote! {
        #[allow(unused_variables)]
        let #reason: #krate::GiveUp = #why;
        return #run;
    }
}
