//! Phase 1: the grammar both attributes share.
//!
//! `#[retry(read | write, name = value, ...)]` and `#[classify(word, name = value, ...)]`: a
//! comma-separated list of bare words and `name = expression` pairs. Only syntax is checked
//! here; what the words and values mean is each macro's `valid` phase's business, so that all
//! of its errors can be reported at once. Also the few ways both read a value: through the
//! invisible groups of `macro_rules!`, as a string literal, and lists written as prose.

use proc_macro2::TokenStream;
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream, Parser as _};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Token};

/// One argument, of `#[retry(...)]` or `#[classify(...)]`.
pub(crate) enum Arg {
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
pub(crate) fn parse(args: TokenStream) -> syn::Result<Vec<Arg>> {
    let args = Punctuated::<Arg, Token![,]>::parse_terminated.parse2(args)?;
    Ok(args.into_iter().collect())
}

/// `value` without the invisible groups `macro_rules!` wraps around `$x:expr` fragments.
pub(crate) fn ungroup(mut value: &Expr) -> &Expr {
    while let Expr::Group(group) = value {
        value = &group.expr;
    }
    value
}

/// The string literal `value` is, if it is one (read through groups).
pub(crate) fn lit_str(value: &Expr) -> Option<&LitStr> {
    match ungroup(value) {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit),
        _ => None,
    }
}

/// The items as prose: "`a`, `b` and `c`", "`a`", or "none".
pub(crate) fn prose<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| format!("`{i}`")).collect();
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => "none".to_owned(),
    }
}

/// The option closest to `name`, if a typo away (two edits at most).
pub(crate) fn closest<'a>(name: &str, options: &[&'a str]) -> Option<&'a str> {
    options
        .iter()
        .map(|o| (strsim::levenshtein(name, o), *o))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, o)| o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_option() {
        assert_eq!(closest("atempts", &["attempts", "delay"]), Some("attempts"));
        assert_eq!(closest("max_attempts", &["attempts", "delay"]), None);
    }

    #[test]
    fn lists_read_as_prose() {
        assert_eq!(prose(["a"]), "`a`");
        assert_eq!(prose(0..3), "`0`, `1` and `2`");
        assert_eq!(prose(Vec::<String>::new()), "none");
    }
}
