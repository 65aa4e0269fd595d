//! `#[derive(Classify)]`, phase 2: what each `#[classify(...)]` means, and where it may go.
//!
//! A variant (or a struct) is `permanent` unless marked otherwise: deny by default, "if in
//! doubt: no retry" (R-RES-RE-1). Every refusal says what is wrong, why and the fix, points at
//! the offending tokens, and is collected with the others of the same derive.

use quote::ToTokens;
use syn::{Attribute, Data, DeriveInput, Fields, Ident, Path};

use super::args::{self, Parsed};
pub(crate) use super::fields::Target;
use super::fields::{field, only_field};
use super::options::{self, Kind, Options, Place};
use crate::common::args::Arg;
use crate::common::errors::Errors;
use crate::common::krate;

/// What the derive will write.
pub(crate) struct Derive<'a> {
    /// The type, with its generics.
    pub input: &'a DeriveInput,
    /// Path of the runtime crate.
    pub krate: Path,
    /// The verdict of each variant, or of the struct.
    pub shape: Shape<'a>,
}

/// The verdicts of the type.
pub(crate) enum Shape<'a> {
    /// One per variant, in order.
    Enum(Vec<(&'a Ident, Verdict<'a>)>),
    /// The whole struct.
    Struct(Verdict<'a>),
}

/// How one variant, or the struct, is classified.
pub(crate) enum Verdict<'a> {
    /// Never retried (the default).
    Permanent,
    /// Never retried, and a client error (a 4xx, R-RES-RE-X2): `#[classify(client_error)]`.
    ClientError,
    /// Retried, with the Retry-After hint held by this field, if any.
    Transient(Option<Target<'a>>),
    /// This field's own `Classify` verdict and hint.
    Delegate(Target<'a>),
}

/// Applies the rules to the parsed attributes and the type's fields; every error at once.
pub(crate) fn check(input: &DeriveInput, parsed: Parsed) -> syn::Result<Derive<'_>> {
    let mut errors = Errors::default();
    let subject = |ident: &Ident| format!("`{ident}`");
    let (krate, shape) = match &input.data {
        Data::Enum(data) => {
            let container = options::read(&mut errors, parsed.container, Place::Enum);
            let verdicts = data
                .variants
                .iter()
                .zip(parsed.variants)
                .map(|(variant, args)| {
                    let options = options::read(&mut errors, args, Place::Variant);
                    let verdict = verdict(
                        &mut errors,
                        &subject(&variant.ident),
                        &variant.fields,
                        options,
                        transparent(&variant.attrs),
                    );
                    (&variant.ident, verdict)
                })
                .collect();
            (container.krate, Some(Shape::Enum(verdicts)))
        }
        Data::Struct(data) => {
            let fields = &data.fields;
            let mut container = options::read(&mut errors, parsed.container, Place::Struct);
            let krate = container.krate.take();
            let transparent = transparent(&input.attrs);
            let verdict = verdict(
                &mut errors,
                &subject(&input.ident),
                fields,
                container,
                transparent,
            );
            (krate, Some(Shape::Struct(verdict)))
        }
        Data::Union(data) => {
            errors.at(
                data.union_token,
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
        krate: krate.unwrap_or_else(krate::default),
        shape: shape.expect("a union is refused above"),
    })
}

/// The runtime crate's path for the impl written next to the errors, so that the type's users
/// do not fail too: `None` when `crate = "..."` is there but unusable.
pub(crate) fn fallback_crate(input: &DeriveInput) -> Option<Path> {
    let mut path = None;
    for attr in input.attrs.iter().filter(|a| args::is_classify(a)) {
        for arg in args::args_of(attr).ok()? {
            if let Arg::Pair { name, value } = arg {
                if name == "crate" {
                    path = Some(krate::parse(&value).ok()?);
                }
            }
        }
    }
    Some(path.unwrap_or_else(krate::default))
}

/// thiserror's `#[error(transparent)]` among `attrs` (a derive sees the other derives' helper
/// attributes): the item says "I am my field's error".
fn transparent(attrs: &[Attribute]) -> Option<&Attribute> {
    attrs.iter().find(|attr| {
        attr.path().is_ident("error")
            && attr
                .parse_args::<Ident>()
                .is_ok_and(|word| word == "transparent")
    })
}

/// The verdict of one variant (or struct) given its fields; `transparent`: its
/// `#[error(transparent)]`, if it has one.
fn verdict<'a>(
    errors: &mut Errors,
    subject: &str,
    fields: &'a Fields,
    options: Options,
    transparent: Option<&Attribute>,
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
        Some((Kind::ClientError, _)) => {
            hint(errors);
            if let Some((name, _)) = &retry_after {
                errors.at(
                    name,
                    "`retry_after` on a `client_error`: a 4xx is never retried (R-RES-RE-X2), so its hint would never be used. Remove `retry_after`, or, if the other side asks to wait (a 429 or a 503), mark it `transient` instead",
                );
            }
            Verdict::ClientError
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
            if let Some(attr) = transparent {
                errors.at(
                    attr,
                    format!(
                        "{subject} is `#[error(transparent)]`: it is its field's error, yet unmarked it is classified permanent, so a 503 it wraps is never retried, and once boxed the field is hidden from the source chain (thiserror's `source()` skips it). Add `#[classify(delegate)]` to take the field's verdict and Retry-After hint (a 4xx stays a 4xx, R-RES-RE-X2), or `#[classify(permanent)]` if it is never worth another attempt"
                    ),
                );
            }
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

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;

    use super::*;

    fn errors(item: TokenStream) -> Vec<String> {
        let input: DeriveInput = syn::parse2(item).unwrap();
        let parsed = args::parse(&input).unwrap();
        match check(&input, parsed) {
            Ok(_) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn unmarked_variants_are_permanent() {
        let input: DeriveInput = syn::parse2(quote!(
            enum E {
                A,
                #[classify(transient)]
                B,
            }
        ))
        .unwrap();
        let derive = check(&input, args::parse(&input).unwrap()).unwrap_or_else(|e| panic!("{e}"));
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
}
