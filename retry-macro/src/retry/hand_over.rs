//! Phase 3b: the decision of a keyed write with `hand_over = <expr>`. When its in-memory
//! attempts give up on a transient error, a 429 asks it to wait, or (with `protect`) its
//! system's breaker or bulkhead refuses it, the expression hands the work to a durable queue,
//! with the cause ambient (the task records why); the runtime records what became of the work
//! (`handed_over`, `already_queued`, `already_done`, `hand_over_refused`, or the give-up when the
//! hand-over failed), and the fn returns the error either way: this call did not do the work.
//! The error carries the news in its chain if its type can (`CarryHandOver`).

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::Ident;
use syn::spanned::Spanned as _;

use super::locals::{Locals, Ret};
use super::valid::Config;
use super::verdict::verdict;

/// The local holding a [`HandOff`](retry_runtime::__private::HandOff): why, and when due.
pub(super) fn off_local() -> Ident {
    Ident::new("__retry_off", Span::mixed_site())
}

/// `expand::decide` for a write with `hand_over = expr`: when the loop gives up, the work is
/// handed over ([`tail`]).
pub(super) fn decide(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    (verdict, text): (TokenStream, TokenStream),
    expr: &syn::Expr,
    is_async: bool,
) -> TokenStream {
    let Locals { retrier, inner, .. } = locals;
    let (krate, ret_span) = (&config.krate, ret.span);
    let judge = quote_spanned! {ret_span=>
        #retrier.after_failure_or_hand_over(#verdict, #inner, #text)
    };
    let off = off_local();
    let tail = tail(config, locals, ret, expr, is_async);
    let ending = quote_spanned! {ret_span=>
        #krate::__private::Next::HandOver(#off) => { #tail }
    };
    super::ending::decide(config, locals, ret, (judge, "Next"), ending)
}

/// The hand-over itself, ending the fn: with the failed result in `out` and the
/// [`off_local`] in scope, `expr` runs (awaited in an async fn) once the error's borrow has
/// ended, with the cause ambient, and the retrier records what it did before the error is
/// returned. Used where the loop gives up ([`decide`]) and where `protect` refuses the call.
pub(super) fn tail(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    expr: &syn::Expr,
    is_async: bool,
) -> TokenStream {
    let Locals {
        retrier, out, err, ..
    } = locals;
    let (_, text) = verdict(config, locals, ret);
    let krate = &config.krate;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let (cause, handed, news, off) = (
        local("__retry_cause"),
        local("__retry_handed"),
        local("__retry_news"),
        off_local(),
    );
    let run = if is_async {
        quote_spanned!(expr.span()=> #krate::__private::in_hand_over(#cause, #expr).await)
    } else {
        quote_spanned!(expr.span()=> #krate::__private::in_hand_over_sync(#cause, || #expr))
    };
    let record = quote_spanned! {expr.span()=>
        #retrier.handed_over::<_>(#off, &#handed, #text)
    };
    quote_spanned! {ret.span=>
        // The cause (why, the error, when due) is ambient while the hand-over runs: a task
        // enqueued there records it, and names the fn's system unless it names its own.
        let #cause = #retrier.cause(#off, match #krate::__private::RetryResult::failure(&#out) {
            ::core::option::Option::Some(#err) => ::core::option::Option::Some(#text),
            ::core::option::Option::None => ::core::option::Option::None,
        });
        let #handed = #run;
        let #news = match #krate::__private::RetryResult::failure(&#out) {
            ::core::option::Option::Some(#err) => #record,
            ::core::option::Option::None => ::core::option::Option::None,
        };
        // The news (queued, done or refused) in the error's chain (`retry_runtime::handed_over`,
        // `hand_over_news`), when its type can carry it (`CarryHandOver`); else as it was.
        if let ::core::option::Option::Some(#news) = #news {
            #[allow(unused_imports)]
            use #krate::__private::{MarkCarried as _, MarkNothing as _};
            return (&&#krate::__private::Mark::new(#out)).mark(#news);
        }
        return #out;
    }
}
