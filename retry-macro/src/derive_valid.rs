//! `#[derive(Classify)]`, phase 2: what each `#[classify(...)]` means, and where it may go.
//!
//! A variant (or a struct) is `permanent` unless marked otherwise: deny by default, "if in
//! doubt: no retry" (R-RES-RE-1). Every refusal says what is wrong, why and the fix, points at
//! the offending tokens, and is collected with the others of the same derive.

use quote::ToTokens;
use syn::{Expr, ExprLit, Fields, Ident, Index, Lit, Member, Path, Type};

use crate::derive_args::{self, Arg, Data, Input, Parsed};
use crate::errors::Errors;
use crate::spans::at_call_site;

/// What the derive will write.
pub struct Derive<'a> {
    /// The type, with its generics.
    pub input: &'a Input,
    /// Path of the runtime crate.
    pub krate: Path,
    /// The verdict of each variant, or of the struct.
    pub shape: Shape<'a>,
}

/// The verdicts of the type.
pub enum Shape<'a> {
    /// One per variant, in order.
    Enum(Vec<(&'a Ident, Verdict<'a>)>),
    /// The whole struct.
    Struct(Verdict<'a>),
}

/// How one variant, or the struct, is classified.
pub enum Verdict<'a> {
    /// Never retried (the default).
    Permanent,
    /// Retried, with the Retry-After hint held by this field, if any.
    Transient(Option<Target<'a>>),
    /// This field's own `Classify` verdict and hint.
    Delegate(Target<'a>),
}

/// A field the generated code reads.
pub struct Target<'a> {
    /// Its name, or its index in a tuple variant.
    pub member: Member,
    /// Its type.
    pub ty: &'a Type,
}

/// Read from `#[classify(...)]` on one item, before looking at its fields.
#[derive(Default)]
struct Options {
    kind: Option<(Kind, Ident)>,
    retry_after: Option<(Ident, Expr)>,
    krate: Option<Path>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Transient,
    Permanent,
    Delegate,
}

/// Where an attribute is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On an enum: only `crate` goes there.
    Enum,
    /// On a struct: everything goes there.
    Struct,
    /// On a variant.
    Variant,
}

const OPTIONS: &str = "the options are `transient`, `permanent` (the default), `delegate`, `retry_after = field` and, on the type, `crate = \"path\"`";

/// Applies the rules to the parsed attributes and the type's fields; every error at once.
pub fn check(input: &Input, parsed: Parsed) -> syn::Result<Derive<'_>> {
    let mut errors = Errors::default();
    let subject = |ident: &Ident| format!("`{ident}`");
    let (krate, shape) = match &input.data {
        Data::Enum(variants) => {
            let container = options(&mut errors, parsed.container, Place::Enum);
            let verdicts = variants
                .iter()
                .zip(parsed.variants)
                .map(|(variant, args)| {
                    let options = options(&mut errors, args, Place::Variant);
                    let verdict = verdict(
                        &mut errors,
                        &subject(&variant.ident),
                        &variant.fields,
                        options,
                    );
                    (&variant.ident, verdict)
                })
                .collect();
            (container.krate, Some(Shape::Enum(verdicts)))
        }
        Data::Struct(fields) => {
            let mut container = options(&mut errors, parsed.container, Place::Struct);
            let krate = container.krate.take();
            let verdict = verdict(&mut errors, &subject(&input.ident), fields, container);
            (krate, Some(Shape::Struct(verdict)))
        }
        Data::Union(union_token, _) => {
            errors.at(
                union_token,
                "`#[derive(Classify)]` cannot classify a union: nothing tells which of its fields holds the error. Use an enum (thiserror style), or implement `Classify` by hand",
            );
            (None, None)
        }
    };
    for attr in &parsed.on_fields {
        errors.at(
            attr,
            "`#[classify]` goes on the variant (or the struct), not on a field: `#[classify(transient, retry_after = field)]` names the field that holds the hint, `#[classify(delegate)]` forwards to the only field",
        );
    }
    errors.finish()?;
    Ok(Derive {
        input,
        krate: krate.unwrap_or_else(|| syn::parse_quote!(::retry_runtime)),
        shape: shape.expect("a union is refused above"),
    })
}

/// The runtime crate's path for the impl written next to the errors, so that the type's users
/// do not fail too: `None` when `crate = "..."` is there but unusable.
pub fn fallback_crate(input: &Input) -> Option<Path> {
    let mut krate = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("classify")) {
        let args = derive_args::args_of(attr).ok()?;
        for arg in args {
            if let Arg::Pair { name, value } = arg {
                if name == "crate" {
                    krate = Some(crate_path(&value)?);
                }
            }
        }
    }
    Some(krate.unwrap_or_else(|| syn::parse_quote!(::retry_runtime)))
}

/// The meaning of each argument on one item, ignoring its fields.
fn options(errors: &mut Errors, args: Vec<Arg>, place: Place) -> Options {
    let mut options = Options::default();
    let mut seen: Vec<Ident> = Vec::new();
    for arg in args {
        let (name, value) = match arg {
            Arg::Word(name) => (name, None),
            Arg::Pair { name, value } => (name, Some(value)),
        };
        let label = name.to_string();
        if seen.contains(&name) {
            let value = if value.is_some() { " = ..." } else { "" };
            errors.at(
                &name,
                format!("`{label}` is given twice: keep one `{label}{value}`"),
            );
            continue;
        }
        seen.push(name.clone());
        let kind = match label.as_str() {
            "transient" => Kind::Transient,
            "permanent" => Kind::Permanent,
            "delegate" => Kind::Delegate,
            "retry_after" => {
                match value {
                    None => errors.at(
                        &name,
                        "`retry_after` names the field that holds the Retry-After hint: `retry_after = field`, or `retry_after = 0` in a tuple variant",
                    ),
                    Some(_) if place == Place::Enum => errors.at(
                        &name,
                        "`retry_after` goes on the variant that carries the hint, not on the enum: `#[classify(transient, retry_after = field)]`",
                    ),
                    Some(value) => options.retry_after = Some((name, value)),
                }
                continue;
            }
            "crate" => {
                match value {
                    None => errors.at(
                        &name,
                        "`crate` takes the path of the runtime crate as a string, like `crate = \"my_retry\"`",
                    ),
                    Some(_) if place == Place::Variant => errors.at(
                        &name,
                        "`crate` goes on the type, not on a variant: `#[classify(crate = \"my_retry\")]` above the enum",
                    ),
                    Some(value) => match crate_path(&value) {
                        Some(path) => options.krate = Some(path),
                        None => errors.at(
                            &value,
                            "`crate` takes the path of the runtime crate as a string, like `crate = \"my_retry\"`",
                        ),
                    },
                }
                continue;
            }
            _ => {
                errors.at(
                    &name,
                    format!("unknown option `{label}` in `#[classify]`: {OPTIONS}"),
                );
                continue;
            }
        };
        if value.is_some() {
            errors.at(
                &name,
                format!("`{label}` takes no value: write `#[classify({label})]`"),
            );
            continue;
        }
        if place == Place::Enum {
            errors.at(
                &name,
                format!(
                    "`{label}` goes on the variants, not on the enum: mark each variant that is worth another attempt `#[classify(transient)]`; the others are permanent (if in doubt: no retry, R-RES-RE-1)"
                ),
            );
            continue;
        }
        match &options.kind {
            None => options.kind = Some((kind, name)),
            Some((_, first)) if kind == Kind::Delegate || first == "delegate" => {
                let other = if kind == Kind::Delegate { first } else { &name };
                errors.at(
                    &name,
                    format!(
                        "`delegate` takes the verdict and the hint from the field, so it cannot go with `{other}`: keep one"
                    ),
                );
            }
            Some((_, first)) => errors.at(
                &name,
                format!(
                    "`{first}` and `{name}` together: an error is either worth another attempt or not; keep one"
                ),
            ),
        }
    }
    options
}

/// The verdict of one variant (or struct) given its fields.
fn verdict<'a>(
    errors: &mut Errors,
    subject: &str,
    fields: &'a Fields,
    options: Options,
) -> Verdict<'a> {
    let Options {
        kind, retry_after, ..
    } = options;
    // The field is looked up unless `delegate` makes `retry_after` moot.
    let hint = |errors: &mut Errors| {
        retry_after
            .as_ref()
            .and_then(|(_, value)| field(errors, subject, fields, value))
    };
    match kind {
        Some((Kind::Transient, _)) => Verdict::Transient(hint(errors)),
        Some((Kind::Delegate, word)) => {
            if let Some((name, _)) = &retry_after {
                errors.at(
                    name,
                    "`delegate` already forwards the field's own Retry-After hint: remove `retry_after`",
                );
            }
            match only_field(errors, subject, fields, &word) {
                Some(target) => Verdict::Delegate(target),
                None => Verdict::Permanent,
            }
        }
        Some((Kind::Permanent, word)) => {
            hint(errors);
            if let Some((name, value)) = &retry_after {
                errors.at(
                    name,
                    format!(
                        "`retry_after` on a `{word}` error: it is never retried, so its hint would never be used. Replace `{word}` with `transient`: `#[classify(transient, retry_after = {})]`, or remove `retry_after`",
                        value.to_token_stream()
                    ),
                );
            }
            Verdict::Permanent
        }
        None => {
            hint(errors);
            if let Some((name, value)) = &retry_after {
                errors.at(
                    name,
                    format!(
                        "`retry_after` without `transient`: {subject} is permanent by default (if in doubt: no retry, R-RES-RE-1), never retried, so its hint would never be used. Add `transient`: `#[classify(transient, retry_after = {})]`",
                        value.to_token_stream()
                    ),
                );
            }
            Verdict::Permanent
        }
    }
}

/// The field named by `retry_after = value`.
fn field<'a>(
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
fn only_field<'a>(
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
fn names(fields: &Fields) -> String {
    let names: Vec<String> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            f.ident
                .as_ref()
                .map_or_else(|| format!("`{i}`"), |ident| format!("`{ident}`"))
        })
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => "none".to_owned(),
    }
}

/// The path in `crate = "path"`, as if written at the derive: it resolves there, and lints such
/// as `unused_qualifications` treat it as generated, not as the user's string.
fn crate_path(value: &Expr) -> Option<Path> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        return None;
    };
    lit.parse_with(Path::parse_mod_style)
        .ok()
        .map(|path| at_call_site(&path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proc_macro2::TokenStream;
    use quote::quote;

    fn errors(item: TokenStream) -> Vec<String> {
        let input: Input = syn::parse2(item).unwrap();
        let parsed = derive_args::parse(&input).unwrap();
        match check(&input, parsed) {
            Ok(_) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn unmarked_variants_are_permanent() {
        let input: Input = syn::parse2(quote!(
            enum E {
                A,
                #[classify(transient)]
                B,
            }
        ))
        .unwrap();
        let derive =
            check(&input, derive_args::parse(&input).unwrap()).unwrap_or_else(|e| panic!("{e}"));
        let Shape::Enum(variants) = &derive.shape else {
            panic!("an enum");
        };
        assert!(matches!(variants[0].1, Verdict::Permanent));
        assert!(matches!(variants[1].1, Verdict::Transient(None)));
    }

    #[test]
    fn every_error_of_one_derive_is_reported() {
        let found = errors(quote! {
            #[classify(transient)]
            enum E {
                #[classify(transient, permanent)]
                A,
                #[classify(delegate)]
                B,
                #[classify(retry_after = x)]
                C { x: Duration },
                #[classify(nope)]
                D,
            }
        });
        assert_eq!(found.len(), 5, "{found:#?}");
        assert!(found[0].starts_with("`transient` goes on the variants"));
        assert!(found[1].starts_with("`transient` and `permanent` together"));
        assert!(found[2].contains("but `B` has no fields"));
        assert!(found[3].starts_with("`retry_after` without `transient`"));
        assert!(found[4].starts_with("unknown option `nope`"));
    }

    #[test]
    fn retry_after_names_a_field_by_name_or_index() {
        assert!(
            errors(quote! {
                enum E {
                    #[classify(transient, retry_after = hint)]
                    A { hint: Duration },
                    #[classify(transient, retry_after = 1)]
                    B(u16, Duration),
                }
            })
            .is_empty()
        );
        let found = errors(quote! {
            enum E {
                #[classify(transient, retry_after = 0)]
                A { hint: Duration },
                #[classify(transient, retry_after = hint)]
                B(Duration),
                #[classify(transient, retry_after = self.hint)]
                C { hint: Duration },
            }
        });
        assert_eq!(
            found,
            [
                "`A` has no field `0`: its fields are `hint`",
                "`B` has no field `hint`: its fields are `0` (a tuple variant's fields are named by index, like `retry_after = 0`)",
                "`retry_after` takes the field that holds the hint: its name, like `retry_after = retry_after`, or in a tuple variant its index, like `retry_after = 1`",
            ]
        );
    }

    #[test]
    fn delegate_with_retry_after_is_one_error_not_two() {
        let found = errors(quote! {
            enum E {
                #[classify(delegate, retry_after = nowhere)]
                A(std::io::Error),
            }
        });
        assert_eq!(
            found,
            ["`delegate` already forwards the field's own Retry-After hint: remove `retry_after`"]
        );
    }

    #[test]
    fn crate_is_read_on_the_type_only() {
        assert!(
            errors(quote! {
                #[classify(crate = "my_rt::inner")]
                enum E { A }
            })
            .is_empty()
        );
        let found = errors(quote! {
            #[classify(crate = my_rt)]
            enum E {
                #[classify(crate = "my_rt")]
                A,
            }
        });
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0].starts_with("`crate` takes the path of the runtime crate as a string"));
        assert!(found[1].starts_with("`crate` goes on the type"));
    }

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
