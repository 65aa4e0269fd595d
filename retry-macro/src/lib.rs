//! The `#[retry]` attribute of [`retry-runtime`](https://docs.rs/retry-runtime).
//!
//! Depend on `retry-runtime`, not on this crate: it re-exports the attribute as
//! `retry_runtime::retry`, and the code the attribute generates calls into it. The macro works
//! in three phases, one file each: `args` parses the attribute's arguments, `valid` applies
//! the retry rules (each error cites its rule id) and `expand` writes the loop.

mod args;
mod duration;
mod errors;
mod expand;
mod fresh_key;
mod valid;

use proc_macro::TokenStream;

/// Turns an async or blocking fn that returns `Result<T, E>` into a bounded, jittered,
/// exponential-backoff retry loop, refusing at compile time what the retry rules forbid.
///
/// `#[retry(read)]` or `#[retry(write, idempotency_key = EXPR)]`, then any of `attempts`,
/// `delay`, `max_delay`, `jitter`, `backoff`, `retry_if`, `system`, `crate`. See the
/// `retry-runtime` documentation.
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    let func = match expand::parse_fn(item.into()) {
        Ok(func) => func,
        Err(tokens) => return tokens.into(),
    };
    match args::parse(args.into()).and_then(|args| valid::check(args, &func)) {
        Ok(config) => expand::expand(&config, func),
        Err(error) => expand::with_errors(&func, &error),
    }
    .into()
}
