//! `#[derive(Classify)]`, phase 1: the grammar of `#[classify(...)]`.
//!
//! `#[classify(word, name = value, ...)]`: a comma-separated list of bare words (`transient`,
//! `permanent`, `delegate`) and `name = value` pairs (`retry_after = field`, `crate = "path"`),
//! on the type, its variants and (refused later) its fields. Several `#[classify]` attributes on
//! one item read as one list. Only syntax is checked here, for every attribute of the type at
//! once; what the words mean, and where they may go, is [`super::valid`]'s business.

use syn::punctuated::Punctuated;
use syn::{Attribute, Data, DeriveInput, Field, Token};

use crate::common::args::Arg;
use crate::common::errors::Errors;

/// The `#[classify]` arguments of the whole type.
pub(crate) struct Parsed {
    /// On the type itself.
    pub container: Vec<Arg>,
    /// On each variant of an enum, in order (empty for a struct or a union).
    pub variants: Vec<Vec<Arg>>,
    /// `#[classify]` attributes found on fields, where they have no meaning.
    pub on_fields: Vec<Attribute>,
}

/// Parses every `#[classify]` attribute of the type; all syntax errors at once.
pub(crate) fn parse(input: &DeriveInput) -> syn::Result<Parsed> {
    let mut errors = Errors::default();
    let container = args(&mut errors, &input.attrs);
    let (variants, fields): (Vec<Vec<Arg>>, Vec<&Field>) = match &input.data {
        Data::Enum(data) => (
            data.variants
                .iter()
                .map(|variant| args(&mut errors, &variant.attrs))
                .collect(),
            data.variants.iter().flat_map(|v| &v.fields).collect(),
        ),
        Data::Struct(data) => (Vec::new(), data.fields.iter().collect()),
        Data::Union(data) => (Vec::new(), data.fields.named.iter().collect()),
    };
    let on_fields = fields
        .into_iter()
        .flat_map(|field| field.attrs.iter().filter(|a| is_classify(a)).cloned())
        .collect();
    errors.finish()?;
    Ok(Parsed {
        container,
        variants,
        on_fields,
    })
}

pub(crate) fn is_classify(attr: &Attribute) -> bool {
    attr.path().is_ident("classify")
}

/// The arguments of the `#[classify(...)]` attributes among `attrs`; other attributes
/// (`#[error(...)]`, doc comments) are left alone.
fn args(errors: &mut Errors, attrs: &[Attribute]) -> Vec<Arg> {
    let mut parsed = Vec::new();
    for attr in attrs.iter().filter(|a| is_classify(a)) {
        match args_of(attr) {
            Ok(args) => parsed.extend(args),
            Err(error) => errors.push(error),
        }
    }
    parsed
}

/// The arguments of one `#[classify(...)]`.
pub(crate) fn args_of(attr: &Attribute) -> syn::Result<Vec<Arg>> {
    let list = attr.meta.require_list().map_err(|_| {
        syn::Error::new_spanned(
            attr,
            "`#[classify]` takes arguments in parentheses, like `#[classify(transient)]`",
        )
    })?;
    let args = list.parse_args_with(Punctuated::<Arg, Token![,]>::parse_terminated)?;
    Ok(args.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn parsed(item: proc_macro2::TokenStream) -> syn::Result<Parsed> {
        parse(&syn::parse2::<DeriveInput>(item).unwrap())
    }

    #[test]
    fn attributes_of_one_item_read_as_one_list_and_others_are_ignored() {
        let parsed = parsed(quote! {
            #[derive(Debug)]
            #[classify(crate = "rt")]
            enum E {
                /// Doc.
                #[error("timeout")]
                #[classify(transient)]
                #[classify(retry_after = 0)]
                A(u8),
                B,
            }
        })
        .unwrap();
        assert_eq!(parsed.container.len(), 1);
        assert_eq!(parsed.variants.len(), 2);
        assert!(matches!(
            parsed.variants[0].as_slice(),
            [Arg::Word(w), Arg::Pair { name, .. }] if w == "transient" && name == "retry_after"
        ));
        assert!(parsed.variants[1].is_empty());
    }

    #[test]
    fn syntax_errors_of_every_attribute_are_reported_together() {
        let error = parsed(quote! {
            enum E {
                #[classify(transient retry_after)]
                A,
                #[classify]
                B,
            }
        })
        .err()
        .unwrap();
        let messages: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].starts_with("expected `,` or `= value` after `transient`"));
        assert!(messages[1].starts_with("`#[classify]` takes arguments in parentheses"));
    }

    #[test]
    fn classify_attributes_on_fields_are_collected_for_validation() {
        let parsed = parsed(quote! {
            struct S {
                #[classify(transient)]
                a: u8,
            }
        })
        .unwrap();
        assert_eq!(parsed.on_fields.len(), 1);
    }
}
