//! Phase 3, hedged: the body of a fn with `hedge = "..."`. A different loop from the plain
//! retry's (which stays exactly as it is): the body becomes a closure that makes one attempt's
//! future, called up to `attempts` times, with several attempts in flight at once, and the
//! runtime's `Hedged` decides when each starts. The closure borrows what the body uses, shared:
//! a body that needs an exclusive borrow cannot run twice at once, and the compiler says so at
//! the closure (the attribute already refuses `&mut` parameters, the common case). With
//! `fallback`, the call that would end on a transient failure answers from it instead.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use super::fallback_expand;
use super::hedge::Hedge;
use super::locals::{Locals, Ret};
use super::valid::Config;
use super::verdict::verdict;
use crate::common::spans::located_at;

/// The hedged fn's body: the sites, the attempt closure and the loop over answers.
pub(super) fn body(
    config: &Config,
    hedge: &Hedge,
    locals: &Locals,
    ret: &Ret,
    site: TokenStream,
    attempt: TokenStream,
) -> TokenStream {
    let krate = &config.krate;
    let Locals {
        site: site_name,
        retrier: call,
        out,
        err,
        inner,
        ..
    } = locals;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let (hedge_site, make, attempt_no) = (
        local("__RETRY_HEDGE"),
        local("__retry_make"),
        local("__retry_attempt"),
    );
    let (attempts, fixed_ms, permille, load) = (
        config.attempts,
        hedge.spec.fixed_ms,
        hedge.spec.permille,
        hedge.load_permille,
    );
    let ret_span = ret.span;
    let krate_at_ret = located_at(krate, ret_span);
    let out_at_ret = Ident::new("__retry_out", Span::mixed_site().located_at(ret_span));
    let on_failure = on_failure(
        config,
        locals,
        ret,
        &attempt_no,
        verdict(config, locals, ret),
    );
    let decide = quote_spanned! {ret_span=>
        match #krate_at_ret::__private::RetryResult::failure(&#out_at_ret) {
            ::core::option::Option::None => {
                #call.as_mut().succeeded(#attempt_no);
                return #out;
            }
            ::core::option::Option::Some(#err) => {
                #on_failure
            }
        }
    };
    quote! {
        #site
        static #hedge_site: #krate::__private::HedgeSite = #krate::__private::hedge_site(
            #attempts, #fixed_ms, #permille, #load,
        );
        let mut #make = || #attempt;
        let mut #call = ::core::pin::pin!(#krate::__private::Hedged::new(&#site_name, &#hedge_site));
        loop {
            let (#out, #inner, #attempt_no) = #call.as_mut().next(&mut #make).await;
            #decide
        }
    }
}

/// What a failed attempt's answer does: wait for the next answer or return the error, and with
/// `fallback`, answer from it when the call would end on a transient failure.
fn on_failure(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    attempt_no: &Ident,
    (verdict, text): (TokenStream, TokenStream),
) -> TokenStream {
    let (krate, ret_span) = (&config.krate, ret.span);
    let Locals {
        retrier: call,
        out,
        inner,
        ..
    } = locals;
    match &config.fallback {
        None => quote_spanned! {ret_span=>
            if !#call.as_mut().after_failure(#attempt_no, #verdict, #inner, #text) {
                return #out;
            }
        },
        Some(fallback) => {
            let (refused_only, why) = (fallback.refused_only, fallback_expand::why_local());
            let gone = Ident::new("__retry_gone", Span::mixed_site());
            // A hedged fn is async: its fallback is awaited.
            let tail = fallback_expand::tail(config, fallback, true);
            quote_spanned! {ret_span=>
                match #call.as_mut().after_failure_or_fall_back(
                    #attempt_no, #verdict, #inner, #text, #refused_only,
                ) {
                    #krate::__private::HedgedNext::Wait => {}
                    #krate::__private::HedgedNext::Return => return #out,
                    #krate::__private::HedgedNext::FallBack(#why) => {
                        // The failed result ends here, not across the fallback's `.await`.
                        { let #gone = #out; }
                        #tail
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::ItemFn;

    fn expanded(args: proc_macro2::TokenStream) -> String {
        let func: ItemFn = syn::parse_quote!(
            async fn f() -> Result<(), E> {
                Ok(())
            }
        );
        let args = crate::common::args::parse(args).unwrap();
        let config = crate::retry::valid::check(args, &func).unwrap_or_else(|e| panic!("{e}"));
        crate::retry::expand::expand(&config, func).to_string()
    }

    #[test]
    fn only_a_hedged_fn_gets_the_hedged_loop() {
        let plain = expanded(quote!(read));
        assert!(!plain.contains("Hedged"), "{plain}");
        assert!(plain.contains("Retrier :: read"), "{plain}");
        let hedged = expanded(quote!(read, hedge = "p99.9 or 30ms", hedge_load = 0.1));
        assert!(
            hedged.contains(
                ":: retry_runtime :: __private :: hedge_site (3u32 , 30u64 , 999u32 , 100u32 ,)"
            ),
            "{hedged}"
        );
        assert!(hedged.contains("Hedged :: new"), "{hedged}");
        assert!(!hedged.contains("Retrier"), "{hedged}");
    }
}
