//! Phase 3: the decision of a loop whose give-up may end in a tail of its own (a hand-over, a
//! fallback), shared by [`super::hand_over`] and [`super::fallback_expand`]: the retrier's
//! answer has the plain loop's `Pause` and `Return`, and a third that runs the tail.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::Ident;

use super::locals::{Locals, Ret};
use super::valid::Config;
use crate::common::spans::located_at;

/// `judge` (the retrier's call on the failure bound to `err`, spanned at the return type)
/// answers a `__private::<next>`; its `Pause` and `Return` are the plain loop's, and `ending`
/// is the arm of its third answer.
pub(super) fn decide(
    config: &Config,
    locals: &Locals,
    ret: &Ret,
    (judge, next): (TokenStream, &str),
    ending: TokenStream,
) -> TokenStream {
    let Locals {
        retrier,
        out,
        err,
        pause,
        ..
    } = locals;
    let (krate, ret_span) = (&config.krate, ret.span);
    let krate_at_ret = located_at(krate, ret_span);
    let out_at_ret = Ident::new("__retry_out", Span::mixed_site().located_at(ret_span));
    let answer = Ident::new("__retry_next", Span::mixed_site());
    let next = Ident::new(next, Span::call_site());
    // Spanned at the return type: if it is not a `Result`, or its error type is not
    // `Classify`, that is where the compiler points.
    quote_spanned! {ret_span=>
        let #answer = match #krate_at_ret::__private::RetryResult::failure(&#out_at_ret) {
            ::core::option::Option::None => {
                #retrier.succeeded();
                return #out;
            }
            ::core::option::Option::Some(#err) => {
                #judge
            }
        };
        match #answer {
            #krate::__private::#next::Pause(#pause) => #pause,
            #krate::__private::#next::Return => return #out,
            #ending
        }
    }
}
