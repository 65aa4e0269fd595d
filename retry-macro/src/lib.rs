//! The `#[retry]` attribute and `#[derive(Classify)]` of
//! [`retry-runtime`](https://docs.rs/retry-runtime).
//!
//! Depend on `retry-runtime`, not on this crate: it re-exports both as `retry_runtime::retry`
//! and `retry_runtime::Classify`, and the code they generate calls into it.
//!
//! This file only dispatches. Each macro has a folder and works in three phases: its arguments
//! are parsed, checked against the retry rules (each error cites its rule id, all of them are
//! reported at once) and expanded: `retry/` for the attribute (`valid`, `expand`), `classify/`
//! for the derive (`args`, `valid`, `expand`). `common/` holds what both use: the argument
//! grammar, the `crate = "…"` parser, the error collector, spans and durations. The rules
//! themselves are the `retry-rules` crate, which the runtime's `Policy::new` applies too, so
//! that the attribute and the runtime cannot disagree.

mod classify;
mod common;
mod retry;

/// Random token streams through both pipelines (proptest); the vocabulary lives next to the
/// tests.
#[cfg(test)]
#[path = "../tests/hostile/mod.rs"]
mod hostile;

use proc_macro::TokenStream;

// The docs of both macros live in `retry-runtime/docs/` and are shown on its re-exports
// (`retry_runtime::retry`, `retry_runtime::Classify`), where its doctests run their examples:
// this crate cannot (it cannot depend on the runtime with the attribute enabled). rustdoc
// shows a re-export's docs followed by the item's own, so the item keeps one line.
/// Expands into a bounded, jittered, exponential-backoff retry loop that follows the retry
/// rules; documented, with every option, at `retry_runtime::retry`.
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    use retry::{expand, valid};
    let func = match expand::parse_fn(item.into()) {
        Ok(func) => func,
        Err(tokens) => return tokens.into(),
    };
    let args = match common::args::parse(args.into()) {
        Ok(args) => args,
        Err(error) => return expand::with_errors(&func, &error, &[]).into(),
    };
    // The names a key expression starts its paths with (say `Uuid` in `Uuid::new_v4()`), for
    // the fn re-emitted with an error: their imports must stay used, or they get a spurious
    // warning on top of the error.
    let key_roots: Vec<proc_macro2::Ident> = args
        .iter()
        .filter_map(|arg| match arg {
            common::args::Arg::Pair { name, value } if name == "idempotency_key" => {
                Some(retry::fresh_key::path_roots(value))
            }
            _ => None,
        })
        .flatten()
        .collect();
    match valid::check(args, &func) {
        Ok(config) => expand::expand(&config, func),
        Err(error) => expand::with_errors(&func, &error, &key_roots),
    }
    .into()
}

/// Implements `retry_runtime::Classify` from the variants' `#[classify(…)]` attributes;
/// documented at `retry_runtime::Classify`.
#[proc_macro_derive(Classify, attributes(classify))]
pub fn derive_classify(item: TokenStream) -> TokenStream {
    use classify::{args, expand, valid};
    let input = syn::parse_macro_input!(item as syn::DeriveInput);
    match args::parse(&input).and_then(|parsed| valid::check(&input, parsed)) {
        Ok(derive) => expand::expand(&derive),
        Err(error) => expand::with_errors(&input, &error),
    }
    .into()
}
