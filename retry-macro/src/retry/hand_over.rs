//! Phase 3b: the decision of a keyed write with `hand_over = <expr>`. When its in-memory
//! attempts give up on a transient error, the expression hands the work to a durable queue;
//! the runtime records `handed_over` (WARN) when the work is safe there, the give-up (ERROR) when
//! it is not, and the fn returns the error either way: the work is not done yet. When it is safe
//! in the queue, the error carries a `HandedOver` in its chain if its type can
//! (`CarryHandOver`).

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::Ident;
use syn::spanned::Spanned as _;

use super::locals::{Locals, Ret};
use super::valid::Config;
use crate::common::spans::located_at;

/// `expand::decide` for a write with `hand_over = expr`: when the loop gives up on a transient error,
/// `expr` runs (awaited in an async fn) once the error's borrow has ended, and the retrier
/// records what it did before the error is returned.
pub(super) fn decide(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    (verdict, text): (TokenStream, TokenStream),
    expr: &syn::Expr,
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
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let (next, reason, handed, task) = (
        local("__retry_next"),
        local("__retry_reason"),
        local("__retry_handed"),
        local("__retry_task"),
    );
    // The hand-over runs with the site's system as the ambient one: a task it enqueues
    // without a system of its own names it (`retry_runtime::durable::Task::system`).
    let run = if is_async {
        quote_spanned!(expr.span()=> #krate::__private::in_system(#retrier.system(), #expr).await)
    } else {
        quote_spanned!(expr.span()=> #krate::__private::in_system_sync(#retrier.system(), || #expr))
    };
    let record = quote_spanned! {expr.span()=>
        #retrier.handed_over::<_>(#reason, &#handed, #text)
    };
    quote_spanned! {ret_span=>
        let #next = match #krate_at_ret::__private::RetryResult::failure(&#out_at_ret) {
            ::core::option::Option::None => {
                #retrier.succeeded();
                return #out;
            }
            ::core::option::Option::Some(#err) => {
                #retrier.after_failure_or_hand_over(#verdict, #inner, #text)
            }
        };
        match #next {
            #krate::__private::Next::Pause(#pause) => #pause,
            #krate::__private::Next::Return => return #out,
            #krate::__private::Next::HandOver(#reason) => {
                let #handed = #run;
                let #task = match #krate::__private::RetryResult::failure(&#out) {
                    ::core::option::Option::Some(#err) => #record,
                    ::core::option::Option::None => ::core::option::Option::None,
                };
                // Safe in the queue: the error says so in its chain (`retry_runtime::handed_over`),
                // when its type can carry it (`CarryHandOver`); else it is returned as it was.
                if let ::core::option::Option::Some(#task) = #task {
                    #[allow(unused_imports)]
                    use #krate::__private::{MarkCarried as _, MarkNothing as _};
                    return (&&#krate::__private::Mark::new(#out)).mark(&#task);
                }
                return #out;
            }
        }
    }
}
