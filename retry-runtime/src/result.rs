//! What a `#[retry]` fn returns: a `Result`, under any alias.

/// The return type of a `#[retry]` fn: a `Result`, under any alias.
#[diagnostic::on_unimplemented(
    message = "`#[retry]` needs a fn that returns `Result<T, E>`, not `{Self}`",
    label = "not a `Result`",
    note = "the loop retries on `Err(e)` when `e` is transient; a fn that cannot fail has nothing to retry"
)]
pub trait RetryResult {
    /// The error type.
    type Error;
    /// The error, if this is one.
    fn failure(&self) -> Option<&Self::Error>;
    /// A failed result.
    fn failed(error: Self::Error) -> Self;
}

impl<T, E> RetryResult for Result<T, E> {
    type Error = E;
    #[inline(always)]
    fn failed(error: E) -> Self {
        Err(error)
    }
    #[inline(always)]
    fn failure(&self) -> Option<&E> {
        self.as_ref().err()
    }
}
