//! `#[derive(Classify)]`, phase 2a: the `#[classify(...)]` arguments of one item (the type or a
//! variant) read into [`Options`], each on its own: a second value of an option is refused, and
//! so is an option in a place it cannot go. What they mean given the item's fields is
//! [`super::valid`]'s business.

use syn::{Expr, Ident, Path};

use crate::common::args::Arg;
use crate::common::errors::Errors;
use crate::common::krate;

/// Read from `#[classify(...)]` on one item, before looking at its fields.
#[derive(Default)]
pub(super) struct Options {
    /// `transient`, `permanent`, `client_error` or `delegate`, with the word to blame.
    pub kind: Option<(Kind, Ident)>,
    /// `retry_after = field`, with the name to blame.
    pub retry_after: Option<(Ident, Expr)>,
    /// `crate = "path"`.
    pub krate: Option<Path>,
}

/// How an item is classified.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Transient,
    Permanent,
    /// Permanent, and a client error (a 4xx, R-RES-RE-X2): `Classify::is_client_error`.
    ClientError,
    Delegate,
}

/// Where an attribute is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// On an enum: only `crate` goes there.
    Enum,
    /// On a struct: everything goes there.
    Struct,
    /// On a variant.
    Variant,
}

const OPTIONS: &str = "the options are `transient`, `permanent` (the default), `client_error` (a 4xx: permanent, R-RES-RE-X2), `delegate`, `retry_after = field` and, on the type, `crate = \"path\"`";

/// The meaning of each argument on one item, ignoring its fields.
pub(super) fn read(errors: &mut Errors, args: Vec<Arg>, place: Place) -> Options {
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
            "client_error" => Kind::ClientError,
            "delegate" => Kind::Delegate,
            "retry_after" => {
                read_retry_after(errors, &mut options, name, value, place);
                continue;
            }
            "crate" => {
                read_crate(errors, &mut options, &name, value, place);
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
        if kind_goes_here(errors, &name, value.as_ref(), kind, place) {
            add_kind(errors, &mut options, kind, name);
        }
    }
    options
}

/// `retry_after = field`: only with a value, and not on the enum.
fn read_retry_after(
    errors: &mut Errors,
    options: &mut Options,
    name: Ident,
    value: Option<Expr>,
    place: Place,
) {
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
}

/// `crate = "path"`: only with a value, and not on a variant.
fn read_crate(
    errors: &mut Errors,
    options: &mut Options,
    name: &Ident,
    value: Option<Expr>,
    place: Place,
) {
    match value {
        None => errors.at(name, krate::USAGE),
        Some(_) if place == Place::Variant => errors.at(
            name,
            "`crate` goes on the type, not on a variant: `#[classify(crate = \"my_retry\")]` above the enum",
        ),
        Some(value) => match krate::parse(&value) {
            Ok(path) => options.krate = Some(path),
            Err(_) => errors.at(&value, krate::USAGE),
        },
    }
}

/// Whether the word `kind` may stand here: it takes no value, and not on the enum.
fn kind_goes_here(
    errors: &mut Errors,
    name: &Ident,
    value: Option<&Expr>,
    kind: Kind,
    place: Place,
) -> bool {
    if value.is_some() {
        errors.at(
            name,
            format!("`{name}` takes no value: write `#[classify({name})]`"),
        );
        return false;
    }
    if place == Place::Enum && kind == Kind::ClientError {
        errors.at(
            name,
            "`client_error` goes on the variants, not on the enum: mark each variant that stands for a 4xx `#[classify(client_error)]` (R-RES-RE-X2)",
        );
        return false;
    }
    if place == Place::Enum {
        errors.at(
            name,
            format!(
                "`{name}` goes on the variants, not on the enum: mark each variant that is worth another attempt `#[classify(transient)]`; the others are permanent (if in doubt: no retry, R-RES-RE-1)"
            ),
        );
        return false;
    }
    true
}

/// Takes `kind` as the item's, unless it already has one it cannot go with.
fn add_kind(errors: &mut Errors, options: &mut Options, kind: Kind, name: Ident) {
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
        Some((first_kind, first)) if kind == Kind::ClientError || *first_kind == Kind::ClientError => {
            let other = if kind == Kind::ClientError { first } else { &name };
            let message = if other == "permanent" {
                "`client_error` is already permanent (a 4xx is never retried, R-RES-RE-X2): remove `permanent`".to_owned()
            } else {
                format!(
                    "`{other}` and `client_error` together: a client error (a 4xx) is a contract error on our side that repeating cannot fix, never worth another attempt (R-RES-RE-X2); keep one"
                )
            };
            errors.at(&name, message);
        }
        Some((_, first)) => errors.at(
            &name,
            format!(
                "`{first}` and `{name}` together: an error is either worth another attempt or not; keep one"
            ),
        ),
    }
}
