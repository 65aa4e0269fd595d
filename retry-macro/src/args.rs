//! Phase 1: the grammar of the attribute's arguments.
//!
//! `#[retry(read | write, name = value, ...)]`: a comma-separated list of bare words (the kind)
//! and `name = expression` pairs. Only syntax is checked here; what the words and values mean
//! is [`crate::valid`]'s business, so that all of its errors can be reported at once.

use proc_macro2::TokenStream;
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream, Parser as _};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

/// One argument, of `#[retry(...)]` or `#[classify(...)]`.
pub enum Arg {
    /// A bare word: `read`, `write`, `transient`, ...
    Word(Ident),
    /// `name = value`.
    Pair {
        /// The option's name (`crate` included, although it is a keyword).
        name: Ident,
        /// The value, any expression.
        value: Expr,
    },
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = input.call(Ident::parse_any)?;
        if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            let value = input.parse()?;
            Ok(Arg::Pair { name, value })
        } else if input.is_empty() || input.peek(Token![,]) {
            Ok(Arg::Word(name))
        } else {
            Err(input.error(format!("expected `,` or `= value` after `{name}`")))
        }
    }
}

/// Parses the arguments in order.
pub fn parse(args: TokenStream) -> syn::Result<Vec<Arg>> {
    let args = Punctuated::<Arg, Token![,]>::parse_terminated.parse2(args)?;
    Ok(args.into_iter().collect())
}
