//! `#[derive(Classify)]`, phase 2c: the fields `#[classify]` names, the one `retry_after = field`
//! reads the hint from and the one `delegate` forwards to, each refused with the fields there
//! are when it is not there.

use quote::ToTokens;
use syn::{Expr, ExprLit, Fields, Ident, Index, Lit, Member, Type};

use crate::common::args::prose;
use crate::common::errors::Errors;

/// A field the generated code reads.
pub(crate) struct Target<'a> {
    /// Its name, or its index in a tuple variant.
    pub member: Member,
    /// Its type.
    pub ty: &'a Type,
}

/// The field named by `retry_after = value`.
pub(super) fn field<'a>(
    errors: &mut Errors,
    subject: &str,
    fields: &'a Fields,
    value: &Expr,
) -> Option<Target<'a>> {
    let member = match value {
        Expr::Path(path) if path.qself.is_none() && path.path.get_ident().is_some() => {
            path.path.get_ident().cloned().map(Member::Named)
        }
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => int.base10_parse::<u32>().ok().map(|index| {
            Member::Unnamed(Index {
                index,
                span: int.span(),
            })
        }),
        _ => {
            errors.at(
                value,
                "`retry_after` takes the field that holds the hint: its name, like `retry_after = retry_after`, or in a tuple variant its index, like `retry_after = 1`",
            );
            return None;
        }
    };
    let found = member.and_then(|member| {
        let ty = fields
            .members()
            .zip(fields)
            .find(|(m, _)| *m == member)
            .map(|(_, f)| &f.ty)?;
        Some(Target { member, ty })
    });
    if found.is_none() {
        let value = value.to_token_stream();
        let message = match fields {
            Fields::Unit => format!(
                "{subject} has no fields, so none holds a hint: give it one, like `{} {{ retry_after: Option<Duration> }}`",
                subject.trim_matches('`')
            ),
            Fields::Named(_) => format!(
                "{subject} has no field `{value}`: its fields are {}",
                names(fields)
            ),
            Fields::Unnamed(_) => format!(
                "{subject} has no field `{value}`: its fields are {} (a tuple variant's fields are named by index, like `retry_after = 0`)",
                names(fields)
            ),
        };
        errors.at(value, message);
    }
    found
}

/// The one field `delegate` forwards to.
pub(super) fn only_field<'a>(
    errors: &mut Errors,
    subject: &str,
    fields: &'a Fields,
    word: &Ident,
) -> Option<Target<'a>> {
    let mut iter = fields.iter();
    match (iter.next(), iter.next()) {
        (Some(field), None) => Some(Target {
            member: field
                .ident
                .clone()
                .map_or_else(|| Member::Unnamed(Index::from(0)), Member::Named),
            ty: &field.ty,
        }),
        (None, _) => {
            errors.at(
                word,
                format!(
                    "`delegate` forwards the verdict of the one field that holds the inner error, but {subject} has no fields: mark it `transient` or `permanent`, or give it the inner error, like `{}(inner)`",
                    subject.trim_matches('`')
                ),
            );
            None
        }
        (Some(_), Some(_)) => {
            errors.at(
                word,
                format!(
                    "`delegate` forwards the verdict of the one field that holds the inner error, but {subject} has {} fields ({}), so it cannot tell which: keep the inner error as its only field, or mark it `transient` or `permanent`",
                    fields.len(),
                    names(fields)
                ),
            );
            None
        }
    }
}

/// "`a`, `b` and `c`", or "`0` and `1`".
pub(super) fn names(fields: &Fields) -> String {
    prose(fields.iter().enumerate().map(|(i, f)| {
        f.ident
            .as_ref()
            .map_or_else(|| i.to_string(), Ident::to_string)
    }))
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;

    use super::*;

    #[test]
    fn field_lists_read_as_prose() {
        let fields = |item: TokenStream| syn::parse2::<syn::ItemStruct>(item).unwrap().fields;
        assert_eq!(
            names(&fields(quote!(
                struct S {
                    a: u8,
                }
            ))),
            "`a`"
        );
        assert_eq!(
            names(&fields(quote!(
                struct S(u8, u8, u8);
            ))),
            "`0`, `1` and `2`"
        );
        assert_eq!(
            names(&fields(quote!(
                struct S;
            ))),
            "none"
        );
    }
}
