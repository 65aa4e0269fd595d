//! `#[derive(Classify)]`, phase 3b: the type's entry in the runtime's link-time registry, so that
//! the walk of a `Box<dyn Error>` or an `anyhow::Error` finds the type and asks its own verdict
//! (a boxed error has lost its type; the registry gives it back by downcast).
//!
//! Only a type without generics is registered: a generic one has no single type to downcast to
//! (and one with a lifetime is not `'static`, so it cannot be boxed as an error at all). A type
//! that is not an `Error` registers a probe that never matches (the runtime picks it by autoref
//! specialisation), so deriving `Classify` on a plain enum still compiles.

use proc_macro2::TokenStream;
use quote::quote;

use super::valid::Derive;

/// The registration, in an anonymous `const` so that nothing it names reaches the user's scope.
pub(super) fn register(derive: &Derive) -> Option<TokenStream> {
    if !derive.input.generics.params.is_empty() {
        return None;
    }
    let (krate, ident) = (&derive.krate, &derive.input.ident);
    Some(quote! {
        const _: () = {
            #[allow(unused_imports)]
            use #krate::__private::{DowncastError as _, DowncastNothing as _};
            fn __retry_classify_downcast<'e>(
                error: &'e (dyn ::std::error::Error + 'static),
            ) -> ::core::option::Option<&'e dyn #krate::Classify> {
                (&&#krate::__private::Downcast::<#ident>::new()).downcast(error)
            }
            #krate::__private::inventory::submit! {
                #krate::__private::Registered::new(__retry_classify_downcast)
            }
        };
    })
}
