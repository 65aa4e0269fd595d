//! `#[derive(Classify)]`, phase 3c: the methods other than `is_transient` and `retry_after`,
//! written only when some variant (or the struct) answers other than the trait's default
//! (`false`): `is_rejection` from a delegated field, `is_client_error` from a delegated field
//! or a `#[classify(client_error)]` variant (a 4xx, R-RES-RE-X2).

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Ident, Path};

use super::bindings::{delegate, fields};
use super::valid::{Shape, Verdict};

/// `method` (`is_rejection`, `is_client_error`) when a delegated field may say so; `None` keeps
/// the trait's default (`false`): only a wrapped error (a circuit breaker's, a `StatusError`) can
/// say it.
pub(super) fn forwarded(krate: &Path, shape: &Shape, method: &str) -> Option<TokenStream> {
    let body = match shape {
        Shape::Struct(Verdict::Delegate(inner)) => {
            let (fields, call) = (fields(inner), delegate(krate, inner, method));
            quote! {
                let Self #fields = self;
                #call
            }
        }
        Shape::Struct(_) => return None,
        Shape::Enum(variants) => {
            let arms: Vec<TokenStream> = variants
                .iter()
                .filter_map(|(variant, verdict)| match verdict {
                    Verdict::Delegate(inner) => {
                        let (fields, call) = (fields(inner), delegate(krate, inner, method));
                        Some(quote!(Self::#variant #fields => #call,))
                    }
                    _ => None,
                })
                .collect();
            if arms.is_empty() {
                return None;
            }
            let others = (arms.len() < variants.len()).then(|| quote!(_ => false,));
            quote! {
                match self {
                    #(#arms)*
                    #others
                }
            }
        }
    };
    let method = Ident::new(method, Span::call_site());
    Some(quote! {
        fn #method(&self) -> bool {
            #body
        }
    })
}

/// `is_client_error`: `true` for a `#[classify(client_error)]` variant (or struct), the field's
/// own answer for a delegated one, `false` for the others; `None` (the trait's default) when no
/// variant can say `true`.
pub(super) fn is_client_error(krate: &Path, shape: &Shape) -> Option<TokenStream> {
    let body = match shape {
        Shape::Struct(Verdict::ClientError) => quote!(true),
        Shape::Enum(variants)
            if variants
                .iter()
                .any(|(_, verdict)| matches!(verdict, Verdict::ClientError)) =>
        {
            let arms = variants.iter().map(|(variant, verdict)| match verdict {
                Verdict::ClientError => quote!(Self::#variant { .. } => true,),
                Verdict::Delegate(inner) => {
                    let (fields, call) = (fields(inner), delegate(krate, inner, "is_client_error"));
                    quote!(Self::#variant #fields => #call,)
                }
                _ => quote!(Self::#variant { .. } => false,),
            });
            quote! {
                match self {
                    #(#arms)*
                }
            }
        }
        _ => return forwarded(krate, shape, "is_client_error"),
    };
    Some(quote! {
        fn is_client_error(&self) -> bool {
            #body
        }
    })
}
