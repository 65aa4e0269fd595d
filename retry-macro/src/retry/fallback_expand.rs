//! Phase 3c: the decision of a read with `fallback = <expr>` ([`decide`]) and the fallback that
//! ends the fn ([`tail`]), also where `protect` refuses the call.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use super::fallback::Fallback;
use super::locals::{Locals, Ret};
use super::valid::Config;
use crate::common::spans::located_at;

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
        inner,
        ..
    } = locals;
    let (krate, ret_span) = (&config.krate, ret.span);
    let refused_only = fallback.refused_only;
    let judge = quote_spanned! {ret_span=>
        #retrier.after_failure_or_fall_back(#verdict, #inner, #text, #refused_only)
    };
    let (why, gone) = (why_local(), Ident::new("__retry_gone", Span::mixed_site()));
    let tail = tail(config, fallback, is_async);
    let ending = quote_spanned! {ret_span=>
        #krate::__private::FallNext::FallBack(#why) => {
            // The failed result ends here, not across the fallback's `.await`.
            { let #gone = #out; }
            #tail
        }
    };
    super::ending::decide(config, locals, ret, (judge, "FallNext"), ending)
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
