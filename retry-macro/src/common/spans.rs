//! Spans for paths the user wrote inside a string (`crate = "path"`) and for generated calls
//! whose type errors should point at the user's tokens.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::Path;

/// `path` as if written at the attribute: it resolves there, and lints such as
/// `unused_qualifications` treat it as generated code, not as the user's string.
pub(crate) fn at_call_site(path: &Path) -> Path {
    let tokens = path.to_token_stream().into_iter().map(|mut token| {
        token.set_span(Span::call_site());
        token
    });
    syn::parse2(tokens.collect()).expect("a path re-parses as a path")
}

/// `path` located at `span`, so that a trait-bound error in a call through it points at the
/// user's tokens rather than at the attribute. It still resolves, and is linted, as generated
/// code (`unused_qualifications` must not fire on `crate = "crate::path"`).
pub(crate) fn located_at(path: &Path, span: Span) -> TokenStream {
    path.to_token_stream()
        .into_iter()
        .map(|mut token| {
            token.set_span(Span::call_site().located_at(span));
            token
        })
        .collect()
}
