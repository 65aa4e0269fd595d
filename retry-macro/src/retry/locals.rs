//! What every piece of the expansion shares: the generated locals and the fn's return type.
//! A bottom-layer file: the plain loop (`expand.rs`), the hedged one (`hedge_expand.rs`), the
//! hand-over (`hand_over.rs`) and the verdict (`verdict.rs`) all read it, and it reads none of them.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::spanned::Spanned as _;
use syn::{Ident, ReturnType, Signature};

/// The generated locals: `Span::mixed_site()`, so the body can neither see nor shadow them.
pub(crate) struct Locals {
    pub(crate) site: Ident,
    pub(crate) retrier: Ident,
    pub(crate) key: Ident,
    pub(crate) out: Ident,
    pub(crate) err: Ident,
    pub(crate) pause: Ident,
    pub(crate) fake: Ident,
    pub(crate) value: Ident,
    pub(crate) inner: Ident,
}

impl Locals {
    pub(crate) fn new() -> Self {
        let local = |name: &str| Ident::new(name, Span::mixed_site());
        Locals {
            site: local("__RETRY_SITE"),
            retrier: local("__retry"),
            key: local("__retry_key"),
            out: local("__retry_out"),
            err: local("__retry_err"),
            pause: local("__retry_pause"),
            fake: local("__retry_fake_return"),
            value: local("__retry_value"),
            inner: local("__retry_inner_gave_up"),
        }
    }
}

/// The fn's return type, and where to blame a type error about it.
pub(crate) struct Ret {
    pub(crate) ty: TokenStream,
    pub(crate) span: Span,
}

impl Ret {
    /// The return type of `sig` (`()` when it has none, blamed on the fn's name).
    pub(crate) fn of(sig: &Signature) -> Self {
        match &sig.output {
            ReturnType::Type(_, ty) => Ret {
                ty: ty.to_token_stream(),
                span: ty.span(),
            },
            ReturnType::Default => Ret {
                ty: quote!(()),
                span: sig.ident.span(),
            },
        }
    }
}
