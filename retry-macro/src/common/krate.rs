//! The one parser of `crate = "path"`, the path of the runtime crate when it is renamed (tokio's
//! `crate = "…"`, serde's `#[serde(crate = "…")]`), for `#[retry]` and `#[classify]` alike.

use syn::{Expr, LitStr, Path};

use crate::common::args::{lit_str, ungroup};
use crate::common::spans::at_call_site;

/// What `crate` takes, said when the string holds no path.
pub(crate) const USAGE: &str =
    "`crate` takes the path of the runtime crate as a string, like `crate = \"my_retry\"`";

/// The path the generated code names the runtime by when no `crate = "…"` is given.
pub(crate) fn default() -> Path {
    syn::parse_quote!(::retry_runtime)
}

/// Why a `crate = value` was refused.
pub(crate) enum Refused<'a> {
    /// The value is not a string literal (read through `macro_rules!` groups).
    NotAString(&'a Expr),
    /// The string holds no module path.
    NotAPath(&'a LitStr),
}

/// The path in `crate = "path"`, as if written at the attribute: it resolves there, and lints
/// such as `unused_qualifications` treat it as generated code, not as the user's string.
/// Mod-style: no generic arguments (`a<b>` would not parse where the expansion puts the path).
pub(crate) fn parse(value: &Expr) -> Result<Path, Refused<'_>> {
    let lit = lit_str(value).ok_or(Refused::NotAString(ungroup(value)))?;
    lit.parse_with(Path::parse_mod_style)
        .map(|path| at_call_site(&path))
        .map_err(|_| Refused::NotAPath(lit))
}
