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
//! grammar, the `crate = "…"` parser, the error collector, spans, durations, and the rules
//! themselves, `retry-runtime`'s own `rules.rs` (a symlink), so that the attribute and the
//! runtime's `Policy::new` cannot disagree.

mod classify;
mod common;
mod retry;

/// Random token streams through both pipelines (proptest); the vocabulary lives next to the
/// tests.
#[cfg(test)]
#[path = "../tests/hostile/mod.rs"]
mod hostile;

use proc_macro::TokenStream;

/// Turns an async or blocking fn that returns `Result<T, E>` into a bounded, jittered,
/// exponential-backoff retry loop, refusing at compile time what the retry rules forbid.
///
/// `#[retry(read)]` or `#[retry(write, idempotency_key = EXPR)]`, then any of `attempts`,
/// `delay`, `max_delay`, `jitter`, `backoff`, `retry_if`, `system`, `crate`. See the
/// `retry-runtime` documentation.
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    use retry::{expand, valid};
    let func = match expand::parse_fn(item.into()) {
        Ok(func) => func,
        Err(tokens) => return tokens.into(),
    };
    match common::args::parse(args.into()).and_then(|args| valid::check(args, &func)) {
        Ok(config) => expand::expand(&config, func),
        Err(error) => expand::with_errors(&func, &error),
    }
    .into()
}

/// Implements `retry_runtime::Classify` for an error enum (or struct) from `#[classify(...)]` on
/// its variants: which errors are worth another attempt, and where the other side's Retry-After
/// hint is.
///
/// ```rust
/// use std::io;
/// use std::time::Duration;
/// use retry_runtime::Classify;
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum GatewayError {
///     /// Worth another attempt.
///     #[error("timed out")]
///     #[classify(transient)]
///     Timeout,
///     /// Worth another attempt, no sooner than the gateway asked.
///     #[error("unavailable")]
///     #[classify(transient, retry_after = retry_after)]
///     Unavailable { retry_after: Option<Duration> },
///     /// As transient as the inner error: its verdict and its hint.
///     #[error("i/o")]
///     #[classify(delegate)]
///     Io(#[from] io::Error),
///     /// Not marked: permanent.
///     #[error("bad request: {0}")]
///     BadRequest(String),
///     /// Explicitly permanent (R-RES-RE-X4).
///     #[error("circuit breaker open")]
///     #[classify(permanent)]
///     BreakerOpen,
/// }
///
/// let hint = Some(Duration::from_secs(1));
/// assert!(GatewayError::Timeout.is_transient());
/// assert!(GatewayError::Unavailable { retry_after: hint }.is_transient());
/// assert_eq!(GatewayError::Unavailable { retry_after: hint }.retry_after(), hint);
/// assert!(GatewayError::Io(io::ErrorKind::TimedOut.into()).is_transient());
/// assert!(!GatewayError::BadRequest("no such order".into()).is_transient());
/// assert!(!GatewayError::BreakerOpen.is_transient());
/// ```
///
/// On a variant (or on a struct, for the whole type), one kind at most:
///
/// - nothing, or `permanent`: never retried. Deny by default: an error you have not marked is
///   permanent ("if in doubt: no retry", R-RES-RE-1).
/// - `transient`: retried. Add `retry_after = field` (a field name, or an index in a tuple
///   variant: `retry_after = 0`) to read the hint from a `Duration` or `Option<Duration>` field.
/// - `delegate`: on a variant with exactly one field (`Io(io::Error)` or `Io { source }`), that
///   field's own `is_transient` and `retry_after`. When the field's type mentions a type
///   parameter, the impl gets a `Field: Classify` bound.
///
/// On the type: `#[classify(crate = "path")]` when `retry-runtime` is renamed. Other attributes
/// (thiserror's `#[error(...)]`, `#[source]`, `#[from]`) are left alone, so both derives go on
/// the same enum. Unions are refused. Every misuse is a compile error at the offending tokens,
/// all of them at once, each naming the fix.
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
