//! Phase 3, the pieces both the `Classify` impl (`expand.rs`) and its optional methods
//! (`methods.rs`) write: the binding of a field the attributes named, and what is read from it.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Ident, Path};

use super::valid::Target;
use crate::common::spans::located_at;

/// The local bound to the field the generated code reads: hygienic, so that it cannot clash
/// with a field's name, and located at the field's type, so that a type error blames it.
fn binding(target: &Target) -> Ident {
    Ident::new(
        "__classify_field",
        Span::mixed_site().located_at(target.ty.span()),
    )
}

/// `{ field: binding, .. }`, the pattern that binds the field (by name or index).
pub(super) fn fields(target: &Target) -> TokenStream {
    let (member, binding) = (&target.member, binding(target));
    quote!({ #member: #binding, .. })
}

/// `Classify::method(field)`, blamed on the field's type if that is not `Classify`.
pub(super) fn delegate(krate: &Path, inner: &Target, method: &str) -> TokenStream {
    let span = inner.ty.span();
    let (krate, binding) = (located_at(krate, span), binding(inner));
    let method = Ident::new(method, span);
    quote_spanned!(span=> #krate::Classify::#method(#binding))
}

/// The hint held by a `Duration` or `Option<Duration>` field, blamed on the field's type if it
/// is neither.
pub(super) fn read_hint(krate: &Path, hint: &Target) -> TokenStream {
    let span = hint.ty.span();
    let (krate, binding) = (located_at(krate, span), binding(hint));
    quote_spanned!(span=> #krate::__private::Hint::hint(#binding))
}
