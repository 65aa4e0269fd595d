//! Phase 2: the rules of `fallback` ([`check`]): a read's only (a write's fallback is the
//! durable queue, R-RES-RE-5), and `fallback_on` only beside it.

use super::fallback::Fallback;
use super::options::{Kind, Options};
use crate::common::errors::Errors;

/// A fallback only on a read (a write's is the queue, R-RES-RE-5), and `fallback_on` only with
/// a fallback.
pub(super) fn check(
    errors: &mut Errors,
    options: &Options,
    kind: Option<Kind>,
) -> Option<Fallback> {
    let settings = &options.fallback;
    if let (Some(on), None) = (&settings.on.name, &settings.expr.name) {
        errors.at(
            on,
            "`fallback_on` says when `fallback` answers, and there is no `fallback = <expr>`: add one, or remove `fallback_on`",
        );
    }
    let name = settings.expr.name.as_ref()?;
    if kind == Some(Kind::Write) {
        errors.at(
            name,
            "`fallback` is for a read: a write's fallback is the durable queue (R-RES-RE-5), `hand_over = <expr>` with its `idempotency_key`, which repeats the write later under its key; a made-up answer would tell the caller that a change happened when it did not. Replace `fallback` with `hand_over`",
        );
    }
    Some(Fallback {
        expr: settings.expr.value.clone()?,
        refused_only: settings.on.given().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use quote::quote;

    /// The messages `#[retry(<args>)]` on an async fn draws.
    fn messages(args: proc_macro2::TokenStream) -> Vec<String> {
        let func: syn::ItemFn = syn::parse_quote!(
            async fn f() -> Result<(), E> {
                Ok(())
            }
        );
        let checked = crate::common::args::parse(args)
            .and_then(|args| crate::retry::valid::check(args, &func));
        match checked {
            Ok(_) => Vec::new(),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_read_takes_a_fallback_and_fallback_on() {
        assert!(messages(quote!(read, fallback = async { Ok(()) })).is_empty());
        let args = quote!(read, fallback = async { Ok(()) }, fallback_on = "refused");
        assert!(messages(args).is_empty());
    }

    #[test]
    fn a_writes_fallback_names_hand_over() {
        let found = messages(quote!(
            write,
            idempotency_key = k,
            fallback = async { Ok(()) }
        ));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("`hand_over = <expr>`"), "{found:?}");
        assert!(found[0].contains("R-RES-RE-5"), "{found:?}");
    }

    #[test]
    fn fallback_on_needs_a_fallback_and_a_known_value() {
        let found = messages(quote!(read, fallback_on = "refused"));
        assert!(found[0].starts_with("`fallback_on` says when"), "{found:?}");
        let found = messages(quote!(
            read,
            fallback = async { Ok(()) },
            fallback_on = "often"
        ));
        assert!(found[0].starts_with("`fallback_on` is"), "{found:?}");
    }

    #[test]
    fn a_fallback_combines_with_hedge() {
        let found = messages(quote!(read, hedge = "20ms", fallback = async { Ok(()) }));
        assert_eq!(found, Vec::<String>::new());
    }
}
