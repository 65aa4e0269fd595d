//! Phase 3, with `protect`: what the loop does around its attempts to consult the system's
//! breaker and bulkhead ([`protect`]).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use super::locals::{Locals, Ret};
use super::valid::Config;
use crate::common::spans::located_at;

/// With `protect`: the bulkhead's permit, taken before the first attempt and held until the fn
/// returns (pauses included), and the breaker's admission before each attempt. A refusal
/// returns `Err(E::from(Rejected))` at once; the conversion is named once, spanned at
/// `protect`, so that an error type without it is reported there. A keyed write with
/// `hand_over` hands a refused call over instead (`hand_over::tail`): the refusal is the
/// degrading system the queue exists for, and is counted by what became of the work.
pub(super) fn protect(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    is_async: bool,
) -> (TokenStream, TokenStream) {
    let Some(span) = config.protect else {
        return (TokenStream::new(), TokenStream::new());
    };
    let (site, retrier) = (&locals.site, &locals.retrier);
    let krate = &config.krate;
    let krate_at = located_at(krate, span);
    let ty = &ret.ty;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let (reject, permit, queued, refused) = (
        local("__retry_reject"),
        local("__retry_permit"),
        local("__retry_queued"),
        local("__retry_refused"),
    );
    // Its refusal left uncounted when a hand-over or a fallback counts what it does instead.
    let queued_here = match (&config.hand_over, &config.fallback) {
        (None, None) => quote!(#queued),
        _ => quote!(#queued.for_hand_over()),
    };
    let wait = if is_async {
        quote!(#queued_here.wait().await)
    } else {
        quote!(::core::result::Result::<#krate::__private::Permit, _>::Err(#queued_here.refuse()))
    };
    let refuse = match &config.hand_over {
        Some(expr) => {
            let (out, off) = (&locals.out, super::hand_over::off_local());
            let tail = super::hand_over::tail(config, locals, ret, expr, is_async);
            quote! {{
                let #out = #reject.failed(#refused);
                let #off = #retrier.refused(#refused);
                #tail
            }}
        }
        None => match &config.fallback {
            Some(fallback) => {
                let why = super::fallback_expand::why_local();
                let tail = super::fallback_expand::tail(config, fallback, is_async);
                quote! {{
                    let #why = #retrier.fell_back_refused(#refused);
                    #tail
                }}
            }
            None => quote!(return #reject.failed(#refused)),
        },
    };
    let admission = match (&config.hand_over, &config.fallback) {
        (Some(_), _) => quote!(#retrier.admit_or_hand_over()),
        (None, Some(_)) => quote!(#retrier.admit_or_fall_back()),
        (None, None) => quote!(#retrier.admit()),
    };
    let convert = quote_spanned!(span=> #krate_at::__private::from_rejected);
    let enter = quote! {
        let #reject = #krate::__private::Reject::<#ty>::new(#convert);
        let #permit = match #krate::__private::enter(&#site) {
            ::core::result::Result::Ok(#permit) => #permit,
            ::core::result::Result::Err(#queued) => match #wait {
                ::core::result::Result::Ok(#permit) => #permit,
                ::core::result::Result::Err(#refused) => #refuse,
            },
        };
    };
    let admit = quote! {
        if let ::core::result::Result::Err(#refused) = #admission {
            #refuse
        }
    };
    (enter, admit)
}
