//! Every error of one invocation, collected and reported together (serde_derive's `Ctxt`).

use std::fmt::Display;

use quote::ToTokens;

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Errors {
    first: Option<syn::Error>,
}

impl Errors {
    /// Adds an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
    }

    /// Adds an error pointing at `tokens`.
    pub(crate) fn at<T: ToTokens>(&mut self, tokens: T, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Adds an error at `span`.
    pub(crate) fn at_span(&mut self, span: proc_macro2::Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// `Err` with all of them, if there are any.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.first.map_or(Ok(()), Err)
    }
}
