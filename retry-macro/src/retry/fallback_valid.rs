//! Phase 2: the rules of `fallback` ([`check`]): a read's only (a write's fallback is the
//! durable queue, R-RES-RE-5), not with `hedge`, and `fallback_on` only beside it.

use super::fallback::Fallback;
use super::options::{Kind, Options};
use crate::common::errors::Errors;

/// A fallback only on a read (a write's is the queue, R-RES-RE-5), not with `hedge`, and
/// `fallback_on` only with a fallback.
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
    if options.hedge.name.is_some() {
        errors.at(
            name,
            "`fallback` does not combine with `hedge` yet: remove one of them",
        );
    }
    Some(Fallback {
        expr: settings.expr.value.clone()?,
        refused_only: settings.on.given().unwrap_or(false),
    })
}
