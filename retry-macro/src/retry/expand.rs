//! Phase 3: code generation, in the pieces of the loop: the call site's `static`, the
//! retrier (with the key), the decision on each result, the attempt and the loop around them.
//!
//! The user's signature, attributes and visibility are re-emitted as written; only the body
//! changes. It becomes a loop that runs the original body (in its own `async { }` block or
//! closure, so that `return` and `?` end one attempt) and asks the runtime what to do with each
//! error. The `.await`s live in the user's own fn: `&mut self` works and the future is `Send`
//! whenever the body's is. Generated locals use `Span::mixed_site()`, so the body cannot see
//! or shadow them.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Block, Ident, ItemFn, TraitItemFn};

use super::hedge_expand;
use super::locals::{Locals, Ret};
use super::options::Jitter;
use super::protect::protect;
use super::valid::Config;
use super::verdict::verdict;
use crate::common::spans::located_at;

/// The fn this attribute is on, or the error to report instead (with the input re-emitted).
pub(crate) fn parse_fn(item: TokenStream) -> Result<ItemFn, TokenStream> {
    syn::parse2::<ItemFn>(item.clone()).map_err(|error| {
        let error = match syn::parse2::<TraitItemFn>(item.clone()) {
            Ok(decl) if decl.default.is_none() => syn::Error::new_spanned(
                &decl.sig,
                "`#[retry]` needs a body to re-run: put it on the method's implementation, not on its declaration in the trait",
            ),
            _ => error,
        };
        let error = error.to_compile_error();
        quote!(#error #item)
    })
}

/// The errors, and the original fn, so that its callers still compile. `key_roots`: the first
/// segments of the paths in the key expression the attribute named (`Uuid` of
/// `Uuid::new_v4()`), imported as `_` in the body so that the imports they resolve to stay
/// used and draw no second warning. Only the names, not the expression: a rejected key is not
/// type-checked again.
pub(crate) fn with_errors(func: &ItemFn, error: &syn::Error, key_roots: &[Ident]) -> TokenStream {
    let error = error.to_compile_error();
    if key_roots.is_empty() {
        return quote!(#error #func);
    }
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let stmts = &block.stmts;
    quote! {
        #error
        #(#attrs)*
        #vis #sig {
            #[allow(unused_imports)]
            use {#(#key_roots as _),*};
            #(#stmts)*
        }
    }
}

/// The fn with its body turned into the retry loop.
pub(crate) fn expand(config: &Config, func: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let locals = Locals::new();
    let ret = Ret::of(&sig);
    let site = site(config, &locals);
    if let Some(hedge) = &config.hedge {
        let attempt = attempt_future(config, &locals, &ret, &block);
        let hedged = hedge_expand::body(config, hedge, &locals, &ret, site, attempt);
        return quote!(#(#attrs)* #vis #sig { #hedged });
    }
    let init = retrier(config, &locals);
    let decide = decide(config, &locals, &ret, sig.asyncness.is_some());
    let (attempt, sleep) = attempt(config, &locals, &ret, sig.asyncness.is_some(), &block);
    let (enter, admit) = protect(config, &locals, &ret, sig.asyncness.is_some());
    let Locals {
        pause, out, inner, ..
    } = &locals;
    // A write with `hand_over` makes its retrier first: a call its bulkhead refuses is handed
    // over, and the hand-over needs the key. Otherwise the permit comes first, so that a
    // refused call is not counted as a call by the retry budget.
    // A read with `fallback` too: its refusals are recorded by the retrier, as fallbacks.
    let (enter, init) = match (&config.hand_over, &config.fallback) {
        (None, None) => (enter, init),
        _ => (init, enter),
    };
    quote! {
        #(#attrs)*
        #vis #sig {
            #site
            #enter
            #init
            // `loop` is spanned at the attribute: a borrow error about a by-value argument
            // moved "in the previous iteration of the loop" points at `#[retry]` as the loop.
            loop {
                #admit
                let #pause = {
                    // Each attempt runs in a scope that a `#[retry]` loop inside it marks when it
                    // gives up: then this loop does not retry the same failure again.
                    let (#out, #inner) = #attempt;
                    #decide
                };
                #sleep
            }
        }
    }
}

/// The call site's `static`: its label and policy, checked by the runtime in a const context,
/// and its entry in the runtime's link-time list of sites (for the configuration, which checks
/// a value against what each site compiled, and for the warning about unprotected sites).
pub(super) fn site(config: &Config, locals: &Locals) -> TokenStream {
    let (krate, site) = (&config.krate, &locals.site);
    let (system, operation) = (&config.system, &config.operation);
    let protect = config.protect.is_some();
    let (attempts, delay_ms, max_delay_ms) =
        (config.attempts, config.delay_ms, config.max_delay_ms);
    let jitter = match config.jitter {
        Jitter::Equal => quote!(Equal),
        Jitter::Full => quote!(Full),
        Jitter::None => quote!(None),
    };
    quote! {
        static #site: #krate::__private::Site = #krate::__private::site(
            #system, #operation, #attempts, #delay_ms, #max_delay_ms, #krate::Jitter::#jitter,
            #protect,
        );
        #krate::__private::inventory::submit! {
            #krate::__private::SiteEntry::new(&#site)
        }
    }
}

/// The retrier of this call: a read's, or a write's with its key evaluated once.
fn retrier(config: &Config, locals: &Locals) -> TokenStream {
    let Locals {
        site, retrier, key, ..
    } = locals;
    let krate = &config.krate;
    match &config.key {
        Some(expr) => {
            let krate = located_at(krate, expr.span());
            let value = Ident::new(
                "__retry_key_value",
                Span::mixed_site().located_at(expr.span()),
            );
            quote_spanned! {expr.span()=>
                // Evaluated once, borrowed (a temporary lives as long as the call).
                let #value = &(#expr);
                let #key = #krate::__private::key(#value);
                let mut #retrier = #krate::__private::Retrier::write(&#site, #key);
            }
        }
        None => quote! {
            let mut #retrier = #krate::__private::Retrier::read(&#site);
        },
    }
}

/// What to do with one attempt's result: return it, or the pause before the next attempt.
fn decide(config: &Config, locals: &Locals, ret: &Ret, is_async: bool) -> TokenStream {
    let Locals {
        retrier,
        out,
        err,
        pause,
        inner,
        ..
    } = locals;
    let (verdict, text) = verdict(config, locals, ret);
    let ret_span = ret.span;
    let krate_at_ret = located_at(&config.krate, ret_span);
    let out_at_ret = Ident::new("__retry_out", Span::mixed_site().located_at(ret_span));
    if let Some(expr) = &config.hand_over {
        return super::hand_over::decide(config, locals, ret, (verdict, text), expr, is_async);
    }
    if let Some(fallback) = &config.fallback {
        let pair = (verdict, text);
        return super::fallback_expand::decide(config, locals, ret, pair, fallback, is_async);
    }
    // The whole decision is spanned at the return type: if it is not a `Result`, or its error
    // type is not `Classify`, that is where the compiler points.
    quote_spanned! {ret_span=>
        match #krate_at_ret::__private::RetryResult::failure(&#out_at_ret) {
            ::core::option::Option::None => {
                #retrier.succeeded();
                return #out;
            }
            ::core::option::Option::Some(#err) => match #retrier.after_failure(#verdict, #inner, #text) {
                ::core::option::Option::Some(#pause) => #pause,
                ::core::option::Option::None => return #out,
            },
        }
    }
}

/// One attempt (the body in its own `async` block or closure, so that `return` and `?` end the
/// attempt, not the fn), and the pause after a failed one.
fn attempt(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    is_async: bool,
    block: &Block,
) -> (TokenStream, TokenStream) {
    let pause = &locals.pause;
    let krate = &config.krate;
    if !is_async {
        let ret = &ret.ty;
        return (
            quote!(#krate::__private::attempt_blocking(|| -> #ret #block)),
            quote!(#krate::__private::sleep_blocking(#pause);),
        );
    }
    let attempt = attempt_future(config, locals, ret, block);
    (
        quote!(#attempt.await),
        quote!(#krate::__private::sleep(#pause).await;),
    )
}

/// One async attempt's future: the body in its own `async` block (under `timeout`, if set), in
/// the wrapper that notices an inner loop giving up.
pub(super) fn attempt_future(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    block: &Block,
) -> TokenStream {
    let Locals { fake, value, .. } = locals;
    let (krate, ret) = (&config.krate, &ret.ty);
    let body = quote! {
        async {
            #[allow(
                unknown_lints,
                unreachable_code,
                clippy::diverging_sub_expression,
                clippy::empty_loop,
                clippy::let_unit_value,
                clippy::let_with_type_underscore,
                clippy::needless_return,
                clippy::unreachable
            )]
            if false {
                let #fake: #ret = loop {};
                return #fake;
            }
            // Bound, not left as the tail: a one-line body as the tail of this block would
            // trip `unused_braces` in the user's crate.
            let #value: #ret = #block;
            #value
        }
    };
    let body = match config.timeout {
        Some((ms, span)) => {
            let krate = located_at(krate, span);
            quote_spanned! {span=>
                #krate::__private::timed(
                    ::core::time::Duration::from_millis(#ms),
                    #krate::__private::from_timeout,
                    #body,
                )
            }
        }
        None => body,
    };
    quote!(#krate::__private::attempt(#body))
}

#[cfg(test)]
mod tests;
