//! Phase 3, shared by the plain loop ([`super::expand`]) and the hedged one
//! ([`super::hedge_expand`]): what the expansion asks the runtime about an error.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use super::locals::{Locals, Ret};
use super::valid::{Classifier, Config};
use crate::common::spans::located_at;

/// The verdict on the error `err` (`Classify`, or `retry_if`), and its text for the logs.
pub(super) fn verdict(config: &Config, locals: &Locals, ret: &Ret) -> (TokenStream, TokenStream) {
    let err = &locals.err;
    let krate = &config.krate;
    let ret_span = ret.span;
    let krate_at_ret = located_at(krate, ret_span);
    // The same hygiene, located at the return type, for the tokens a type error would blame.
    let err_at_ret = Ident::new("__retry_err", Span::mixed_site().located_at(ret_span));
    let verdict = match &config.classifier {
        Classifier::Classify => quote_spanned! {ret_span=>
            #krate_at_ret::__private::Verdict {
                transient: #krate_at_ret::Classify::is_transient(#err_at_ret),
                retry_after: #krate_at_ret::Classify::retry_after(#err_at_ret),
                rejection: #krate_at_ret::Classify::is_rejection(#err_at_ret),
            }
        },
        Classifier::RetryIf(path) => quote_spanned! {path.span()=>
            #krate::__private::Verdict {
                transient: (#path)(#err),
                retry_after: ::core::option::Option::None,
                rejection: false,
            }
        },
    };
    // The error's text for the logs: an `Error` with its sources, else `Display`, else `Debug`,
    // else none, picked by auto-ref specialisation. The traits are imported in this block only,
    // never in the user's body.
    let text = quote! {
        {
            use #krate::__private::{ViaDebug as _, ViaDisplay as _, ViaError as _, ViaNothing as _};
            (&&&&#krate::__private::Describe(#err)).describe()
        }
    };
    (verdict, text)
}
