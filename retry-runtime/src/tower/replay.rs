//! What both paths of [`RetryService`](super::RetryService) (the plain one in `service.rs`, the
//! hedged one in `hedged.rs`) share: the bound on a request body sent again, and the verdict on
//! a response.

use crate::Classify;
use crate::http::is_transient_status;

/// A request body [`RetryLayer`](super::RetryLayer) can send again: any `Clone` body
/// (`http_body_util::Full<Bytes>`, `String`, `Vec<u8>`, `()`).
#[diagnostic::on_unimplemented(
    message = "`RetryLayer` cannot send a `{Self}` body twice",
    label = "this request body cannot be replayed",
    note = "a retried request needs its body again: buffer a streaming body first (e.g. into `http_body_util::Full<bytes::Bytes>`), or leave this service without `RetryLayer`"
)]
pub trait ReplayableBody: Clone {}

impl<B: Clone> ReplayableBody for B {}

/// The verdict on a response: `None` for a response to return (success, 1xx–3xx, 4xx, an
/// unregistered status), `Some(hint)` for a transient status to retry after at least `hint`.
pub(super) fn transient_response<B>(
    response: &http::Response<B>,
) -> Option<Option<std::time::Duration>> {
    let status = response.status().as_u16();
    is_transient_status(status)
        .then(|| crate::http::StatusError::from_response(response).retry_after())
}
