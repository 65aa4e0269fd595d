//! What both macros share: the grammar of their arguments ([`args`], with the one
//! `crate = "…"` parser in [`krate`]), the error collector ([`errors`]), spans, durations
//! written as strings, and the retry rules themselves ([`rules`]).

pub(crate) mod args;
pub(crate) mod duration;
pub(crate) mod errors;
pub(crate) mod krate;
pub(crate) mod spans;

/// The retry rules: the `retry-rules` crate, which `retry-runtime`'s `Policy::new` applies
/// too, so that the attribute and the runtime share one definition.
pub(crate) use retry_rules as rules;
